"""The options the pytest plugin (``--pde-NAME``) and the ``pdebench`` command (``--NAME``)
share, each declared once: its name, what it names and how it is read. A caller adds the
default it has and what that default is (a command's defaults differ with what it does).

The declaring function takes the caller's ``addoption`` (pytest's ``group.addoption`` or
argparse's ``add_argument``: both take argparse's keywords), as pytest-benchmark's plugin
and command share their storage options.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TRACKS = "dolfinx, firedrake or dealii"

SHARED: dict[str, dict[str, Any]] = {
    "library": {"metavar": "NAME", "help": f"the library track: {TRACKS}"},
    "cases": {"metavar": "PATH", "help": "a case file (JSONL) or a folder of them"},
    "calibrations": {"metavar": "DIR", "help": "the calibration folder: a file per track and machine"},
    "oracle": {"metavar": "DIR", "help": "the oracle's solvers, laid out as a submissions folder (DIR/<library>/)"},
    "runs": {"type": int, "metavar": "N", "help": "timed runs per item, averaged into its time"},
}


def add_shared(
    addoption: Callable[..., Any],
    prefix: str,
    name: str,
    default: Any = None,
    said: str | None = None,
    more: str = "",
    **extra: Any,
) -> None:
    """Declare ``--<prefix><name>`` through ``addoption``: the shared meaning, then ``more``
    (what this caller adds to it), then ``(default: said)``; ``said`` defaults to the
    default itself. ``extra``: other argparse keywords (``action="append"``)."""
    spec = dict(SHARED[name])
    shown = said if said is not None else default
    spec["help"] = spec["help"] + (f"; {more}" if more else "") + (f" (default: {shown})" if shown is not None else "")
    if default is not None:
        spec["default"] = default
    if extra.get("action") == "append":
        spec.pop("type", None)
    addoption(f"--{prefix}{name}", **spec, **extra)
