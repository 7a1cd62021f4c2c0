"""The three staged gates (paper, Appendix H.1) as functions that raise GateFailure.

    execution/format  ->  accuracy (e <= tau_acc)  ->  runtime (t_agent <= tau_time)

The first gate that fails decides the outcome: F-Exec, F-Acc or F-Time.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path

import numpy as np

from .run_files import UnsafeOutput, read_run_file


class GateFailure(Exception):
    """A submission failed a gate. ``outcome`` is F-Exec, F-Acc or F-Time."""

    def __init__(self, outcome: str, reason: str):
        self.outcome, self.reason = outcome, reason
        super().__init__(f"{outcome}: {reason}")


def exec_failure(reason: str) -> GateFailure:
    return GateFailure("F-Exec", reason)


META_CAP_BYTES = 1 << 20  # meta.json: a small JSON object
NPZ_SLACK_BYTES = 1 << 20  # headers, axes and small extra arrays beside the solution


def solution_cap_bytes(names: list[str], grid_shape: tuple[int, ...]) -> int:
    """Largest solution.npz (and its unpacked members) accepted: float64 arrays of the grid
    twice over plus slack; a larger file is not a solution of this case."""
    return 2 * 8 * int(np.prod(grid_shape)) * max(len(names), 1) + NPZ_SLACK_BYTES


def read_output(workdir: Path, name: str, max_bytes: int) -> bytes | None:
    """A run output as bytes (None if absent); F-Exec for a link, FIFO, device or oversize file."""
    try:
        return read_run_file(workdir, name, max_bytes)
    except UnsafeOutput as exc:
        raise exec_failure(str(exc)) from None


def read_meta(workdir: Path) -> tuple[dict, bytes]:
    """meta.json checked against the contract: (its content, its bytes for the audit folder)."""
    raw = read_output(workdir, "meta.json", META_CAP_BYTES)
    if raw is None:
        raise exec_failure("meta.json is missing")
    try:
        meta = json.loads(raw.decode("utf-8", errors="replace"))
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
    return meta, raw


def read_solution_file(workdir: Path, names: list[str], grid, binary_outputs: bool) -> bytes:
    """The bytes of the run's solution.npz. Tracks with ``binary_outputs`` (deal.II, paper
    Appendix J) may write raw float64 arrays in row-major order of the grid's shape instead,
    ``solution_grid.bin`` for a single array or one ``<name>.bin`` per array; they are
    packed into an .npz here (axes from the grid) so that the same checks apply. A
    solution.npz written by the program wins."""
    cap = solution_cap_bytes(names, grid.shape)
    raw = read_output(workdir, "solution.npz", cap)
    if raw is not None:
        return raw
    if binary_outputs:
        arrays = _binary_outputs(workdir, names, grid)
        if arrays is not None:
            buffer = io.BytesIO()
            np.savez(buffer, **arrays, **dict(zip(grid.axis_names, grid.axes)))
            return buffer.getvalue()
    raise exec_failure("solution.npz is missing")


def _binary_outputs(workdir: Path, names: list[str], grid) -> dict | None:
    expected = int(np.prod(grid.shape))
    files = {name: f"{name}.bin" for name in names}
    if len(names) == 1 and read_output(workdir, "solution_grid.bin", expected * 8 + NPZ_SLACK_BYTES) is not None:
        files = {names[0]: "solution_grid.bin"}
    contents = {name: read_output(workdir, file, expected * 8 + NPZ_SLACK_BYTES) for name, file in files.items()}
    if all(raw is None for raw in contents.values()):
        return None  # the caller reports the missing output
    arrays = {}
    for name, raw in contents.items():
        if raw is None:
            raise exec_failure(f"{files[name]} is missing (binary output needs one file per array: "
                               f"{', '.join(files.values())})")
        if len(raw) != expected * 8:
            raise exec_failure(f"{files[name]} holds {len(raw)} bytes = {len(raw) / 8:g} float64 values; the grid "
                               f"of shape {grid.shape} needs {expected} ({expected * 8} bytes)")
        arrays[name] = np.frombuffer(raw, dtype="<f8").reshape(grid.shape)
    return arrays


def read_solution(raw: bytes, names: list[str], axis_names: tuple[str, ...], grid_shape: tuple[int, ...],
                  valid: np.ndarray) -> np.ndarray:
    """Check a solution.npz (its bytes) against the contract; return components stacked on
    the last axis."""
    cap = solution_cap_bytes(names, grid_shape)
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:  # sizes first: no decompression bomb
            unpacked = sum(member.file_size for member in archive.infolist())
        if unpacked > cap:
            raise exec_failure(f"solution.npz unpacks to {unpacked} bytes, over the {cap}-byte cap for this grid")
        with np.load(io.BytesIO(raw), allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
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
