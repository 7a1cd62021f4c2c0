"""How close the agent-visible data of a manufactured record comes to its answer.

Contract (the paper's sections 2 and J: the agent view must not expose the target field):
- Every agent-visible data field other than the initial condition (Dirichlet, Neumann,
  Robin and laplacian values, Robin alpha, non-constant coefficients, the forcing) is
  evaluated on the valid eval-grid points at t_end and compared with the exact output
  there, column by column as the record's output asks (a scalar, each component, or the
  magnitude of a vector). Its distance is the smallest relative L2 gap of the field
  itself, of the field times the constant fitted on the grid points next to the
  domain's edge, and of the field times the global least-squares constant. A field
  closer than ``LEAK_DISTANCE`` leaks.
- The initial condition is legitimate data, but returning it must fail by far: the
  relative gap between u(t0) and u(t_end) is at least ``INITIAL_CHANGE_ALPHA`` x tau_acc
  (the largest materialized tau_acc of the record) or, with no thresholds yet,
  ``INITIAL_CHANGE_FLOOR``.
- Constant fields (a number, or an expression without x, y, z, t) carry nothing about
  the solution and are not compared; nor are expressions of the unknown (reactions).
``dishonest_errors`` gives the errors three solvers that solve nothing would get from
the evaluator (boundary data evaluated everywhere, the forcing scaled to the edge, the
initial condition); ``rung_errors`` adds zeros and the reference with 1% noise, for
every record (the validity ladder's dishonest rungs, which must not pass; ``pdebench
leak-audit`` and the tests).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tabulate import tabulate

from . import expressions, metrics
from .cases import CaseRecord, load_cases
from .grid import EvalGrid, valid_mask
from .reference import exact_array, reference_fields, solve_only_part, with_part

LEAK_DISTANCE = 0.3
INITIAL_CHANGE_FLOOR = 0.5
INITIAL_CHANGE_ALPHA = 10.0
EPS_NORM = 1e-12
COMPONENTS = {"x": 0, "y": 1, "z": 2}


@dataclass(frozen=True)
class GridSample:
    """The valid grid points of a case, which of them lie next to the domain's edge, and
    the times the data are read at."""

    points: np.ndarray  # (N, dim)
    edge: np.ndarray  # (N,) bool
    t0: float
    t_end: float
    part: np.ndarray | None = None  # (N, c): the solution's solve-only part at t_end, where it has one

    @classmethod
    def of(cls, case_spec: dict) -> GridSample:
        grid = EvalGrid.from_spec(case_spec["eval_grid"])
        valid = valid_mask(case_spec, grid)
        time = case_spec["pde"].get("time")
        t0, t_end = (time.get("t0", 0.0), time["t_end"]) if time else (0.0, 0.0)
        return cls(grid.points()[valid.ravel()], edge_mask(valid)[valid], float(t0), float(t_end))

    @classmethod
    def of_record(cls, record: CaseRecord, case_dir: Path | None = None) -> GridSample:
        """The record's sample, with its solve-only part (read from ``case_dir``) if any."""
        spec = record.case_spec_dict()
        sample = cls.of(spec)
        grid = EvalGrid.from_spec(spec["eval_grid"])
        part = solve_only_part(record, grid, case_dir)
        if part is None:
            return sample
        flat = part.reshape(-1, part.shape[-1])[valid_mask(spec, grid).ravel()]
        return cls(sample.points, sample.edge, sample.t0, sample.t_end, flat)


def edge_mask(valid: np.ndarray) -> np.ndarray:
    """Valid points with an invalid neighbour along some axis (the grid's border counts)."""
    padded = np.pad(valid, 1, constant_values=False)
    interior = padded.copy()
    for axis in range(valid.ndim):
        interior &= np.roll(padded, 1, axis=axis) & np.roll(padded, -1, axis=axis)
    return valid & ~interior[tuple(slice(1, -1) for _ in range(valid.ndim))]


def _norm(values: np.ndarray) -> float:
    return float(np.linalg.norm(values))


def _fit(candidate: np.ndarray, target: np.ndarray) -> float:
    """The constant c minimising ||c candidate - target||."""
    denominator = float(np.sum(candidate * candidate))
    return float(np.sum(candidate * target)) / denominator if denominator > EPS_NORM**2 else 0.0


@dataclass(frozen=True)
class Distance:
    raw: float  # ||g - u|| / ||u||
    edge_scaled: float  # with the constant fitted next to the edge
    best_scaled: float  # with the global least-squares constant

    @property
    def smallest(self) -> float:
        return min(self.raw, self.edge_scaled, self.best_scaled)


def distance(candidate: np.ndarray, target: np.ndarray, edge: np.ndarray) -> Distance:
    """Relative L2 gaps of a candidate field from the target, as is and scaled."""
    scale = max(_norm(target), EPS_NORM)
    c_edge = _fit(candidate[edge], target[edge]) if edge.any() else 1.0
    c_best = _fit(candidate, target)
    return Distance(
        _norm(candidate - target) / scale,
        _norm(c_edge * candidate - target) / scale,
        _norm(c_best * candidate - target) / scale,
    )


def output_columns(values: np.ndarray, names: list[str]) -> list[np.ndarray]:
    """A field's columns matching the output arrays: a scalar field for every array; a
    vector field (N, d) per component (``*_x``) or as magnitude (``*_magnitude``)."""
    if values.ndim == 1:
        return [values for _ in names]
    columns = []
    for name in names:
        suffix = name.rpartition("_")[2]
        if name.endswith("_magnitude") or name.endswith("_mag"):
            columns.append(np.linalg.norm(values, axis=1))
        elif suffix in COMPONENTS and COMPONENTS[suffix] < values.shape[1]:
            columns.append(values[:, COMPONENTS[suffix]])
        else:
            columns.append(None)  # no matching part (a pressure array of a velocity field)
    return columns


def field_values(value, points: np.ndarray, when: float) -> np.ndarray:
    if isinstance(value, list):
        return expressions.evaluate_vector(value, points, when)
    return expressions.evaluate(value, points, when)


def exact_columns(record: CaseRecord, sample: GridSample, when: float) -> list[np.ndarray]:
    """The solution's output columns at the sample's points: the manufactured one, plus its
    solve-only part at t_end (it is zero at t0, and known on the grid at t_end only)."""
    names = record.case_spec.output.arrays
    if sample.part is not None and when == sample.t_end:
        return [with_part(record, name, sample.points, when, sample.part) for name in names]
    return [exact_array(record, name, sample.points, when) for name in names]


def _constant(value) -> bool:
    values = value if isinstance(value, list) else [value]
    symbols = set().union(*(expressions.parse_expression(v, allow=("u",)).free_symbols for v in values))
    return not (symbols & {expressions.x, expressions.y, expressions.z, expressions.t})


def _mentions_unknown(value) -> bool:
    values = value if isinstance(value, list) else [value]
    return any(expressions.u in expressions.parse_expression(v, allow=("u",)).free_symbols for v in values)


def visible_fields(record: CaseRecord) -> list[tuple[str, object]]:
    """(location, value) of every agent-visible data field compared with the answer."""
    spec = record.case_spec
    fields = [(f"pde.params.{name}", value) for name, value in spec.pde.params.items()]
    if spec.pde.forcing is not None:
        fields.append(("pde.forcing", spec.pde.forcing.value))
    for kind in ("dirichlet", "neumann", "robin", "laplacian"):
        for index, condition in enumerate(spec.bc.conditions(kind)):
            fields.append((f"bc.{kind}[{index}].value", condition.value))
            if condition.alpha is not None:
                fields.append((f"bc.{kind}[{index}].alpha", condition.alpha))
    return [(where, value) for where, value in fields if not _constant(value) and not _mentions_unknown(value)]


def manufactured(record: CaseRecord) -> bool:
    meta = record.evaluation_metadata
    return meta.construction_method == "manufactured_solution" and "u" in (meta.manufactured_solution or {})


def field_distances(record: CaseRecord, sample: GridSample | None = None) -> list[tuple[str, str, Distance]]:
    """(location, output array, distance) for every visible field and output column."""
    sample = sample or GridSample.of_record(record)
    names = record.case_spec.output.arrays
    targets = exact_columns(record, sample, sample.t_end)
    out = []
    for where, value in visible_fields(record):
        columns = output_columns(field_values(value, sample.points, sample.t_end), names)
        out += [
            (where, name, distance(column, target, sample.edge))
            for name, column, target in zip(names, columns, targets)
            if column is not None
        ]
    return out


def relative_gap(candidate: list[np.ndarray], target: list[np.ndarray]) -> float:
    """The evaluator's error: columns stacked (metrics.relative_l2_error on valid points)."""
    a, b = np.stack(candidate, axis=-1), np.stack(target, axis=-1)
    return _norm(a - b) / max(_norm(b), EPS_NORM)


def initial_change(record: CaseRecord, sample: GridSample | None = None) -> float | None:
    """||u(t0) - u(t_end)|| / ||u(t_end)|| on the grid; None for a steady case."""
    if record.case_spec.pde.time is None:
        return None
    sample = sample or GridSample.of_record(record)
    return relative_gap(exact_columns(record, sample, sample.t0), exact_columns(record, sample, sample.t_end))


def initial_change_needed(record: CaseRecord) -> float:
    taus = [t.tau_acc for t in record.evaluation_metadata.thresholds.values()]
    return INITIAL_CHANGE_ALPHA * max(taus) if taus else INITIAL_CHANGE_FLOOR


def leak_problems(record: CaseRecord, case_dir: Path | None = None) -> list[str]:
    """What gives the answer away in a manufactured record (empty: nothing); ``case_dir``:
    where its solve-only part is stored, if it has one."""
    if not manufactured(record):
        return []
    sample = GridSample.of_record(record, case_dir)
    problems = [
        f"{where} is {d.smallest:.0%} from the exact {name} at t_end "
        f"(as is {d.raw:.0%}, edge-scaled {d.edge_scaled:.0%}, best multiple {d.best_scaled:.0%}; "
        f"at least {LEAK_DISTANCE:.0%} needed)"
        for where, name, d in field_distances(record, sample)
        if d.smallest < LEAK_DISTANCE
    ]
    change, needed = initial_change(record, sample), initial_change_needed(record)
    if change is not None and change < needed:
        problems.append(
            f"the solution changes by {change:.2g} between t0 and t_end (relative): returning the "
            f"initial condition would come within {needed:.2g}"
        )
    return problems


DISHONEST_SOLVERS = ("boundary data", "scaled forcing", "initial condition")


def dishonest_errors(record: CaseRecord, case_dir: Path | None = None) -> dict[str, float]:
    """The evaluator's error of each solver that solves nothing (where it applies):
    the Dirichlet data evaluated everywhere (the best of its conditions), the forcing
    times the constant that fits it to the solution on the points next to the edge,
    the initial condition."""
    spec = record.case_spec
    sample = GridSample.of_record(record, case_dir)
    names = spec.output.arrays
    target = exact_columns(record, sample, sample.t_end)
    errors: dict[str, float] = {}

    def columns(value, when):
        found = output_columns(field_values(value, sample.points, when), names)
        return None if any(c is None for c in found) else found

    gaps = [
        relative_gap(c, target)
        for condition in spec.bc.conditions("dirichlet")
        if (c := columns(condition.value, sample.t_end)) is not None
    ]
    if gaps:
        errors["boundary data"] = min(gaps)
    if spec.pde.forcing is not None and (forcing := columns(spec.pde.forcing.value, sample.t_end)) is not None:
        stacked, wanted = np.stack(forcing, -1), np.stack(target, -1)
        c = _fit(stacked[sample.edge], wanted[sample.edge]) if sample.edge.any() else 0.0
        errors["scaled forcing"] = relative_gap([c * f for f in forcing], target)
    if spec.ic is not None and (initial := columns(spec.ic.value, sample.t0)) is not None:
        errors["initial condition"] = relative_gap(initial, target)
    return errors


NOISE = 0.01
RUNGS = (*DISHONEST_SOLVERS, "zeros", "exact + 1% noise")


def rung_errors(record: CaseRecord, case_dir=None) -> dict[str, float]:
    """The evaluator's error of every dishonest rung that applies to the record: those of
    ``dishonest_errors`` (manufactured records), zeros, and the reference itself with 1%
    relative Gaussian noise on every point (seeded by the case id)."""

    errors = dishonest_errors(record, case_dir) if manufactured(record) else {}
    spec = record.case_spec_dict()
    grid = EvalGrid.from_spec(spec["eval_grid"])
    valid = valid_mask(spec, grid)
    reference = reference_fields(record, grid, case_dir)
    errors["zeros"] = metrics.relative_l2_error(np.zeros_like(reference), reference, valid)
    seed = int.from_bytes(hashlib.sha256(f"{record.id}:noise".encode()).digest()[:8], "little")
    noise = np.random.default_rng(seed).standard_normal(reference.shape)
    errors["exact + 1% noise"] = metrics.relative_l2_error(reference * (1 + NOISE * noise), reference, valid)
    return errors


def leak_audit(cases: Path, library: str, fmt: str = "simple") -> str:
    """``pdebench leak-audit``: per family of the records under ``cases``, how many records and
    manufactured ones there are, how many each dishonest rung passes (its evaluator error
    within the record's ``library`` tau_acc, or LEAK_DISTANCE where the record has no
    thresholds yet) and how many the leak check rejects; a table (tabulate format ``fmt``)
    and a line that says how to read it. A suite whose data give the answer away shows here
    before any solver runs."""
    counts: dict[str, Counter] = {}
    untuned = 0
    for path, _, record in load_cases(cases):
        row = counts.setdefault(record.family, Counter())
        row["records"] += 1
        row["manufactured"] += manufactured(record)
        thresholds = record.evaluation_metadata.thresholds.get(library)
        untuned += thresholds is None
        tau = thresholds.tau_acc if thresholds else LEAK_DISTANCE
        for solver, error in rung_errors(record, path.parent).items():
            row[solver] += error <= tau
        row["leaking"] += bool(leak_problems(record, path.parent))
    columns = ["records", "manufactured", *RUNGS, "leaking"]
    total = sum(counts.values(), Counter())
    rows = [[family, *(row[c] for c in columns)] for family, row in sorted(counts.items())]
    table = tabulate(
        rows + [["all", *(total[c] for c in columns)]],
        headers=["family", "records", "manufactured", *(f"{s} passes" for s in RUNGS), "leaking"],
        tablefmt=fmt,
    )
    return (
        f"{table}\n\npasses: the evaluator's error <= the record's {library} tau_acc"
        + (f" ({untuned} records without one: <= {LEAK_DISTANCE})" if untuned else "")
        + "; leaking: rejected by the leak check of --pde-validate (leaks.py)"
    )
