"""The DOLFINx oracle at other resolutions: for numerical references and for
convergence studies. The oracle is the project's own trusted code, so it runs here in
the calling process (which must have DOLFINx), not in the sandbox.

A level is a multiple of the oracle's reference grade: a family module's REFERENCE_<NAME>
constants where it has them (the anchor an evaluation runs is leaner, so that it stays within
the time gate), else its own. Cells per length and per wavelength scale with the level and the
largest time step with its -1.5th power, so an O(dt^2) time error stays below the O(h^3)
error of P2 elements. The constants are read when the oracle solves, never bound earlier
(a default argument bound at import once kept every flow level at one resolution).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

FLOWS = ("stokes", "navier_stokes")  # their resolution lives (also) in the shared _flow module


def _oracle(oracle_dir: Path, family: str) -> tuple[Any, Any]:
    """The oracle's shared module (its DT_MAX is set per level) and the family's, imported
    here from ``oracle_dir``."""
    oracle_dir = Path(oracle_dir).resolve()
    for folder in (str(oracle_dir.parent), str(oracle_dir)):  # shared helpers, then the library's own
        if folder not in sys.path:
            sys.path.insert(0, folder)
    importlib.import_module("mpi4py.MPI")  # loads libmpi before dolfinx
    common = importlib.import_module("_oracle_common")
    module = importlib.import_module(family)
    # PETSc's initialisation resets SIGPIPE to its default: a later write to a closed socket
    # (an HTTP client in the same process) would then kill the process instead of raising
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    return common, module


def run_oracle(
    oracle_dir: Path, family: str, case_spec: dict, output_arrays: list[str], level: float = 1.0
) -> tuple[np.ndarray, dict]:
    """(components stacked on the last axis, solver_info) of the oracle at a level."""
    common, module = _oracle(oracle_dir, family)
    grade = _reference_grade([module] + ([importlib.import_module("_flow")] if family in FLOWS else []), level)
    saved_dt = common.DT_MAX
    common.DT_MAX = saved_dt / level**1.5
    cwd = os.getcwd()
    try:
        with tempfile.TemporaryDirectory() as work:
            os.chdir(work)
            module.solve(case_spec)
            with np.load("solution.npz") as data:
                fields = np.stack([np.asarray(data[name], dtype=float) for name in output_arrays], axis=-1)
            info = json.loads(Path("meta.json").read_text()).get("solver_info", {})
    finally:
        os.chdir(cwd)
        common.DT_MAX = saved_dt
        for target, name, value in grade:
            setattr(target, name, value)
    return fields, info


def run_baseline(oracle_dir: Path, family: str, case_spec: dict, output_arrays: list[str], setting: dict) -> np.ndarray:
    """The oracle as a calibration baseline (its record's ``setting`` for the library, as
    ``calibration_config.json`` gives it to a calibration run), here in this process."""
    _, module = _oracle(oracle_dir, family)
    calibration: Any = importlib.import_module("_calibration")
    cwd = os.getcwd()
    try:
        with tempfile.TemporaryDirectory() as work:
            os.chdir(work)
            Path("calibration_config.json").write_text(json.dumps(setting))
            calibration.calibration_setting.cache_clear()  # read once per process otherwise
            module.solve(case_spec)
            with np.load("solution.npz") as data:
                return np.stack([np.asarray(data[name], dtype=float) for name in output_arrays], axis=-1)
    finally:
        os.chdir(cwd)
        calibration.calibration_setting.cache_clear()


GRADED = (
    "CELLS_PER_LENGTH",
    "SLOW_FLOW_CELLS_PER_LENGTH",  # the Navier-Stokes oracle's slow flows (nu >= its SLOW_FLOW_NU)
    "CELLS_PER_LENGTH_3D",
    "CELLS_PER_WAVELENGTH",
    "CELLS_PER_WAVELENGTH_3D",
    "DT_SHARE",
    "CORNER_SIZE",
)


def _reference_grade(modules: list, level: float) -> list[tuple]:
    """Set the modules' resolution to ``level`` x their reference grade; returns what to
    restore. A module's REFERENCE_<NAME> (finer than the anchor's <NAME> an evaluation run
    uses) is the grade where it has one; cells per length scale with the level."""
    saved = []
    for target in modules:
        for name in GRADED:
            if not hasattr(target, name):
                continue
            saved.append((target, name, getattr(target, name)))
            value = getattr(target, f"REFERENCE_{name}", getattr(target, name))
            if "CELLS_PER_" in name:  # SLOW_FLOW_CELLS_PER_LENGTH too
                value = max(2, round(value * level))
            setattr(target, name, value)
    return saved
