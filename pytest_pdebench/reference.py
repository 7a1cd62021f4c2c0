"""The reference field u_GT of a case on its evaluation grid (evaluator-only).

Manufactured-solution cases evaluate the exact solution at the final time (or t=0 for
steady problems), plus the stored part only a solve recovers where the record has one
(``evaluation_metadata.solve_only``); numerical-reference cases load a stored array file
named by ``evaluation_metadata.reference_path``, relative to the case file's folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .cases import CaseRecord
from .grid import EvalGrid

if TYPE_CHECKING:
    from types import ModuleType


class ReferenceError(RuntimeError):
    pass


def _expressions() -> ModuleType:
    """expressions.py, imported by the first manufactured reference (sympy: about a second),
    not by the session's start: a collection, a run of stored references need none of it."""
    from . import expressions

    return expressions


def final_time(record: CaseRecord) -> float:
    time = record.case_spec.pde.time
    return time.t_end if time else 0.0


COMPONENT_SUFFIXES = {"x": 0, "y": 1, "z": 2}


def exact_array(record: CaseRecord, name: str, points: np.ndarray, when: float) -> np.ndarray:
    """One output array from the manufactured solution: an entry of that name, a
    component ``<v>_x`` of a vector entry ``<v>``, or a ``*_magnitude``/``*_mag``
    (the Euclidean norm of the vector entry ``u``)."""
    exact = record.evaluation_metadata.manufactured_solution or {}
    if name in exact and not isinstance(entry := exact[name], list):
        return _expressions().evaluate(entry, points, when)
    base, _, suffix = name.rpartition("_")
    if base in exact and isinstance(vector := exact[base], list) and suffix in COMPONENT_SUFFIXES:
        return _expressions().evaluate(vector[COMPONENT_SUFFIXES[suffix]], points, when)
    if (name.endswith("_magnitude") or name.endswith("_mag")) and isinstance(u := exact.get("u"), list):
        return np.linalg.norm(_expressions().evaluate_vector(u, points, when), axis=1)
    raise ReferenceError(
        f"case {record.id}: the manufactured solution gives no output array {name!r} (it has {sorted(exact)})"
    )


def missing_case_data(record: CaseRecord, case_dir: Path | None) -> str | None:
    """What the harness itself lacks to judge ``record`` (its stored reference, or its
    solve-only part's file), said in a sentence; None when nothing is missing. Checked when an
    item is planned, before any run or model call: the item is then not judged, never the
    solver's failure."""
    meta = record.evaluation_metadata
    if meta.construction_method == "manufactured_solution":
        name = meta.solve_only.path if meta.solve_only else None
    elif not meta.reference_path:
        return f"case {record.id} has no reference_path for its numerical reference"
    else:
        name = meta.reference_path
    if name and not (path := Path(case_dir or ".") / name).is_file():
        return (
            f"case {record.id}: its data file {path} is missing (the case's, not the solver's: a record copied "
            f"into another case file needs {name} beside that file too)"
        )
    return None


def solve_only_part(record: CaseRecord, grid: EvalGrid, case_dir: Path | None = None) -> np.ndarray | None:
    """delta, the part of a manufactured solution only a solve recovers, on the grid at
    t_end: components stacked on the last axis (None: the record has none)."""
    part = record.evaluation_metadata.solve_only
    if part is None:
        return None
    path = Path(case_dir or ".") / part.path
    if not path.is_file():
        raise ReferenceError(f"case {record.id}: the solve-only part's file {path} is missing")
    with np.load(path) as data:
        names = sorted(data.files)
        columns = [np.asarray(data[name], dtype=float) for name in names]
    if any(c.shape != grid.shape for c in columns):
        raise ReferenceError(
            f"case {record.id}: the solve-only part in {path} does not have the grid shape {grid.shape}"
        )
    return np.stack(columns, axis=-1)


def with_part(record: CaseRecord, name: str, points: np.ndarray, when: float, part: np.ndarray) -> np.ndarray:
    """Output array ``name`` of the manufactured solution plus ``part`` (N, c) at ``points``:
    a scalar plus its one column, a component plus its column, a magnitude of the sum."""
    exact = (record.evaluation_metadata.manufactured_solution or {})["u"]
    if not isinstance(exact, list):
        return _expressions().evaluate(exact, points, when) + part[:, 0]
    vector = _expressions().evaluate_vector(exact, points, when) + part
    suffix = name.rpartition("_")[2]
    if suffix in COMPONENT_SUFFIXES and not name.endswith(("_magnitude", "_mag")):
        return vector[:, COMPONENT_SUFFIXES[suffix]]
    if name.endswith(("_magnitude", "_mag")) or name == "u":
        return np.linalg.norm(vector, axis=1)
    raise ReferenceError(f"case {record.id}: no output array {name!r} from a solution with a solve-only part")


def reference_fields(record: CaseRecord, grid: EvalGrid, case_dir: Path | None = None) -> np.ndarray:
    """Reference components stacked on the last axis: shape grid.shape + (c,)."""
    names = record.case_spec.output.arrays
    meta = record.evaluation_metadata
    if meta.construction_method == "manufactured_solution":
        points, when = grid.points(), final_time(record)
        part = solve_only_part(record, grid, case_dir)
        if part is not None:
            flat = part.reshape(-1, part.shape[-1])
            columns = [with_part(record, name, points, when, flat).reshape(grid.shape) for name in names]
        else:
            columns = [exact_array(record, name, points, when).reshape(grid.shape) for name in names]
        return np.stack(columns, axis=-1)
    if not meta.reference_path:
        raise ReferenceError(f"case {record.id}: no reference_path for its numerical reference")
    path = Path(case_dir or ".") / meta.reference_path
    if not path.is_file():
        raise ReferenceError(f"case {record.id}: reference file {path} is missing")
    with np.load(path) as data:
        missing = [name for name in names if name not in data]
        if missing:
            raise ReferenceError(f"case {record.id}: reference file {path} lacks arrays {missing}")
        columns = [np.asarray(data[name], dtype=float) for name in names]
    if any(c.shape != grid.shape for c in columns):
        raise ReferenceError(f"case {record.id}: reference arrays in {path} do not have the grid shape {grid.shape}")
    return np.stack(columns, axis=-1)
