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
  numerical references are: refinement.py). s is priced by the baseline's errors at a few
  settings (``pricing``): a solver that reads u_m out of the text and solves for delta alone
  errs by delta's share of a plain solve's error, so delta must carry enough of it that lifting
  gains at most GAIN_AIM x; but no less than makes u_m miss the output arrays by MIN_TAUS x
  tau_acc, and no more than MAX_SHARE of u_m. The reference is u_m, exact, plus delta on the grid.
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
from collections.abc import Callable
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
from ..validation import LIFTING_GAIN_BOUND, LIFTING_GAIN_CEILING, SOLVE_ONLY_TAUS
from .attack import ATTACK_MARGIN, attack, within_reason
from .refinement import run_baseline, run_oracle

# how large delta is (||delta|| / ||u_m|| on the grid at t_end): large enough that u_m, which
# the text may give, misses the solution's output arrays by MIN_TAUS x the largest tau_acc
# of the record's libraries (the static check asks for 5), at most MAX_SHARE; within that,
# large enough that a solver lifting u_m out of the text and solving for delta alone is at
# most GAIN_AIM x more accurate than the plain solve (issue 66), at every pricing setting:
# the calibration baseline's, and the same oracle at P1 and P2 coarsened until its error on
# the bare record reaches tau_acc (the coarsest the gate admits; the gain grows as the mesh
# coarsens where u_m's error grows faster than delta's: pollution at high wavenumbers); but
# no larger than grows the calibration baseline's error RATIO_AIM_MAX x (the thresholds come
# from it). The ceilings are wide because at a P2 calibration setting u_m may be resolved 13 x
# better than delta where P1 resolves both alike (helmholtz_k20_star_001): a part priced
# for P1 grows the P2 baseline's error 2.5 x, and 0.15 of u_m was too little for
# helmholtz_k5_sector_004 at any F (its u_m is as hard for the baseline as delta). GAIN_AIM sits
# under the bound 2 because the oracle's estimate ran ~15% under the gain the textbook solver
# measured (trial of 16 records at 1.8: 3 measured 2.11-2.19 where the build said 1.76-1.80)
MIN_TAUS, MAX_SHARE, GAIN_AIM, RATIO_AIM_MAX = 6.0, 0.4, 1.6, 2.0
# where RATIO_AIM_MAX leaves the worst gain over the bound (GAIN_BOUND), the part may grow the
# calibration baseline's error up to RATIO_AIM_WIDE x instead, checked against RATIO_CAP_WIDE:
# the first rebuild had 8 of 55 Helmholtz records over 2 x, all where the narrow cap bound
# (helmholtz_k20_star_001 at 2.48); the thresholds of those few records loosen with their e_base
RATIO_AIM_WIDE = 3.0
# the gain the check asks of a built part (validation's bound: issue 66); a part priced over it
# (MAX_SHARE or RATIO_AIM_MAX bind) is built again from an
# F of another tier (OTHER_TIERS), and the one with the smaller worst gain kept
GAIN_BOUND, GAIN_CEILING = LIFTING_GAIN_BOUND, LIFTING_GAIN_CEILING
LIFTS_TOO_MUCH = "lifting u_m out of the text gains"  # the start of the reason a part over the ceiling is refused
ROUGH_WAVES, ROUGH_PERIODS = 4, ((2, 5), (1, 3))  # the rough tier's waves; periods per axis [low, high) in 2-D, 3-D
# the tiers tried, in turn, where the first F leaves a gain over GAIN_BOUND: rough, where the
# baseline resolves F too well (MAX_SHARE binds); smooth, where the calibration setting resolves
# F much worse than the coarse ones do, so RATIO_AIM_MAX binds before the coarse gains come down
# (seen: helmholtz_k20_circle_023 at 11 x, poisson_contrast_kappa_dumbbell_048 at 10 x)
OTHER_TIERS = ("rough", "smooth")
# the pricing's coarsening (cells per side at P1 and P2 where the family's oracle takes both, the
# others at the calibration's degree; a transient record's time steps too): at most COARSEN_STEPS
# tries, the count within [MIN_COUNT, FINEST x the calibration's]
COARSEN_STEPS, MIN_COUNT, FINEST = 6, 4, 4
BOTH_DEGREES = ("poisson", "helmholtz", "heat", "convection_diffusion", "reaction_diffusion", "wave")
# a part is kept only if the calibration baseline, run on the record with the part, is at most
# RATIO_CAP x as far off as before (the difficulty holds: the paper's thresholds come from that
# error), and the share still clears SOLVE_ONLY_TAUS x the tau_acc that error brings, with
# AFTER_MARGIN to spare (other tracks' baselines move alike, not exactly)
RATIO_CAP, RATIO_CAP_WIDE, AFTER_MARGIN = 2.2, 3.3, 1.1
BASELINE_CANNOT_CARRY = ("the calibration baseline's error grows", "the part is too small for the thresholds it brings")
DEFAULT_TAU = 8e-3  # a record without thresholds: tau_max
REFERENCE_SHARE = 0.1  # the stored delta's error estimate (cases.stored_error): at most this share of tau_acc
REFERENCE_TOO_ROUGH = "the reference's error estimate"  # the start of the reason it is not
ROUNDING = 1e-10
LEVELS = (0.5, 1.0, 2.0)
# where those levels leave delta's own error estimate too large (a steady 2-D record: layers
# of convection-diffusion at high Peclet numbers), again one level finer, then two (P2 on up
# to 8 x the reference grade: a 2-D solve of seconds; cd_high_pe_l_shape_025 kept only there)
FINER_LEVELS = ((1.0, 2.0, 4.0), (2.0, 4.0, 8.0))
# a steady 3-D record, half a level finer only (P2 on 3 x the grade: 36 cells per side for
# Poisson, ~0.4 M dofs; a whole level, 0.9 M, is more than a direct solve here affords): the
# larger parts issue 66's pricing asks left 4 of the first 88 records 1.2-1.7 x over
FINER_LEVELS_3D = ((0.75, 1.5, 3.0),)
NONLINEAR = ("burgers", "navier_stokes")
# the ansatz-fit attacker (making/attack.py) on the built record: a part it comes within
# ATTACK_MARGIN x tau_acc of is built again, larger by what that margin lacks (its miss grows
# about as the part: the fit of u_m stays, the part's share of what it cannot fit grows), aimed
# ATTACK_AIM over; at most ATTACK_TRIES times, and no larger than ATTACK_MAX_SHARE of u_m
# (u_m stays the main part of the solution; the baseline's RATIO_CAP still holds the difficulty);
# three tries: the attacker fits some of a larger part too (seen: ns_re20_circle_015 at 2.996
# after two)
ATTACK_AIM, ATTACK_TRIES, ATTACK_MAX_SHARE = 1.05, 3, 0.5
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
    constants = (MIN_TAUS, MAX_SHARE, GAIN_AIM, RATIO_AIM_MAX, GAIN_BOUND, GAIN_CEILING, ROUGH_WAVES, ROUGH_PERIODS,
                 OTHER_TIERS, COARSEN_STEPS, MIN_COUNT, FINEST, BOTH_DEGREES, RATIO_CAP, AFTER_MARGIN, REFERENCE_SHARE,
                 RATIO_AIM_WIDE, RATIO_CAP_WIDE,
                 LEVELS, FINER_LEVELS, FINER_LEVELS_3D,
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


def oblique_waves(rng: np.random.Generator, geometry, tier: str = "") -> sp.Expr:
    """WAVES cosines of whole periods across the bounding box (so periodic directions stay
    periodic), each along its own direction, with random phases; no constant or linear part
    (those a polynomial fit would find). In 3-D one period per axis: the reference grade's
    10-24 cells per side resolve two only to a few percent of delta (the draws are the same,
    so 2-D fields do not change). ``tier`` "smooth": one wave of one period per axis; "rough":
    ROUGH_WAVES waves of ROUGH_PERIODS periods per axis (one or two in 3-D)."""
    field = sp.Integer(0)
    for _ in range({"smooth": 1, "rough": ROUGH_WAVES}.get(tier, WAVES)):
        argument = _number(rng.uniform(0, 2 * math.pi))
        for axis in range(geometry.dim):
            length = geometry.bbox[2 * axis + 1] - geometry.bbox[2 * axis]
            periods = int(rng.integers(1, 3)) * int(rng.choice([-1, 1]))
            if tier == "rough":
                periods = int(rng.integers(*ROUGH_PERIODS[geometry.dim == 3])) * (1 if periods > 0 else -1)
            elif geometry.dim == 3 or tier == "smooth":
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


def driving_field(record: CaseRecord, tier: str = "") -> sp.Expr | list[sp.Expr]:
    """F: a scalar field, or for flows the curl of one (divergence free: the pressure does
    not take it up), for elasticity one per component. ``tier``: "smooth" or "rough"
    (oblique_waves), each drawn apart from the first."""
    geometry = resolve_geometry(record.case_spec_dict()["domain"])
    variant = record.evaluation_metadata.variant
    purpose = f"solve-only, {tier}" if tier else "solve-only"
    rng = case_rng(record.id if variant is None else f"{record.id}:variant:{variant.seed}", purpose)
    waves = functools.partial(oblique_waves, tier=tier)
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
    lifting_gain: dict[str, float] | None = None  # each pricing setting's gain (Pricing.gains), as built
    pricing: Pricing | None = None  # the rows they come from (a retry at another scale reuses a linear part's)

    @property
    def worst_gain(self) -> float:
        return max((self.lifting_gain or {}).values(), default=math.nan)


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


def _asked(record: CaseRecord) -> dict:
    """The record's own problem, its components asked for."""
    spec = copy.deepcopy(record.case_spec_dict())
    spec["output"] = {"format": "npz", "components": _components(record)}
    return spec


def _error(record: CaseRecord, fields: np.ndarray, target: np.ndarray, valid) -> float:
    """The evaluator's error of ``fields`` against ``target`` (components; on the output arrays)."""
    wanted = outputs(record, target)
    return _norm(outputs(record, fields) - wanted, valid) / max(_norm(wanted, valid), 1e-300)


@dataclass
class Pricing:
    """Where a part is priced: each setting's label, the setting, the bare record's baseline
    error there (a) and what the baseline makes of delta_1 (r: its relative error)."""

    rows: list[tuple[str, dict, float, float]]

    def gains(self, share: float) -> dict[str, float]:
        """Each setting's lifting gain at ``share``: the plain solve's error over delta's part
        of it, the two adding in quadrature (plain errs by a and s r, the lifted one by s r)."""
        return {label: math.hypot(a, share * r) / max(share * r, 1e-300) for label, _, a, r in self.rows}

    def share_for(self, gain: float) -> float:
        """The smallest share that keeps every setting's gain within ``gain``."""
        return max(a / (math.sqrt(gain * gain - 1) * max(r, 1e-300)) for _, _, a, r in self.rows)


def pricing(record: CaseRecord, oracle_dir: Path, valid, exact, part_error_at) -> Pricing | None:
    """The calibration setting (DOLFINx) and its coarsest admitted versions at P1 and P2
    (``_coarsest_passing``) and in time, each with the bare record's baseline error and the
    part's (``part_error_at(setting, the bare record's baseline there)``); None for a record
    without a DOLFINx setting. A setting the oracle cannot run is left out."""
    from ..thresholds import accuracy_threshold

    setting = _setting(record)
    if setting is None:
        return None
    names, bare, runs = _components(record), _asked(record), {}

    def bare_run(at: dict) -> np.ndarray:
        key = json.dumps(at, sort_keys=True)
        if key not in runs:
            runs[key] = run_baseline(oracle_dir, record.family, bare, names, at)
        return runs[key]

    def bare_error(at: dict) -> float:
        return _error(record, bare_run(at), exact, valid)

    def part_error(at: dict) -> float:
        return part_error_at(at, bare_run(at))

    a_cal = bare_error(setting)
    config = record.evaluation_config
    tau = accuracy_threshold(a_cal, config.alpha_acc, config.tau_min, config.tau_max)
    rows = [("calibration", setting, a_cal, part_error(setting))]
    searches: list[tuple[str, Callable[[int], dict], int, int]] = [  # (label of n, the setting at n, the
        # calibration's n, the error's order in 1 / n)
        (f"P{degree}/{{}}", functools.partial(_at_cells, setting, degree), setting["cells_per_side"], degree + 1)
        for degree in ((1, 2) if record.family in BOTH_DEGREES else (setting["element_degree"],))
    ]
    time_ = record.case_spec.pde.time
    if setting.get("dt") and time_ is not None:  # the time step too (the oracle's schemes are second order)
        span = time_.t_end - time_.t0
        searches.append(("{} steps", lambda n: {**setting, "dt": span / n}, round(span / setting["dt"]), 2))
    for label, at, start, order in searches:
        try:
            count, coarse, a = _coarsest_passing(bare_error, at, max(1, int(start)), order, tau)
            rows.append((label.format(count), coarse, a, part_error(coarse)))
        except Exception:  # noqa: BLE001, S112 - a setting the oracle cannot run is not a pricing setting
            continue
    return Pricing(rows)


def _priced_share(record: CaseRecord, priced: Pricing | None) -> tuple[float, float]:
    """(the share, the calibration baseline's predicted ratio): the smallest share that keeps
    lifting's gain within GAIN_AIM at every pricing setting, at most what grows the calibration
    baseline's error RATIO_AIM_MAX x (RATIO_AIM_WIDE x where that leaves the gain over GAIN_BOUND),
    at least what clears SOLVE_ONLY_TAUS x the thresholds the grown error brings, within the
    share's bounds; the smallest without a pricing."""
    smallest, largest = share_bounds(record)
    if priced is None:
        return smallest, math.nan
    _, _, a_cal, r_cal = priced.rows[0]
    ratio_aim = RATIO_AIM_WIDE if priced_wide(record, priced) else RATIO_AIM_MAX
    carried = math.sqrt(ratio_aim**2 - 1) * a_cal / max(r_cal, 1e-300)
    # the part raises e_base and tau_acc with it: s >= smallest x sqrt(1 + (s r / a)^2)
    q = smallest * AFTER_MARGIN * r_cal / max(a_cal, 1e-300)
    need = smallest * AFTER_MARGIN / math.sqrt(1 - q * q) if q < 1 else largest
    share = min(max(min(priced.share_for(GAIN_AIM), carried), need), largest)
    return share, math.hypot(1.0, share * r_cal / max(a_cal, 1e-300))


def priced_wide(record: CaseRecord, priced: Pricing | None) -> bool:
    """Whether the part may grow the calibration baseline's error RATIO_AIM_WIDE x: at the
    share that grows it RATIO_AIM_MAX x, lifting still gains over GAIN_BOUND somewhere. A
    property of the pricing, so a build again at another scale (the attacker's) keeps it."""
    if priced is None:
        return False
    _, _, a_cal, r_cal = priced.rows[0]
    carried = math.sqrt(RATIO_AIM_MAX**2 - 1) * a_cal / max(r_cal, 1e-300)
    return max(priced.gains(min(carried, share_bounds(record)[1])).values()) > GAIN_BOUND


def _at_cells(setting: dict, degree: int, cells: int) -> dict:
    return {**setting, "element_degree": degree, "cells_per_side": cells}


def _coarsest_passing(bare_error, at, start: int, order: float, tau: float) -> tuple[int, dict, float]:
    """The setting ``at(n)`` with the fewest n (cells per side, or time steps) whose bare error
    is within tau: from ``start``, an order-``order`` step at a time, kept inside the bracket of
    the finest failing and the coarsest passing n tried (the order is the smooth part's: a
    curved boundary's straight edges converge slower), COARSEN_STEPS tries at most, n within
    [MIN_COUNT, FINEST x start]; where none passes, the finest tried."""
    count, highest = start, FINEST * start
    tried: dict[int, float] = {}
    for _ in range(COARSEN_STEPS):
        tried[count] = bare_error(at(count))
        failing = [n for n, e in tried.items() if e > tau]
        passing = [n for n, e in tried.items() if e <= tau]
        low, high = max(failing, default=MIN_COUNT - 1), min(passing, default=highest + 1)
        if high - low <= max(1, high // 10):  # the bracket is tight: the coarsest passing is found
            break
        guess = int(round(count / (tau / max(tried[count], 1e-300)) ** (1.0 / order)))
        count = min(max(guess, low + 1), high - 1)
        if count in tried:  # the step lands on a tried count: halve the bracket instead
            count = (low + high) // 2 if low >= MIN_COUNT and high <= highest else count
        if count in tried:
            break
    passing = [n for n, e in tried.items() if e <= tau]
    count = min(passing) if passing else max(tried)
    return count, at(count), tried[count]


def linear_part(
    record: CaseRecord,
    oracle_dir: Path,
    field,
    valid,
    exact,
    levels=LEVELS,
    scale: float | None = None,
    known: Pricing | None = None,
) -> tuple[list[np.ndarray], float, float, list, Pricing | None]:
    """delta at the three levels, the predicted ratio of the calibration baseline's error, and
    the pricing: delta_1 (F drives it) scaled so that lifting gains at most GAIN_AIM at every
    pricing setting, within the share's bounds and RATIO_AIM_MAX (or by ``scale`` when given).
    ``known``: the pricing of the same F and levels (delta_1's errors do not depend on the scale)."""
    names = _components(record)
    spec = homogeneous_spec(record, field)
    runs = [run_oracle(oracle_dir, record.family, spec, names, level) for level in levels]
    parts = [part for part, _ in runs]
    dofs = [info.get("num_dofs") for _, info in runs]
    fine = parts[-1]

    def part_error(at: dict, _bare) -> float:  # what the baseline makes of delta_1
        baseline = run_baseline(oracle_dir, record.family, spec, names, at)
        return _norm(baseline - fine, valid) / max(_norm(fine, valid), 1e-300)

    priced = known if known is not None else pricing(record, oracle_dir, valid, exact, part_error)
    if scale is not None:
        return [scale * part for part in parts], scale, math.nan, dofs, priced
    smallest = share_bounds(record)[0]
    share, ratio = _priced_share(record, priced)
    scale = share * _norm(exact, valid) / max(_norm(fine, valid), 1e-300)
    miss = output_miss(record, exact, scale * fine, valid)  # a magnitude hides part of delta
    if miss < smallest:
        scale *= smallest / max(miss, 1e-300)
    scale = _scale(scale)  # as the text has it
    return [scale * part for part in parts], scale, ratio, dofs, priced


def nonlinear_part(
    record: CaseRecord,
    oracle_dir: Path,
    field,
    valid,
    exact,
    levels=LEVELS,
    scale: float | None = None,
    known: Pricing | None = None,
) -> tuple[list[np.ndarray], float, float, list, Pricing | None]:
    """delta at the three levels for a nonlinear family: the whole perturbed problem less u_m.
    No superposition: the part a guess of the scale drives comes from two solves at level 1,
    with and without it (their difference: the solve's own error of u_m cancels, which on a
    slow Navier-Stokes flow was as large as the part), and the baseline's error on it from two
    baseline runs at each pricing setting alike (small parts respond about linearly); the
    scale is then the guess times the priced share over the guess's (``scale`` given: the
    guess, priced as it is; ``known`` is not used: the response depends on the scale)."""
    names = _components(record)
    smallest = share_bounds(record)[0]
    size = _norm(exact, valid)
    guess = scale or smallest * size / max(_norm(_field_values(field, record), valid), 1e-300)
    perturbed = perturbed_spec(record, field, guess)
    plain = run_oracle(oracle_dir, record.family, perturbed_spec(record, field, 0.0), names, 1.0)[0]
    driven = run_oracle(oracle_dir, record.family, perturbed, names, 1.0)[0] - plain

    def part_error(at: dict, bare) -> float:  # the baseline's part: its perturbed run less its bare one
        baseline = run_baseline(oracle_dir, record.family, perturbed, names, at) - bare
        return _norm(baseline - driven, valid) / max(_norm(driven, valid), 1e-300)

    priced = pricing(record, oracle_dir, valid, exact, part_error)
    ratio = math.nan
    if scale is None:
        share, ratio = _priced_share(record, priced)
        reached = _norm(driven, valid) / size
        missed = output_miss(record, exact, driven, valid)
        scale = _scale(guess * NONLINEAR_MARGIN * max(share / max(reached, 1e-300), smallest / max(missed, 1e-300)))
    spec = perturbed_spec(record, field, scale)
    runs = [run_oracle(oracle_dir, record.family, spec, names, level) for level in levels]
    dofs = [info.get("num_dofs") for _, info in runs]
    return [field_ - exact for field_, _ in runs], scale, ratio, dofs, priced


def _setting(record: CaseRecord) -> dict | None:
    config = record.evaluation_metadata.calibration_config
    setting = config.settings.get("dolfinx") if config else None
    return setting.model_dump(exclude_none=True) if setting is not None else None


def build_part(
    record: CaseRecord, case_dir: Path, oracle_dir: Path, attacker: ModuleType | None = None
) -> SolveOnlyOutcome:
    """Build, check and store one record's solve-only part; updates the record in place
    (its forcing, ``evaluation_metadata.solve_only``) only if the part is kept. A steady
    record whose part's error estimate is too large at LEVELS is tried at each of FINER_LEVELS
    (FINER_LEVELS_3D in 3-D), then (any record) with the smooth tier's F.
    With ``attacker`` (attack.load_attacker), a kept part must also keep the attacker
    ATTACK_MARGIN x tau_acc away (``_out_of_reach``)."""
    started = time.perf_counter()
    original = record.model_copy(deep=True)
    how: tuple[tuple[float, ...], str] = (LEVELS, "")
    outcome = _build_at(record, case_dir, oracle_dir, *how)
    steady, in_3d = record.case_spec.pde.time is None, bool(record.case_spec.eval_grid.nz)
    for levels in (FINER_LEVELS_3D if in_3d else FINER_LEVELS) if steady else ():
        if outcome.kept or not outcome.reason.startswith(REFERENCE_TOO_ROUGH):
            break
        how = (levels, "")
        outcome = _build_at(record, case_dir, oracle_dir, *how)
    if not outcome.kept and outcome.reason.startswith((*BASELINE_CANNOT_CARRY, REFERENCE_TOO_ROUGH)):
        # a baseline that resolves the part too coarsely for the thresholds, or levels that
        # leave its own error estimate too large (a transient 3-D record has no finer try): a
        # smoother part
        how = (LEVELS, "smooth")
        outcome = _build_at(record, case_dir, oracle_dir, *how)
    if outcome.kept and outcome.worst_gain > GAIN_BOUND and how[1] == "":
        for tier in OTHER_TIERS:
            outcome, how = _other_tier(record, original, case_dir, oracle_dir, outcome, how, tier)
            if outcome.worst_gain <= GAIN_BOUND:
                break
    if outcome.kept and attacker is not None:
        outcome = _out_of_reach(record, original, case_dir, oracle_dir, attacker, outcome, how)
        if not outcome.kept and how[1] != "smooth" and any(r in outcome.reason for r in BASELINE_CANNOT_CARRY):
            # the part the attacker's margin needs is more than the baseline carries: a smoother
            # one (seen: ns_re10_circle_019, the baseline's error 1.56 x with the larger part)
            how = (LEVELS, "smooth")
            outcome = _build_at(record, case_dir, oracle_dir, *how)
            if outcome.kept:
                outcome = _out_of_reach(record, original, case_dir, oracle_dir, attacker, outcome, how)
    if outcome.kept and outcome.worst_gain > GAIN_CEILING:  # every tier tried: build-suite deals another record
        worst = max(outcome.lifting_gain or {}, key=lambda label: (outcome.lifting_gain or {})[label])
        record.case_spec, record.evaluation_metadata = original.case_spec, original.evaluation_metadata
        outcome.kept = False
        outcome.reason = (
            f"{LIFTS_TOO_MUCH} {outcome.worst_gain:.2f} x at {worst}, over {GAIN_CEILING:g} x at every tier"
        )
    outcome.seconds = time.perf_counter() - started
    return outcome


def _other_tier(record, original, case_dir: Path, oracle_dir: Path, outcome, how, tier: str):
    """The part built again from ``original`` with ``tier``'s F; the build with the smaller
    worst gain is kept, its stored field with it."""
    kept = record.model_copy(deep=True), _stored_bytes(record, case_dir)
    again = original.model_copy(deep=True)  # the build writes into the record's metadata
    record.case_spec, record.evaluation_metadata = again.case_spec, again.evaluation_metadata
    other = _build_at(record, case_dir, oracle_dir, how[0], tier)
    if other.kept and other.worst_gain < outcome.worst_gain:
        return other, (how[0], tier)
    record.case_spec, record.evaluation_metadata = kept[0].case_spec, kept[0].evaluation_metadata
    part = record.evaluation_metadata.solve_only
    assert part is not None  # the first build kept it
    (Path(case_dir) / part.path).write_bytes(kept[1])
    return outcome, how


def _stored_bytes(record: CaseRecord, case_dir: Path) -> bytes:
    part = record.evaluation_metadata.solve_only
    assert part is not None
    return (Path(case_dir) / part.path).read_bytes()


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
        retried = _build_at(again, case_dir, oracle_dir, how[0], how[1], scale=scale, known=outcome.pricing)
        if not retried.kept:
            retried.reason = f"{within}; a larger part: {retried.reason}"
            outcome = retried
            break
        record.case_spec, record.evaluation_metadata = again.case_spec, again.evaluation_metadata
        outcome = retried
    record.case_spec, record.evaluation_metadata = original.case_spec, original.evaluation_metadata
    return outcome


def _build_at(
    record: CaseRecord,
    case_dir: Path,
    oracle_dir: Path,
    levels,
    tier: str = "",
    scale: float | None = None,
    known: Pricing | None = None,
) -> SolveOnlyOutcome:
    """One build at ``levels`` with ``tier``'s F; ``scale``: s given (the attacker's rule), not
    priced; ``known``: the pricing of an earlier build of the same F and levels."""
    started = time.perf_counter()
    spec = record.case_spec_dict()
    grid = EvalGrid.from_spec(spec["eval_grid"])
    valid = valid_mask(spec, grid)
    exact = exact_components(record, grid)
    field = driving_field(record, tier)
    try:
        build = nonlinear_part if nonlinear(record) else linear_part
        deltas, scale, ratio, dofs, priced = build(record, oracle_dir, field, valid, exact, levels, scale, known)
    except Exception as exc:  # noqa: BLE001 - the oracle cannot do it: the record stays as it is, with the reason
        return SolveOnlyOutcome(record.id, False, f"{ORACLE_FAILED}: {type(exc).__name__}: {str(exc)[:200]}")
    coarse, base, fine = deltas
    size = _norm(exact, valid)
    size_of_part = _norm(fine, valid) / size
    outcome = SolveOnlyOutcome(record.id, False, "", size_of_part, scale=scale)
    outcome.reference_error = _norm(base - fine, valid) / _norm(exact + fine, valid)
    outcome.predicted_ratio = ratio
    outcome.pricing = priced
    outcome.lifting_gain = priced.gains(size_of_part) if priced is not None else None
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
        outcome.reason = f"{REFERENCE_TOO_ROUGH} {estimate:.2g} is over {REFERENCE_SHARE} x tau_acc ({tau:.2g})"
    elif problem := _baseline_with_part(record, oracle_dir, field, scale, exact, fine, valid, outcome):
        outcome.reason = problem
    else:
        checks = {"levels": list(levels), "g01": g01, "g12": g12, "stored_error": estimate, "tier": tier or "waves"}
        if priced is not None:  # the pricing's settings and the gain it predicts at each
            checks["lifting_gain"] = {label: round(g, 3) for label, g in (outcome.lifting_gain or {}).items()}
            checks["pricing"] = {
                label: {"cells_per_side": at["cells_per_side"], "element_degree": at["element_degree"],
                        "bare_error": a, "part_error": r}
                for label, at, a, r in priced.rows
            }  # fmt: skip
        _store(record, case_dir, field, scale, fine, valid, outcome, checks)
        outcome.kept, outcome.reason = True, "kept"
    return outcome


def _baseline_with_part(record, oracle_dir: Path, field, scale: float, exact, fine, valid, outcome) -> str | None:
    """Why the part cannot be kept, from the calibration baseline run on the record with it
    (its DOLFINx setting; None for a record without one): its error grows over RATIO_CAP
    (RATIO_CAP_WIDE for a part priced wide: ``priced_wide``),
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
    cap = RATIO_CAP_WIDE if priced_wide(record, outcome.pricing) else RATIO_CAP
    if ratio > cap:
        return (
            f"{BASELINE_CANNOT_CARRY[0]} {ratio:.2f} x with the part (at most {cap:g} x: the thresholds come from it)"
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
