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

from ..cases import CaseRecord, SolveOnlyPart, stored_error
from ..grid import EvalGrid, valid_mask
from ..validation import LIFTING_GAIN_CEILING, SOLVE_ONLY_TAUS
from .attack import ATTACK_MARGIN, attack, within_reason
from .part_field import (
    ROUGH_PERIODS,
    ROUGH_WAVES,
    WAVES,
    _as_text,
    _field_values,
    _number,
    _plus,
    driving_field,
    exact_components,
    homogeneous_spec,
    nonlinear,
    perturbed_spec,
)
from .pricing import (
    AFTER_MARGIN,
    BOTH_DEGREES,
    COARSEN_STEPS,
    DEFAULT_TAU,
    FINEST,
    GAIN_AIM,
    GAIN_BOUND,
    MAX_SHARE,
    MIN_COUNT,
    MIN_TAUS,
    RATIO_AIM_MAX,
    RATIO_AIM_WIDE,
    Pricing,
    _components,
    _norm,
    _priced_share,
    _setting,
    output_miss,
    outputs,
    priced_wide,
    pricing,
    share_bounds,
)
from .refinement import run_baseline, run_oracle

# the gain the check asks of a built part (validation's bound: issue 66); a part priced over it
# (MAX_SHARE or RATIO_AIM_MAX bind) is built again from an
# F of another tier (OTHER_TIERS), and the one with the smaller worst gain kept
GAIN_CEILING = LIFTING_GAIN_CEILING
LIFTS_TOO_MUCH = "lifting u_m out of the text gains"  # the start of the reason a part over the ceiling is refused
# the tiers tried, in turn, where the first F leaves a gain over GAIN_BOUND: rough, where the
# baseline resolves F too well (MAX_SHARE binds); smooth, where the calibration setting resolves
# F much worse than the coarse ones do, so RATIO_AIM_MAX binds before the coarse gains come down
# (seen: helmholtz_k20_circle_023 at 11 x, poisson_contrast_kappa_dumbbell_048 at 10 x)
OTHER_TIERS = ("rough", "smooth")
# a part is kept only if the calibration baseline, run on the record with the part, is at most
# RATIO_CAP x as far off as before (the difficulty holds: the paper's thresholds come from that
# error), and the share still clears SOLVE_ONLY_TAUS x the tau_acc that error brings, with
# AFTER_MARGIN to spare (other tracks' baselines move alike, not exactly)
RATIO_CAP, RATIO_CAP_WIDE = 2.2, 3.3
BASELINE_CANNOT_CARRY = ("the calibration baseline's error grows", "the part is too small for the thresholds it brings")
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
# the ansatz-fit attacker (making/attack.py) on the built record: a part it comes within
# ATTACK_MARGIN x tau_acc of is built again, larger by what that margin lacks (its miss grows
# about as the part: the fit of u_m stays, the part's share of what it cannot fit grows), aimed
# ATTACK_AIM over; at most ATTACK_TRIES times, and no larger than ATTACK_MAX_SHARE of u_m
# (u_m stays the main part of the solution; the baseline's RATIO_CAP still holds the difficulty);
# three tries: the attacker fits some of a larger part too (seen: ns_re20_circle_015 at 2.996
# after two)
ATTACK_AIM, ATTACK_TRIES, ATTACK_MAX_SHARE = 1.05, 3, 0.5
NONLINEAR_MARGIN = 1.1  # the nonlinear part's share is aimed this far over the smallest (the response is not linear)
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


def _scale(value: float) -> float:
    """``value`` rounded up to three significant digits, as the record's text has it (up: a
    share at its smallest stays there)."""
    step = 10.0 ** (math.floor(math.log10(value)) - 2)
    return float(sp.Float(f"{math.ceil(value / step - 1e-9) * step:.3g}"))


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


def linear_part(
    record: CaseRecord,
    oracle_dir: Path,
    field,
    valid,
    exact,
    levels=LEVELS,
    scale: float | None = None,
    known: Pricing | None = None,
    extra=(),
) -> tuple[list[np.ndarray], float, float, list, Pricing | None]:
    """delta at the three levels, the predicted ratio of the calibration baseline's error, and
    the pricing: delta_1 (F drives it) scaled so that lifting gains at most GAIN_AIM at every
    pricing setting, within the share's bounds and RATIO_AIM_MAX (or by ``scale`` when given).
    ``known``: the pricing of the same F and levels (delta_1's errors do not depend on the scale);
    ``extra``: rows measured on other tracks (``pricing.track_row``)."""
    names = _components(record)
    spec = homogeneous_spec(record, field)
    runs = [run_oracle(oracle_dir, record.family, spec, names, level) for level in levels]
    parts = [part for part, _ in runs]
    dofs = [info.get("num_dofs") for _, info in runs]
    fine = parts[-1]

    def part_error(at: dict, _bare) -> float:  # what the baseline makes of delta_1
        baseline = run_baseline(oracle_dir, record.family, spec, names, at)
        return _norm(baseline - fine, valid) / max(_norm(fine, valid), 1e-300)

    priced = (
        known.with_rows(extra) if known is not None else pricing(record, oracle_dir, valid, exact, part_error, extra)
    )
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
    extra=(),
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

    priced = pricing(record, oracle_dir, valid, exact, part_error, extra)
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


@dataclass
class PricedAgain:
    """A kept part to be built again with pricing rows measured on other tracks
    (``pricing.track_row``): at the levels and from the tier's F it was built with, whose
    delta_1 those rows measured (no other tier is tried: the rows say nothing of its F)."""

    levels: tuple[float, ...]
    tier: str  # "" for the first tier's F (a build says "waves")
    rows: list
    known: Pricing | None = None  # the build's own rows: a linear part's do not depend on its scale

    @classmethod
    def of(cls, build: dict, rows: list) -> PricedAgain:
        tier = build.get("tier", "waves")
        return cls(tuple(build.get("levels", LEVELS)), "" if tier == "waves" else tier, rows, Pricing.from_build(build))


def build_part(
    record: CaseRecord,
    case_dir: Path,
    oracle_dir: Path,
    attacker: ModuleType | None = None,
    again: PricedAgain | None = None,
) -> SolveOnlyOutcome:
    """Build, check and store one record's solve-only part; updates the record in place
    (its forcing, ``evaluation_metadata.solve_only``) only if the part is kept. A steady
    record whose part's error estimate is too large at LEVELS is tried at each of FINER_LEVELS
    (FINER_LEVELS_3D in 3-D), then (any record) with the smooth tier's F.
    With ``attacker`` (attack.load_attacker), a kept part must also keep the attacker
    ATTACK_MARGIN x tau_acc away (``_out_of_reach``). ``again``: the record (bare) is built
    once more as its kept part was, priced with other tracks' rows too."""
    started = time.perf_counter()
    original = record.model_copy(deep=True)
    if again is not None:
        how = (again.levels, again.tier)
        outcome = _build_at(record, case_dir, oracle_dir, *how, known=again.known, extra=again.rows)
    else:
        outcome, how = _first_build(record, original, case_dir, oracle_dir)
    if outcome.kept and attacker is not None:
        outcome = _out_of_reach(record, original, case_dir, oracle_dir, attacker, outcome, how)
        if (
            not outcome.kept
            and again is None
            and how[1] != "smooth"
            and any(r in outcome.reason for r in BASELINE_CANNOT_CARRY)
        ):
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


def _first_build(record: CaseRecord, original: CaseRecord, case_dir: Path, oracle_dir: Path):
    """The build of a record that has no part: the first tier's F at LEVELS, finer levels and
    the other tiers where those leave the part unkept or its gain over GAIN_BOUND. Returns the
    outcome and how it was built (levels, tier)."""
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
    return outcome, how


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
    extra=(),
) -> SolveOnlyOutcome:
    """One build at ``levels`` with ``tier``'s F; ``scale``: s given (the attacker's rule), not
    priced; ``known``: the pricing of an earlier build of the same F and levels; ``extra``:
    pricing rows measured on other tracks."""
    started = time.perf_counter()
    spec = record.case_spec_dict()
    grid = EvalGrid.from_spec(spec["eval_grid"])
    valid = valid_mask(spec, grid)
    exact = exact_components(record, grid)
    field = driving_field(record, tier)
    try:
        build = nonlinear_part if nonlinear(record) else linear_part
        deltas, scale, ratio, dofs, priced = build(record, oracle_dir, field, valid, exact, levels, scale, known, extra)
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
            checks["pricing"] = priced.as_build()
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
