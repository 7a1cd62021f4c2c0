"""The three staged gates (paper, Appendix H.1) as functions that raise GateFailure.

    execution/format  ->  accuracy (e <= tau_acc)  ->  runtime (t_agent <= tau_time)

The first gate that fails decides the outcome: F-Exec, F-Acc or F-Time.

A solver's outputs are hostile bytes. Whatever exception reading them raises (a JSON
nested 400,000 levels deep, an encrypted zip member, a corrupt deflate stream) is that
solver's F-Exec naming the file and the exception type: an item never ends without a
verdict, so a solver cannot drop the items it would fail from the denominator. Sizes are
checked as declared before anything is unpacked or allocated.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from contextlib import contextmanager
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
# solver_info is copied into the verdict by recursive code (dataclasses.asdict, json.dumps,
# xdist's wire): a few hundred levels overflow the stack there, after the gates
META_MAX_DEPTH = 32
NPZ_SLACK_BYTES = 1 << 20  # headers, axes and small extra arrays beside the solution
# np.savez stores, np.savez_compressed deflates. zipfile inflates bzip2 and lzma a whole
# read at once, whatever the member declares: 785 bytes of bzip2 are 1 GiB of zeros
NPZ_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
# np.save writes 1.0, or 2.0 for a header over 64 KiB; 3.0 only for non-Latin-1 field
# names, which no float array has
NPY_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
REASON_EXCERPT_CHARS = 200


def _excerpt(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= REASON_EXCERPT_CHARS else text[:REASON_EXCERPT_CHARS] + "..."


def _type_name(exc: BaseException) -> str:
    """RuntimeError, zlib.error, numpy._ArrayMemoryError: enough to tell where it came from."""
    module = type(exc).__module__.split(".")[0]
    return type(exc).__name__ if module == "builtins" else f"{module}.{type(exc).__name__}"


@contextmanager
def solver_bytes(what: str):
    """Any exception while parsing ``what`` (a file the solver wrote) becomes its F-Exec:
    the types that bytes can raise are not a list anyone can close. BaseException (Ctrl-C,
    SystemExit) is not the solver's and passes."""
    try:
        yield
    except GateFailure:
        raise
    except Exception as exc:
        raise exec_failure(f"{what} cannot be read ({_type_name(exc)}: {_excerpt(exc)})") from None


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
    except OSError as exc:  # the run folder is the solver's to empty or replace
        raise exec_failure(f"{name} cannot be read ({_type_name(exc)}: {_excerpt(exc)})") from None


def read_meta(workdir: Path) -> tuple[dict, bytes]:
    """meta.json checked against the contract: (its content, its bytes for the audit folder)."""
    raw = read_output(workdir, "meta.json", META_CAP_BYTES)
    if raw is None:
        raise exec_failure("meta.json is missing")
    with solver_bytes("meta.json"):  # RecursionError when deep, ValueError for an integer of 4,300+ digits
        try:
            meta = json.loads(raw.decode("utf-8", errors="replace"))
        except json.JSONDecodeError as exc:
            raise exec_failure(f"meta.json is not valid JSON ({exc.msg})") from None
    if not isinstance(meta, dict):
        raise exec_failure("meta.json must hold a JSON object")
    depth = nesting_depth(meta)
    if depth > META_MAX_DEPTH:
        raise exec_failure(f"meta.json nests {depth} levels deep, over the {META_MAX_DEPTH} allowed")
    wall = meta.get("wall_time_sec")
    if isinstance(wall, bool) or not isinstance(wall, (int, float)):
        raise exec_failure("meta.json lacks a numeric wall_time_sec")
    if not is_finite_number(wall):  # Python's json reads NaN, Infinity and 1e999999 (inf)
        raise exec_failure("meta.json wall_time_sec is not a finite number")
    if not isinstance(meta.get("status"), str):
        raise exec_failure("meta.json lacks a status string")
    if "solver_info" in meta and not isinstance(meta["solver_info"], dict):
        raise exec_failure("meta.json solver_info must be an object")
    return meta, raw


def nesting_depth(value) -> int:
    """Levels of lists and objects in a parsed JSON value (1 for a flat object), counted
    without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in children)
    return deepest


def is_finite_number(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond float's range
        return False


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
            raise exec_failure(
                f"{files[name]} is missing (binary output needs one file per array: {', '.join(files.values())})"
            )
        if len(raw) != expected * 8:
            raise exec_failure(
                f"{files[name]} holds {len(raw)} bytes = {len(raw) / 8:g} float64 values; the grid "
                f"of shape {grid.shape} needs {expected} ({expected * 8} bytes)"
            )
        with solver_bytes(files[name]):
            arrays[name] = np.frombuffer(raw, dtype="<f8").reshape(grid.shape)
    return arrays


def read_solution(
    raw: bytes, names: list[str], axis_names: tuple[str, ...], grid_shape: tuple[int, ...], valid: np.ndarray
) -> np.ndarray:
    """Check a solution.npz (its bytes) against the contract; return components stacked on
    the last axis."""
    with solver_bytes("solution.npz"):
        try:
            arrays = npz_arrays(raw, solution_cap_bytes(names, grid_shape))
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise exec_failure(f"solution.npz cannot be read as an .npz archive ({_excerpt(exc)})") from None
        return _solution_components(arrays, names, axis_names, grid_shape, valid)


def npz_arrays(raw: bytes, cap: int) -> dict[str, np.ndarray]:
    """The .npy members of an .npz by name (other members are ignored: np.load would hand
    out their bytes where an array is expected). Every size is checked as declared before
    anything is unpacked or allocated: the members' unpacked bytes and their arrays' bytes
    (np.load allocates a header's shape before reading any data) each within ``cap``."""
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        members = archive.infolist()
        unpacked = sum(member.file_size for member in members)
        if unpacked > cap:
            raise exec_failure(f"solution.npz unpacks to {unpacked} bytes, over the {cap}-byte cap for this grid")
        for member in members:
            if member.compress_type not in NPZ_METHODS:
                raise exec_failure(
                    f"solution.npz member {member.filename!r} is packed with method "
                    f"{member.compress_type}; only stored (np.savez) and deflated "
                    "(np.savez_compressed) members are read"
                )
        arrays, allocated = {}, 0
        for member in members:
            if not member.filename.endswith(".npy"):
                continue
            with archive.open(member) as stream:
                shape, dtype = _npy_header(stream, member.filename)
            allocated += math.prod(shape) * dtype.itemsize
            if allocated > cap:
                raise exec_failure(
                    f"solution.npz member {member.filename!r} declares shape {shape} of {dtype}: "
                    f"{allocated} bytes of arrays, over the {cap}-byte cap for this grid"
                )
            with archive.open(member) as stream:
                arrays[member.filename[: -len(".npy")]] = np.lib.format.read_array(stream, allow_pickle=False)
    return arrays


def _npy_header(stream, member: str) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(stream)
    read_header = NPY_HEADER_READERS.get(version)
    if read_header is None:
        raise exec_failure(
            f"solution.npz member {member!r} is .npy format {version[0]}.{version[1]}; "
            "float arrays are written as 1.0 or 2.0"
        )
    shape, _, dtype = read_header(stream)  # a header over 10,000 bytes: ValueError before it is parsed
    if dtype.hasobject:
        raise exec_failure(
            f"solution.npz member {member!r} holds Python objects (dtype {dtype}), expected a real float type"
        )
    return shape, dtype


def _solution_components(
    arrays: dict[str, np.ndarray],
    names: list[str],
    axis_names: tuple[str, ...],
    grid_shape: tuple[int, ...],
    valid: np.ndarray,
) -> np.ndarray:
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
            raise exec_failure(
                f"array {name!r} has {int(bad.sum())} NaN/inf values inside the domain "
                f"(first at index {tuple(int(i) for i in where)})"
            )
        components.append(array)
    return np.stack(components, axis=-1)


def accuracy_gate(error: float, tau_acc: float) -> None:
    if not math.isfinite(error) or error > tau_acc:
        raise GateFailure("F-Acc", f"rel. L2 error {error:.2e} > tau_acc {tau_acc:.2e}")


def time_gate(t_agent: float, tau_time: float) -> None:
    if t_agent > tau_time:
        raise GateFailure("F-Time", f"t_agent {t_agent:.3g} s > tau_time {tau_time:.3g} s")


def first_run_gate(t_first: float | None, tau_first: float | None) -> None:
    """The gated run, which starts with an empty kernel store, against alpha_time times the
    baseline's own first run: what the timed runs could read back from kept kernels had
    to be computed here, on the clock."""
    if t_first is not None and tau_first is not None and t_first > tau_first:
        raise GateFailure(
            "F-Time", f"first run {t_first:.3g} s > tau_first {tau_first:.3g} s (alpha_time x the baseline's first run)"
        )


def outcome_under(
    outcome: str,
    error: float | None,
    timed_errors: list[float],
    timed_failure: str | None,
    t_agent: float | None,
    tau_acc: float,
    tau_time: float,
    t_first: float | None = None,
    tau_first: float | None = None,
) -> str | None:
    """The outcome the same runs would get under other thresholds (a report's re-gating,
    a paired verdict's stored-calibration outcome); None where the runs do not decide it
    (an item that failed the accuracy gate without being timed)."""
    if outcome == "F-Exec":  # gate 1 does not depend on thresholds
        return "F-Exec"
    if error is not None and timed_errors:  # every run is judged: the worst decides
        error = max([error, *timed_errors])
    if error is None or not math.isfinite(error) or error > tau_acc:
        return "F-Acc"
    if timed_failure:
        return "F-Exec"
    if t_agent is None:
        return None
    first_too_slow = t_first is not None and tau_first is not None and t_first > tau_first
    return "PASS" if t_agent <= tau_time and not first_too_slow else "F-Time"
