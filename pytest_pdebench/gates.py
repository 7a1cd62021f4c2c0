"""The three staged gates (paper, Appendix H.1) as functions that raise GateFailure.

    execution/format  ->  accuracy (e <= tau_acc)  ->  runtime (t_agent <= tau_time)

The first gate that fails decides the outcome: F-Exec, F-Acc or F-Time.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import numpy as np


class GateFailure(Exception):
    """A submission failed a gate. ``outcome`` is F-Exec, F-Acc or F-Time."""

    def __init__(self, outcome: str, reason: str):
        self.outcome, self.reason = outcome, reason
        super().__init__(f"{outcome}: {reason}")


def exec_failure(reason: str) -> GateFailure:
    return GateFailure("F-Exec", reason)


def read_meta(workdir: Path) -> dict:
    path = workdir / "meta.json"
    if not path.is_file():
        raise exec_failure("meta.json is missing")
    try:
        meta = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise exec_failure(f"meta.json is not valid JSON ({exc.msg})") from None
    if not isinstance(meta, dict):
        raise exec_failure("meta.json must hold a JSON object")
    wall = meta.get("wall_time_sec")
    if isinstance(wall, bool) or not isinstance(wall, (int, float)):
        raise exec_failure("meta.json lacks a numeric wall_time_sec")
    if not isinstance(meta.get("status"), str):
        raise exec_failure("meta.json lacks a status string")
    if "solver_info" in meta and not isinstance(meta["solver_info"], dict):
        raise exec_failure("meta.json solver_info must be an object")
    return meta


def binary_outputs_to_npz(workdir: Path, names: list[str], grid) -> None:
    """The deal.II track's alternative output (paper, Appendix J): raw float64 arrays in
    row-major order of the grid's shape, ``solution_grid.bin`` for a single array or one
    ``<name>.bin`` per array. Converted to solution.npz (axes from the grid) so that the
    same checks apply; a solution.npz written by the program wins."""
    if (workdir / "solution.npz").exists():
        return
    files = {name: workdir / f"{name}.bin" for name in names}
    if len(names) == 1 and (workdir / "solution_grid.bin").is_file():
        files = {names[0]: workdir / "solution_grid.bin"}
    if not any(path.is_file() for path in files.values()):
        return  # read_solution reports the missing output
    arrays = {}
    expected = int(np.prod(grid.shape))
    for name, path in files.items():
        if not path.is_file():
            raise exec_failure(f"{path.name} is missing (binary output needs one file per array: "
                               f"{', '.join(p.name for p in files.values())})")
        size = path.stat().st_size
        if size != expected * 8:
            raise exec_failure(f"{path.name} holds {size} bytes = {size / 8:g} float64 values; the grid of shape "
                               f"{grid.shape} needs {expected} ({expected * 8} bytes)")
        arrays[name] = np.fromfile(path, dtype="<f8").reshape(grid.shape)
    axes = dict(zip(grid.axis_names, grid.axes))
    np.savez(workdir / "solution.npz", **arrays, **axes)


def read_solution(workdir: Path, names: list[str], axis_names: tuple[str, ...], grid_shape: tuple[int, ...],
                  valid: np.ndarray) -> np.ndarray:
    """Check solution.npz against the contract; return components stacked on the last axis."""
    path = workdir / "solution.npz"
    if not path.is_file():
        raise exec_failure("solution.npz is missing")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise exec_failure(f"solution.npz cannot be read as an .npz archive ({exc})") from None
    missing = [name for name in names + list(axis_names) if name not in arrays]
    if missing:
        raise exec_failure(f"solution.npz lacks arrays {missing} (has {sorted(arrays)})")
    for axis_index, axis in enumerate(axis_names):
        expected = grid_shape[::-1][axis_index]
        if arrays[axis].shape != (expected,):
            raise exec_failure(f"axis {axis!r} has shape {arrays[axis].shape}, expected ({expected},)")
    components = []
    for name in names:
        array = arrays[name]
        if array.shape != grid_shape:
            raise exec_failure(f"array {name!r} has shape {array.shape}, expected {grid_shape}")
        if not np.issubdtype(array.dtype, np.floating) and not np.issubdtype(array.dtype, np.integer):
            raise exec_failure(f"array {name!r} has dtype {array.dtype}, expected a real float type")
        array = array.astype(np.float64)
        bad = ~np.isfinite(array) & valid
        if bad.any():
            where = np.argwhere(bad)[0]
            raise exec_failure(f"array {name!r} has {int(bad.sum())} NaN/inf values inside the domain "
                               f"(first at index {tuple(int(i) for i in where)})")
        components.append(array)
    return np.stack(components, axis=-1)


def accuracy_gate(error: float, tau_acc: float) -> None:
    if not math.isfinite(error) or error > tau_acc:
        raise GateFailure("F-Acc", f"rel. L2 error {error:.2e} > tau_acc {tau_acc:.2e}")


def time_gate(t_agent: float, tau_time: float) -> None:
    if t_agent > tau_time:
        raise GateFailure("F-Time", f"t_agent {t_agent:.3g} s > tau_time {tau_time:.3g} s")
