"""Running a solver in isolation: one process tree, limits, a timeout that kills it.

A ``RunRequest`` says what to run (argv and environment, with ``{work}``,
``{cache}``, ``{kernels}`` and ``{harness}`` placeholders for the paths the solver
sees), which host directories it may read, and its limits. A backend turns it into a
``RunResult``:

- ``bubblewrap`` (default): a fresh user, pid, network, ipc and uts namespace as the
  unprivileged uid 65534; only /usr, the track's runtime and the kernel store
  (read-only), the run's working directory and its own cache folder (read-write)
  exist inside.
- ``docker``: a fresh container of the track's image per run (``docker_backend.py``).
- ``unsandboxed``: a plain child process in its own session, for machines without
  bubblewrap; chosen only by ``--pde-sandbox=none`` and announced with a warning.

Modules: ``runs`` (request, result, limits), ``processes`` (live runs, logs, marker,
killing), ``base`` (the run loop backends share), ``bubblewrap`` with ``warm`` and the
zygote, ``local`` (no sandbox), ``docker_backend``.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import HARNESS_DIR, RUNNER, Backend
from .bubblewrap import BWRAP_INSTALL_HINT, BubblewrapBackend
from .local import UnsandboxedBackend
from .processes import abort_live_runs, live_run, owned_by
from .runs import Limits, RunRequest, RunResult, SandboxError, WarmSpec

__all__ = [
    "BACKENDS",
    "BWRAP_INSTALL_HINT",
    "HARNESS_DIR",
    "RUNNER",
    "Backend",
    "BubblewrapBackend",
    "Limits",
    "RunRequest",
    "RunResult",
    "SandboxError",
    "UnsandboxedBackend",
    "WarmSpec",
    "abort_live_runs",
    "add_backends",
    "backend_names",
    "get_backend",
    "live_run",
    "owned_by",
]


def _docker_backend() -> Backend:
    from .docker_backend import DockerBackend  # imports the docker SDK only when chosen

    return DockerBackend()


BACKENDS = {"bubblewrap": BubblewrapBackend, "docker": _docker_backend, "none": UnsandboxedBackend}
_added: dict[str, Callable[[], Backend]] = {}  # by plugins (hookspecs.pytest_pdebench_add_backends)


def add_backends(backends: dict[str, Callable[[], Backend]]) -> None:
    """Backends a plugin adds, by name; a built-in name cannot be taken (raises ValueError)."""
    taken = sorted(set(backends) & set(BACKENDS))
    if taken:
        raise ValueError(f"a plugin adds a sandbox backend named {', '.join(taken)}: a built-in name; give it another")
    _added.update(backends)


def backend_names() -> list[str]:
    return [*BACKENDS, *_added]


def get_backend(name: str) -> Backend:
    factory = BACKENDS.get(name) or _added.get(name)
    if factory is None:
        raise ValueError(f"unknown sandbox {name!r}; choose one of {', '.join(backend_names())}")
    return factory()
