"""The benchmark's extension points: hooks another pytest plugin implements to add what this
repository does not hold. The plugin adds them to pytest's hook registry
(``plugin.pytest_addhooks``); a project implements one in its ``conftest.py`` or in a plugin
of its own, with the hook's name and any subset of its arguments.

Each is called once per process that runs pytest (the controller and every xdist worker),
when a ``--pde-*`` option (or a source from ``pytest_pdebench_source``) starts a benchmark
run; a Dask cluster's workers run no pytest, so what runs there (``--pde-cluster``) is the
built-in backends and tracks only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from .libraries import Track
    from .sandbox import Backend
    from .sources import Source


def pytest_pdebench_add_backends(config: pytest.Config, backends: dict[str, Callable[[], Backend]]) -> None:
    """Add sandbox backends: ``backends[name] = factory`` (a callable that returns a
    ``sandbox.Backend``), chosen with ``--pde-sandbox=name``. A built-in name cannot be
    taken. ``pytest_pdebench.testing.conformance.check_backend`` is the suite of checks the
    built-in backends pass: run it on yours."""


def pytest_pdebench_add_tracks(config: pytest.Config, tracks: dict[str, Track]) -> None:
    """Replace how a library's submissions are built and run: ``tracks[name] = track`` (a
    ``libraries.Track`` for dolfinx, firedrake or dealii: the cases name only these)."""


@pytest.hookspec(firstresult=True)
def pytest_pdebench_source(config: pytest.Config) -> Source | None:
    """A source of submissions besides a folder, a model and a code agent (``sources.Source``:
    ``draft`` gives an item's submission, ``summary`` the verdict's ``llm`` block); it starts
    a benchmark run by itself, and goes with no other source option. None: not this run."""


def pytest_pdebench_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """Add to what the run's report says of the machine (``pde.machine_info`` in the JSON
    report's metadata): keys of JSON values."""


def pytest_pdebench_verdict(config: pytest.Config, verdict: dict[str, Any], extra: dict[str, Any]) -> None:
    """The last word on an item's verdict, on the process that judged it: add keys of JSON
    values to ``extra`` (the verdict's ``extra`` in the JSON report). ``verdict`` is a copy:
    the gates' outcome is the judge's alone."""
