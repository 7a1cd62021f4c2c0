"""FEM library tracks: where a track's runtime lives and how a submission is run.

A track is found lazily (the first item that needs it), so collection never imports
a FEM library. A missing runtime skips that track's items with an install hint.
"""

from __future__ import annotations

import functools

from ..bundled import cache_root  # cxx_toolchain.py takes it from here (its bytes are fixed)
from ..containers import ContainerError, image_for
from .base import (
    OPEN_MPI_SINGLETON_ENV,
    BuildResult,
    PythonTrack,
    Runtime,
    RuntimeMissing,
    Track,
    thread_env,
)
from .dealii import DealiiTrack
from .dolfinx import DolfinxTrack
from .firedrake import FiredrakeTrack

__all__ = [
    "BuildResult",
    "OPEN_MPI_SINGLETON_ENV",
    "PythonTrack",
    "Runtime",
    "RuntimeMissing",
    "Track",
    "cache_root",
    "thread_env",
    "detect_runtime",
    "get_track",
    "use_tracks",
]


_replaced: dict[str, Track] = {}  # by plugins (hookspecs.pytest_pdebench_add_tracks)


def _tracks() -> dict[str, Track]:
    return {**{track.name: track for track in (DolfinxTrack(), FiredrakeTrack(), DealiiTrack())}, **_replaced}


def use_tracks(tracks: dict[str, Track]) -> None:
    """Tracks a plugin gives for the cases' libraries, in place of the built-in ones; raises
    ValueError for another name (a case names only the three)."""
    built_in = _tracks()
    unknown = sorted(set(tracks) - set(built_in))
    if unknown:
        raise ValueError(f"a plugin gives a track for {', '.join(unknown)}: the cases name only {', '.join(built_in)}")
    _replaced.update(tracks)
    get_track.cache_clear()
    _detect_runtime.cache_clear()


@functools.cache
def get_track(name: str) -> Track:
    tracks = _tracks()
    if name not in tracks:
        raise ValueError(f"unknown library {name!r}; choose from {', '.join(tracks)}")
    return tracks[name]


def detect_runtime(name: str, sandbox: str = "bubblewrap", image: str | None = None) -> Runtime:
    """The track's runtime, probed once per process and cache root (a runtime names folders
    under it); raises RuntimeMissing. In the docker sandbox it is the one inside the track's
    image (``image``: another image than the recipe's, from --pde-image)."""
    return _detect_runtime(name, sandbox, image, cache_root())


@functools.cache
def _detect_runtime(name: str, sandbox: str, image: str | None, root: object) -> Runtime:
    track = get_track(name)
    if sandbox != "docker":
        return track.detect()
    try:
        image_id, labels = image_for(name, image)
    except ContainerError as exc:
        raise RuntimeMissing(str(exc)) from None
    return track.detect_container(image_id, labels)
