"""A part of the solution that only a solve recovers, so that no reading of the data gives
the answer.

A manufactured record's data are written from its exact solution u_m: the forcing is
L(u_m), the boundary data carry u_m's trace. Whatever the data are made of, u_m is then
within reach of rewriting their text, or of a least-squares fit in the span of their
functions (the operator maps the designs' exponentials, trigonometric products and
Gaussians to combinations of the same functions). So the forcing gets one more term,
s * F, with F a smooth field of oblique waves drawn from the case id, and nothing else
changes: the boundary and initial data still carry u_m, which now misses the solution by
the part delta that F drives,

    L(delta) = s * F  in the domain,  homogeneous data on the boundary,  delta(t0) = 0,

whose closed form no one has (F's own functions solve the equation in the domain but not
the boundary conditions; the correction is the solve). The solution is u = u_m + delta.

- Linear families: delta = s * delta_1, where delta_1 solves the problem above with F;
  delta_1 is computed by the oracle at its reference grade (1/2, 1 and 2 times it, as the
  numerical references are: refinement.py). s is as large as keeps the calibration
  baseline's error within RATIO_BUDGET of what it was (the baseline is run on delta_1 to
  price it), but no less than makes u_m miss the output arrays by MIN_TAUS x tau_acc,
  and no more than MAX_SHARE of u_m. The reference is u_m, exact, plus delta on the grid.
- Nonlinear families (Burgers, Navier-Stokes, reaction-diffusion with a nonlinear
  reaction): no superposition; the whole perturbed problem is solved at the three levels
  (s from a first solve, at the smallest share) and delta is the finest field less u_m.

A part is kept only if the levels refine the discretization, converge (g12 < g01), and the
estimate of the stored field's error (the gap between levels 1 and 2 times r / (1 - r),
r = g12 / g01 but at least SLOWEST_RATIO) is at most REFERENCE_SHARE x tau_acc.

delta is stored on the evaluation grid (float32, ``references/<id>.solve_only.npz``,
evaluator-only: never mounted into a run), per component for vector fields, and the record
notes the added forcing term in ``evaluation_metadata.solve_only`` (the static checks
subtract it).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import sympy as sp

from ..cases import CaseRecord, ExpressionOrVector, SolveOnlyPart, stored_error
from ..domains import resolve_geometry
from ..expressions import expression_to_string, parse_expression, x, y, z
from ..expressions import u as U
from ..grid import EvalGrid, valid_mask
from ..validation import SOLVE_ONLY_TAUS
from .attack import ATTACK_MARGIN, attack, within_reason
from .refinement import run_baseline, run_oracle

# how large delta is (||delta|| / ||u_m|| on the grid at t_end): large enough that u_m, which
# the text may give, misses the solution's output arrays by MIN_TAUS x the largest tau_acc
# of the record's libraries (the static check asks for 5), at most MAX_SHARE; within that,
# as large as keeps the calibration baseline's error within RATIO_BUDGET of what it was
# (the difficulty holds)
MIN_TAUS, MAX_SHARE, RATIO_BUDGET = 6.0, 0.15, 1.1
# a part is kept only if the calibration baseline, run on the record with the part, is at most
# RATIO_CAP x as far off as before (the difficulty holds: the paper's thresholds come from that
# error), and the share still clears SOLVE_ONLY_TAUS x the tau_acc that error brings, with
# AFTER_MARGIN to spare (other tracks' baselines move alike, not exactly)
RATIO_CAP, AFTER_MARGIN = 1.5, 1.1
BASELINE_CANNOT_CARRY = ("the calibration baseline's error grows", "the part is too small for the thresholds it brings")
DEFAULT_TAU = 8e-3  # a record without thresholds: tau_max
REFERENCE_SHARE = 0.1  # the stored delta's error estimate (cases.stored_error): at most this share of tau_acc
ROUNDING = 1e-10
LEVELS = (0.5, 1.0, 2.0)
# where those levels leave delta's own error estimate too large (a steady 2-D record: layers
# of convection-diffusion at high Peclet numbers), again one level finer, then two (P2 on up
# to 8 x the reference grade: a 2-D solve of seconds; cd_high_pe_l_shape_025 kept only there)
FINER_LEVELS = ((1.0, 2.0, 4.0), (2.0, 4.0, 8.0))
NONLINEAR = ("burgers", "navier_stokes")
# the ansatz-fit attacker (making/attack.py) on the built record: a part it comes within
# ATTACK_MARGIN x tau_acc of is built again, larger by what that margin lacks (its miss grows
# about as the part: the fit of u_m stays, the part's share of what it cannot fit grows), aimed
# ATTACK_AIM over; at most ATTACK_TRIES times, and no larger than ATTACK_MAX_SHARE of u_m
# (u_m stays the main part of the solution; the baseline's RATIO_CAP still holds the difficulty);
# three tries: the attacker fits some of a larger part too (seen: ns_re20_circle_015 at 2.996
# after two)
ATTACK_AIM, ATTACK_TRIES, ATTACK_MAX_SHARE = 1.05, 3, 0.3
NONLINEAR_MARGIN = 1.1  # the nonlinear part's share is aimed this far over the smallest (the response is not linear)
VECTOR = ("stokes", "navier_stokes", "linear_elasticity")
COORDS = (x, y, z)
WAVES = 2
ORACLE_FAILED = "oracle failed"  # a reason of its own: the oracle, not the record, failed  # oblique waves in F


@functools.cache
def part_rule() -> str:
    """A digest of what a part's build follows besides its record: the rule's constants and
    the attacker's source. A live variant's cached part carries it in its folder's name, so a
    part built under another rule (a smaller margin, say) is not served but built again."""
    from .attack import attacker_path

    attacker = attacker_path()
    constants = (MIN_TAUS, MAX_SHARE, RATIO_BUDGET, RATIO_CAP, AFTER_MARGIN, REFERENCE_SHARE, LEVELS, FINER_LEVELS,
                 ATTACK_MARGIN, ATTACK_AIM, ATTACK_TRIES, ATTACK_MAX_SHARE, NONLINEAR_MARGIN, WAVES)  # fmt: skip
    digest = hashlib.sha256(repr(constants).encode())
    digest.update(attacker.read_bytes() if attacker.is_file() else b"no attacker")
    return digest.hexdigest()[:8]


def case_rng(case_id: str, purpose: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{case_id}:{purpose}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _number(value: float) -> sp.Float:
    return sp.Float(f"{value:.3g}")


def _scale(value: float) -> float:
    """``value`` rounded up to three significant digits, as the record's text has it (up: a
    share at its smallest stays there)."""
    step = 10.0 ** (math.floor(math.log10(value)) - 2)
    return float(sp.Float(f"{math.ceil(value / step - 1e-9) * step:.3g}"))


def oblique_waves(rng: np.random.Generator, geometry, smooth: bool = False) -> sp.Expr:
    """WAVES cosines of whole periods across the bounding box (so periodic directions stay
    periodic), each along its own direction, with random phases; no constant or linear part
    (those a polynomial fit would find). In 3-D one period per axis: the reference grade's
    10-24 cells per side resolve two only to a few percent of delta (the draws are the same,
    so 2-D fields do not change). ``smooth``: one wave of one period per axis (SMOOTH_TIER)."""
    field = sp.Integer(0)
    for _ in range(1 if smooth else WAVES):
        argument = _number(rng.uniform(0, 2 * math.pi))
        for axis in range(geometry.dim):
            length = geometry.bbox[2 * axis + 1] - geometry.bbox[2 * axis]
            periods = int(rng.integers(1, 3)) * int(rng.choice([-1, 1]))
            if geometry.dim == 3 or smooth:
                periods = 1 if periods > 0 else -1
            argument += 2 * sp.pi * periods * COORDS[axis] / _number(length)
        field += _number(rng.uniform(0.5, 1.0)) * sp.cos(argument)
    return field


def nonlinear(record: CaseRecord) -> bool:
    if record.family in NONLINEAR:
        return True
    if record.family == "reaction_diffusion":
        reaction = parse_expression(str(record.case_spec.pde.params.get("reaction", "0")), allow=("u",))
        return sp.simplify(sp.diff(reaction, U, 2)) != 0
    return False


def driving_field(record: CaseRecord, smooth: bool = False) -> sp.Expr | list[sp.Expr]:
    """F: a scalar field, or for flows the curl of one (divergence free: the pressure does
    not take it up), for elasticity one per component. ``smooth``: the smooth tier's
    (oblique_waves), drawn apart from the first."""
    geometry = resolve_geometry(record.case_spec_dict()["domain"])
    variant = record.evaluation_metadata.variant
    purpose = "solve-only, smooth" if smooth else "solve-only"
    rng = case_rng(record.id if variant is None else f"{record.id}:variant:{variant.seed}", purpose)
    waves = functools.partial(oblique_waves, smooth=smooth)
    if record.family in ("stokes", "navier_stokes"):
        psi = waves(rng, geometry)
        curl = [sp.diff(psi, y), -sp.diff(psi, x)]
        return curl + [sp.Integer(0)] * (geometry.dim - 2)
    if record.family == "linear_elasticity":
        # (a divergence-free F for nearly incompressible records did worse: the baseline's
        # error grew 45-84 x against 11 x with these, on the same records)
        return [waves(rng, geometry) for _ in range(geometry.dim)]
    return waves(rng, geometry)


def _zero_like(value):
    return ["0"] * len(value) if isinstance(value, list) else "0"


def _components(record: CaseRecord) -> list[str]:
    dim = 3 if record.case_spec.eval_grid.nz else 2
    return [f"u_{axis}" for axis in "xyz"[:dim]] if record.family in VECTOR else ["u"]


def _as_text(field) -> ExpressionOrVector:
    return [expression_to_string(c) for c in field] if isinstance(field, list) else expression_to_string(field)


def _plus(forcing, extra):
    """The forcing with ``extra`` added (record texts; vectors component by component)."""
    if isinstance(forcing, list):
        return [expression_to_string(parse_expression(f) + e) for f, e in zip(forcing, extra)]
    return expression_to_string(parse_expression(forcing) + extra)


def forcing_without_part(forcing, part_forcing):
    """The forcing text with a part's term (``SolveOnly.forcing``) taken out again: the record's
    forcing as generated, before build-solve-only."""
    if isinstance(forcing, list):
        return [expression_to_string(parse_expression(f) - parse_expression(e)) for f, e in zip(forcing, part_forcing)]
    return expression_to_string(parse_expression(forcing) - parse_expression(part_forcing))


def homogeneous_spec(record: CaseRecord, field) -> dict:
    """The problem delta_1 solves: forcing F, every boundary and initial datum zero; vector
    fields asked for component by component."""
    spec = copy.deepcopy(record.case_spec_dict())
    spec["pde"]["forcing"] = {"type": "expression", "value": _as_text(field)}
    for kind in ("dirichlet", "neumann", "robin", "laplacian"):
        conditions = spec["bc"].get(kind)
        for condition in conditions if isinstance(conditions, list) else [conditions] if conditions else []:
            condition["value"] = _zero_like(condition["value"])
    for key in ("value", "velocity"):
        if spec.get("ic") and key in spec["ic"]:
            spec["ic"][key] = _zero_like(spec["ic"][key])
    spec["output"] = {"format": "npz", "components": _components(record)}
    return spec


def perturbed_spec(record: CaseRecord, field, scale: float) -> dict:
    """The record's own problem with s * F added to its forcing, components asked for."""
    spec = copy.deepcopy(record.case_spec_dict())
    extra = [_number(scale) * c for c in field] if isinstance(field, list) else _number(scale) * field
    spec["pde"]["forcing"]["value"] = _plus(spec["pde"]["forcing"]["value"], extra)
    spec["output"] = {"format": "npz", "components": _components(record)}
    return spec


def exact_components(record: CaseRecord, grid: EvalGrid) -> np.ndarray:
    """u_m on the grid at t_end, components stacked on the last axis."""
    from ..expressions import evaluate  # the record's manufactured solution

    solution = (record.evaluation_metadata.manufactured_solution or {})["u"]
    time_ = record.case_spec.pde.time
    when = time_.t_end if time_ else 0.0
    values = [evaluate(c, grid.points(), when) for c in (solution if isinstance(solution, list) else [solution])]
    return np.stack([v.reshape(grid.shape) for v in values], axis=-1)


@dataclass
class SolveOnlyOutcome:
    case_id: str
    kept: bool
    reason: str
    share: float | None = None  # ||delta|| / ||u_m||, as built
    reference_error: float | None = None  # ||delta at level 1 - at level 2|| / ||u||
    predicted_ratio: float | None = None  # the calibration baseline's error with delta over without
    measured_ratio: float | None = None  # ... as the baseline run on the record with its part measured it
    miss: float | None = None  # the evaluator's error of u_m against u_m + delta
    seconds: float = 0.0
    scale: float | None = None  # s of the forcing's term s * F
    attack_margin: float | None = None  # the attacker's error over tau_acc on the built record


def _norm(field: np.ndarray, valid: np.ndarray) -> float:
    return float(np.linalg.norm(field[valid]))


def outputs(record: CaseRecord, components: np.ndarray) -> np.ndarray:
    """The record's output arrays from a field's components (grid shape + (c,)): the scalar,
    a component, or the magnitude."""
    columns = []
    for name in record.case_spec.output.arrays:
        suffix = name.rpartition("_")[2]
        if components.shape[-1] == 1:
            columns.append(components[..., 0])
        elif suffix in ("x", "y", "z") and not name.endswith(("_magnitude", "_mag")):
            columns.append(components[..., "xyz".index(suffix)])
        else:
            columns.append(np.linalg.norm(components, axis=-1))
    return np.stack(columns, axis=-1)


def output_miss(record: CaseRecord, exact: np.ndarray, delta: np.ndarray, valid: np.ndarray) -> float:
    """How far u_m's output arrays are from those of u_m + delta: the evaluator's error of a
    solver that writes u_m."""
    target = outputs(record, exact + delta)
    return _norm(outputs(record, exact) - target, valid) / max(_norm(target, valid), 1e-300)


def share_bounds(record: CaseRecord) -> tuple[float, float]:
    """(the smallest share, the largest): MIN_TAUS x the largest tau_acc of the record's
    libraries, so that u_m alone fails every track by far, and MAX_SHARE."""
    taus = [t.tau_acc for t in record.evaluation_metadata.thresholds.values()] or [DEFAULT_TAU]
    return min(MIN_TAUS * max(taus), MAX_SHARE), MAX_SHARE


def linear_part(
    record: CaseRecord, oracle_dir: Path, field, valid, exact, levels=LEVELS, scale: float | None = None
) -> tuple[list[np.ndarray], float, float, list]:
    """delta at the three levels and the predicted ratio: delta_1 (F drives it) scaled so
    that the calibration baseline's error grows by at most RATIO_BUDGET, within the share's
    bounds (or by ``scale`` when given)."""
    names = _components(record)
    spec = homogeneous_spec(record, field)
    runs = [run_oracle(oracle_dir, record.family, spec, names, level) for level in levels]
    parts = [part for part, _ in runs]
    if scale is not None:
        return [scale * part for part in parts], scale, math.nan, [info.get("num_dofs") for _, info in runs]
    fine = parts[-1]
    smallest, largest = share_bounds(record)
    setting = _setting(record)
    if setting is not None:  # what the baseline makes of delta_1: the share it can carry
        baseline = run_baseline(oracle_dir, record.family, spec, names, setting)
        r_delta = _norm(baseline - fine, valid) / max(_norm(fine, valid), 1e-300)
        e_base = record.evaluation_metadata.thresholds["dolfinx"].e_base
        affordable = math.sqrt(RATIO_BUDGET**2 - 1) * e_base / max(r_delta, 1e-300)
        # the part raises e_base and tau_acc with it: s >= smallest x sqrt(1 + (s r / e)^2)
        q = smallest * AFTER_MARGIN * r_delta / max(e_base, 1e-300)
        need = smallest * AFTER_MARGIN / math.sqrt(1 - q * q) if q < 1 else largest
        share = min(max(affordable, need), largest)
        ratio = math.sqrt(1 + (share * r_delta / max(e_base, 1e-300)) ** 2)
    else:
        share, ratio = smallest, math.nan
    scale = share * _norm(exact, valid) / max(_norm(fine, valid), 1e-300)
    miss = output_miss(record, exact, scale * fine, valid)  # a magnitude hides part of delta
    if miss < smallest:
        scale *= smallest / max(miss, 1e-300)
    scale = _scale(scale)  # as the text has it
    return [scale * part for part in parts], scale, ratio, [info.get("num_dofs") for _, info in runs]


def nonlinear_part(
    record: CaseRecord, oracle_dir: Path, field, valid, exact, levels=LEVELS, scale: float | None = None
) -> tuple[list[np.ndarray], float, float, list]:
    """delta at the three levels for a nonlinear family: the whole perturbed problem less
    u_m, at the smallest share (no superposition to price a larger one by). The scale comes
    from two solves at level 1, with and without a guess of it: their difference is the
    part the guess drives (the solve's own error of u_m cancels: on a slow Navier-Stokes
    flow it was as large as the part, and shares came out at 0.6 x the smallest)."""
    names = _components(record)
    if scale is None:
        smallest = share_bounds(record)[0]
        size = _norm(exact, valid)
        guess = smallest * size / max(_norm(_field_values(field, record), valid), 1e-300)
        plain = run_oracle(oracle_dir, record.family, perturbed_spec(record, field, 0.0), names, 1.0)[0]
        first = run_oracle(oracle_dir, record.family, perturbed_spec(record, field, guess), names, 1.0)[0]
        driven = first - plain
        reached = min(_norm(driven, valid) / size, output_miss(record, exact, driven, valid))
        scale = _scale(guess * NONLINEAR_MARGIN * smallest / max(reached, 1e-300))
    spec = perturbed_spec(record, field, scale)
    runs = [run_oracle(oracle_dir, record.family, spec, names, level) for level in levels]
    return [field_ - exact for field_, _ in runs], scale, math.nan, [info.get("num_dofs") for _, info in runs]


def _setting(record: CaseRecord) -> dict | None:
    config = record.evaluation_metadata.calibration_config
    setting = config.settings.get("dolfinx") if config else None
    return setting.model_dump(exclude_none=True) if setting is not None else None


def build_part(
    record: CaseRecord, case_dir: Path, oracle_dir: Path, attacker: ModuleType | None = None
) -> SolveOnlyOutcome:
    """Build, check and store one record's solve-only part; updates the record in place
    (its forcing, ``evaluation_metadata.solve_only``) only if the part is kept. A steady 2-D
    record whose part's error estimate is too large at LEVELS is tried at each of FINER_LEVELS.
    With ``attacker`` (attack.load_attacker), a kept part must also keep the attacker
    ATTACK_MARGIN x tau_acc away (``_out_of_reach``)."""
    started = time.perf_counter()
    original = record.model_copy(deep=True)
    how: tuple[tuple[float, ...], bool] = (LEVELS, False)
    outcome = _build_at(record, case_dir, oracle_dir, *how)
    steady_2d = record.case_spec.pde.time is None and not record.case_spec.eval_grid.nz
    for levels in FINER_LEVELS if steady_2d else ():
        if outcome.kept or not outcome.reason.startswith("the reference's error estimate"):
            break
        how = (levels, False)
        outcome = _build_at(record, case_dir, oracle_dir, *how)
    if not outcome.kept and outcome.reason.startswith(BASELINE_CANNOT_CARRY):
        # a baseline that resolves the part too coarsely for the thresholds: a smoother part
        how = (LEVELS, True)
        outcome = _build_at(record, case_dir, oracle_dir, *how)
    if outcome.kept and attacker is not None:
        outcome = _out_of_reach(record, original, case_dir, oracle_dir, attacker, outcome, how)
        if not outcome.kept and not how[1] and any(reason in outcome.reason for reason in BASELINE_CANNOT_CARRY):
            # the part the attacker's margin needs is more than the baseline carries: a smoother
            # one (seen: ns_re10_circle_019, the baseline's error 1.56 x with the larger part)
            how = (LEVELS, True)
            outcome = _build_at(record, case_dir, oracle_dir, *how)
            if outcome.kept:
                outcome = _out_of_reach(record, original, case_dir, oracle_dir, attacker, outcome, how)
    outcome.seconds = time.perf_counter() - started
    return outcome


def _out_of_reach(record, original, case_dir: Path, oracle_dir: Path, attacker, outcome, how) -> SolveOnlyOutcome:
    """The attacker on the record as built; where it comes within ATTACK_MARGIN x tau_acc, the
    part built again from ``original`` with a larger scale (``how``: the levels and the field
    that were kept). The record ends as the last kept build, or as ``original`` if none holds."""
    for attempt in range(ATTACK_TRIES + 1):
        found = attack(attacker, record, case_dir, record.supported_libraries[0])
        if found.margin is not None and outcome.measured_ratio:  # a margin: an error and thresholds
            # the part raises e_base, and tau_acc with it, once the record is calibrated again:
            # the margin against the looser of now and then (seen: 6 of 47 fell under it)
            found.margin = min(found.margin, (found.error or 0.0) / max(_taus_after(record, outcome.measured_ratio)))
        outcome.attack_margin = found.margin
        kept_part = record.evaluation_metadata.solve_only
        assert kept_part is not None  # a kept build wrote it
        kept_part.build["attack_margin"] = found.margin
        if found.margin is None or found.margin >= ATTACK_MARGIN:  # None: no judged answer
            return outcome
        within = within_reason(found.margin)
        if attempt == ATTACK_TRIES:
            outcome.kept, outcome.reason = False, within
            break
        again = original.model_copy(deep=True)
        scale = _scale(outcome.scale * ATTACK_AIM * ATTACK_MARGIN / max(found.margin, 1e-9))
        retried = _build_at(again, case_dir, oracle_dir, how[0], how[1], scale=scale)
        if not retried.kept:
            retried.reason = f"{within}; a larger part: {retried.reason}"
            outcome = retried
            break
        record.case_spec, record.evaluation_metadata = again.case_spec, again.evaluation_metadata
        outcome = retried
    record.case_spec, record.evaluation_metadata = original.case_spec, original.evaluation_metadata
    return outcome


def _build_at(
    record: CaseRecord, case_dir: Path, oracle_dir: Path, levels, smooth: bool = False, scale: float | None = None
) -> SolveOnlyOutcome:
    """One build at ``levels``; ``scale``: s given (the attacker's rule), not priced."""
    started = time.perf_counter()
    spec = record.case_spec_dict()
    grid = EvalGrid.from_spec(spec["eval_grid"])
    valid = valid_mask(spec, grid)
    exact = exact_components(record, grid)
    field = driving_field(record, smooth)
    try:
        build = nonlinear_part if nonlinear(record) else linear_part
        deltas, scale, ratio, dofs = build(record, oracle_dir, field, valid, exact, levels, scale)
    except Exception as exc:  # noqa: BLE001 - the oracle cannot do it: the record stays as it is, with the reason
        return SolveOnlyOutcome(record.id, False, f"{ORACLE_FAILED}: {type(exc).__name__}: {str(exc)[:200]}")
    coarse, base, fine = deltas
    size = _norm(exact, valid)
    size_of_part = _norm(fine, valid) / size
    outcome = SolveOnlyOutcome(record.id, False, "", size_of_part, scale=scale)
    outcome.reference_error = _norm(base - fine, valid) / _norm(exact + fine, valid)
    outcome.predicted_ratio = ratio
    outcome.miss = output_miss(record, exact, fine, valid)
    outcome.seconds = time.perf_counter() - started
    g01, g12 = _norm(coarse - base, valid), _norm(base - fine, valid)
    # the tightest tau_acc of the record's tracks (validation.check_solve_only asks the same of
    # every one); a new record: tau_max until it is calibrated
    taus = [t.tau_acc for t in record.evaluation_metadata.thresholds.values()] or [DEFAULT_TAU]
    tau = min(taus)
    estimate = stored_error(outcome.reference_error, g01, g12)
    if not (all(isinstance(n, int) for n in dofs) and dofs[0] < dofs[1] < dofs[2]):
        outcome.reason = f"the levels did not refine the discretization (num_dofs {dofs})"  # equal fields would pass
    elif not np.isfinite(fine[valid]).all():
        outcome.reason = "non-finite values on valid grid points"
    elif size_of_part > ATTACK_MAX_SHARE:  # the largest any rule asks (MAX_SHARE is the priced one's)
        outcome.reason = f"the part is too large: share {size_of_part:.2g} over {ATTACK_MAX_SHARE:g}"
    elif not (g12 < g01 or g12 <= ROUNDING * _norm(fine, valid)):
        outcome.reason = f"levels do not converge (g12 {g12:.3g} >= g01 {g01:.3g})"
    elif min(size_of_part, outcome.miss) < SOLVE_ONLY_TAUS * max(taus):  # validation.check_solve_only's bound
        outcome.reason = (
            f"the part is too small: share {size_of_part:.2g}, miss {outcome.miss:.2g} under "
            f"{SOLVE_ONLY_TAUS:g} x tau_acc ({max(taus):.2g})"
        )
    elif estimate > REFERENCE_SHARE * tau:
        outcome.reason = (
            f"the reference's error estimate {estimate:.2g} is over {REFERENCE_SHARE} x tau_acc ({tau:.2g})"
        )
    elif problem := _baseline_with_part(record, oracle_dir, field, scale, exact, fine, valid, outcome):
        outcome.reason = problem
    else:
        checks = {"levels": list(levels), "g01": g01, "g12": g12, "stored_error": estimate}
        _store(record, case_dir, field, scale, fine, valid, outcome, checks)
        outcome.kept, outcome.reason = True, "kept"
    return outcome


def _baseline_with_part(record, oracle_dir: Path, field, scale: float, exact, fine, valid, outcome) -> str | None:
    """Why the part cannot be kept, from the calibration baseline run on the record with it
    (its DOLFINx setting; None for a record without one): its error grows over RATIO_CAP,
    or the share falls under SOLVE_ONLY_TAUS x the tau_acc the grown errors bring (each
    library's e_base moved by the DOLFINx ratio). Sets ``outcome.measured_ratio``."""
    setting, thresholds = _setting(record), record.evaluation_metadata.thresholds
    if setting is None or "dolfinx" not in thresholds:
        return None
    spec = perturbed_spec(record, field, scale)
    baseline = run_baseline(oracle_dir, record.family, spec, _components(record), setting)
    target = outputs(record, exact + fine)
    error = _norm(outputs(record, baseline) - target, valid) / max(_norm(target, valid), 1e-300)
    ratio = outcome.measured_ratio = error / max(thresholds["dolfinx"].e_base, 1e-300)
    if ratio > RATIO_CAP:
        return (
            f"{BASELINE_CANNOT_CARRY[0]} {ratio:.2f} x with the part (at most {RATIO_CAP:g} x: "
            "the thresholds come from it)"
        )
    after = max(_taus_after(record, ratio))
    if min(outcome.share, outcome.miss) < SOLVE_ONLY_TAUS * AFTER_MARGIN * after:
        return (
            f"{BASELINE_CANNOT_CARRY[1]}: share {outcome.share:.2g}, miss "
            f"{outcome.miss:.2g} under {SOLVE_ONLY_TAUS:g} x {AFTER_MARGIN:g} x tau_acc ({after:.2g}) "
            f"once the baseline's error grows {ratio:.2f} x"
        )
    return None


def _taus_after(record: CaseRecord, ratio: float) -> list[float]:
    """The tau_acc of each of the record's tracks once its e_base grows ``ratio`` x (each
    library's baseline moved by the DOLFINx one's ratio)."""
    from ..thresholds import accuracy_threshold

    config = record.evaluation_config
    return [
        accuracy_threshold(t.e_base * ratio, config.alpha_acc, config.tau_min, config.tau_max)
        for t in record.evaluation_metadata.thresholds.values()
    ]


def _store(record, case_dir: Path, field, scale: float, delta: np.ndarray, valid, outcome, checks: dict) -> None:
    names = _components(record)
    relative = Path("references") / f"{record.id}.solve_only.npz"
    path = Path(case_dir) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    outside = ~valid  # the domain's outside carries nothing: NaN, as the outputs' convention
    arrays = {}
    for index, name in enumerate(names):
        column = delta[..., index].astype("<f4")  # float32, as the numerical references: ~1e-7 of delta
        column[outside] = np.nan
        arrays[name] = column
    np.savez_compressed(path, **arrays)  # type: ignore[arg-type,unused-ignore]
    digest = hashlib.sha256(b"".join(arrays[name].tobytes() for name in sorted(arrays))).hexdigest()[:16]
    extra = [_number(scale) * c for c in field] if isinstance(field, list) else _number(scale) * field
    data = record.case_spec_dict()
    forcing = data["pde"].get("forcing") or {"value": ["0"] * len(extra) if isinstance(extra, list) else "0"}
    data["pde"]["forcing"] = {"type": "expression", "value": _plus(forcing["value"], extra)}
    record.case_spec = type(record.case_spec).model_validate(data)
    record.evaluation_metadata.solve_only = SolveOnlyPart(
        forcing=_as_text(extra),
        path=str(relative),
        digest=digest,
        share=float(outcome.share),
        miss=float(outcome.miss),
        reference_error=float(outcome.reference_error),
        build={
            "oracle": "dolfinx",
            **checks,
            "nonlinear": nonlinear(record),
            "predicted_baseline_ratio": None if math.isnan(outcome.predicted_ratio) else outcome.predicted_ratio,
            "measured_baseline_ratio": outcome.measured_ratio,
        },
    )


def _field_values(field, record: CaseRecord) -> np.ndarray:
    """F on the record's grid, components stacked on the last axis."""
    from ..expressions import evaluate

    grid = EvalGrid.from_spec(record.case_spec_dict()["eval_grid"])
    columns = field if isinstance(field, list) else [field]
    return np.stack([evaluate(expression_to_string(c), grid.points(), 0.0).reshape(grid.shape) for c in columns], -1)


def write_entry(path: Path, record: CaseRecord, outcome: SolveOnlyOutcome) -> None:
    """A part file: whether the part was kept, why, how long it took, and the record as built."""
    entry: dict = {"kept": outcome.kept, "reason": outcome.reason, "seconds": round(outcome.seconds, 1)}
    if outcome.kept:
        entry["record"] = record.model_dump(mode="json", exclude_none=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(entry))
    os.replace(temporary, path)


# ---- the child a live variant's part is built in (live_variants.variant_part) ----


def _build_one(folder: Path, oracle_dir: Path) -> None:
    """The child of variant_part: FOLDER/record.json's part into FOLDER (part.json, references/)."""
    from .attack import builds_attacker

    record = CaseRecord.model_validate_json((folder / "record.json").read_text())
    outcome = build_part(record, folder, oracle_dir, builds_attacker())
    if outcome.reason.startswith(ORACLE_FAILED):  # not kept as the record's answer: another try may do
        raise SystemExit(outcome.reason)
    write_entry(folder / "part.json", record, outcome)


if __name__ == "__main__":
    import sys

    _build_one(Path(sys.argv[1]), Path(sys.argv[2]))
