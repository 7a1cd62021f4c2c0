"""What lifting u_m out of a case's text gains, and how large the solve-only part must be so
that it gains little: the pricing of ``making/solve_only.py``'s parts.

A solver that reads u_m out of the text and solves for the part delta alone errs by delta's
share of a plain solve's error; the two add in quadrature. So at a setting where the bare
record's baseline errs by a and the baseline makes of delta_1 a relative error r, a part of
share s gains hypot(a, s r) / (s r) (``Pricing.gains``). The settings are the calibration's
and the coarsest P1 and P2 (and time step) the accuracy gate admits (``pricing``); the share is
the smallest that keeps every setting's gain within GAIN_AIM, within the bounds below
(``_priced_share``).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cases import CaseRecord
from ..validation import LIFTING_GAIN_BOUND
from .refinement import run_baseline

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
# the gain the check asks of a built part (validation's bound: issue 66)
GAIN_BOUND = LIFTING_GAIN_BOUND
# a part another track's oracle measures over this (``track_row``: at the DOLFINx pricing's worst
# coarse setting) is priced again with that row, aimed at GAIN_AIM as every row is: the parts are
# priced on DOLFINx's P1 simplices, and deal.II's Q1 quadrilaterals and hexahedra resolve u_m and
# the part in other proportions (a sample of 12 rebuilt records: 3 over 2 x, one 4.3 x); under
# the bound, not at it, since the track's own coarsest passing setting may gain a little more
TRACK_GAIN_AGAIN = 1.8
# the pricing's coarsening (cells per side at P1 and P2 where the family's oracle takes both, the
# others at the calibration's degree; a transient record's time steps too): at most COARSEN_STEPS
# tries, the count within [MIN_COUNT, FINEST x the calibration's]
COARSEN_STEPS, MIN_COUNT, FINEST = 6, 4, 4
BOTH_DEGREES = ("poisson", "helmholtz", "heat", "convection_diffusion", "reaction_diffusion", "wave")
# the part's share clears SOLVE_ONLY_TAUS x the tau_acc its grown baseline error brings, with
# AFTER_MARGIN to spare (other tracks' baselines move alike, not exactly)
AFTER_MARGIN = 1.1
DEFAULT_TAU = 8e-3  # a record without thresholds: tau_max
SETTING = re.compile(r"^P([12])/(\d+)$")  # the coarse settings' labels: degree / cells per side
VECTOR = ("stokes", "navier_stokes", "linear_elasticity")


def _components(record: CaseRecord) -> list[str]:
    dim = 3 if record.case_spec.eval_grid.nz else 2
    return [f"u_{axis}" for axis in "xyz"[:dim]] if record.family in VECTOR else ["u"]


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
    error there (a) and what the baseline makes of delta_1 (r: its relative error). The first
    row is the calibration setting's. A row measured on another track (``track_row``) names
    the track in its label and its setting."""

    rows: list[tuple[str, dict, float, float]]

    def as_build(self) -> dict:
        """The rows as a part's build keeps them (``build["pricing"]``)."""
        return {
            label: {**{key: at[key] for key in ("library", "cells_per_side", "element_degree") if key in at},
                    "bare_error": a, "part_error": r}
            for label, at, a, r in self.rows
        }  # fmt: skip

    @classmethod
    def from_build(cls, build: dict) -> Pricing | None:
        """The rows a part's build kept (None for a part built before the pricing)."""
        kept = build.get("pricing") or {}
        rows = [(label, {k: v for k, v in row.items() if k not in ("bare_error", "part_error")},
                 row["bare_error"], row["part_error"]) for label, row in kept.items()]  # fmt: skip
        return cls(rows) if rows else None

    def with_rows(self, extra) -> Pricing:
        """These rows and ``extra``, a label in both taken from ``extra`` (a track measured again)."""
        labels = {label for label, *_ in extra}
        return Pricing([row for row in self.rows if row[0] not in labels] + list(extra))

    def gains(self, share: float) -> dict[str, float]:
        """Each setting's lifting gain at ``share``: the plain solve's error over delta's part
        of it, the two adding in quadrature (plain errs by a and s r, the lifted one by s r)."""
        return {label: math.hypot(a, share * r) / max(share * r, 1e-300) for label, _, a, r in self.rows}

    def share_for(self, gain: float) -> float:
        """The smallest share that keeps every setting's gain within ``gain``."""
        return max(a / (math.sqrt(gain * gain - 1) * max(r, 1e-300)) for _, _, a, r in self.rows)


def track_row(library: str, label: str, plain: float, lifted: float, share: float) -> tuple[str, dict, float, float]:
    """A pricing row from another track's measurement (``benchmarks/lifting_tracks.py``): its
    oracle at one setting (``label``, P1/n or P2/n) on the record as built, erring by ``plain``,
    and on the problem w = u - u_m solves, erring by ``lifted``, both absolute over ||u||, the
    part of share ``share``. Read in the pricing's terms: w is delta, so s r = lifted, and the
    bare record's error adds to it in quadrature, a = sqrt(plain^2 - lifted^2) (0 where the
    two discretization errors partly cancel and lifting gains nothing). The row's gain at
    ``share`` is the measured plain / lifted; at another share, delta's error scales with it."""
    match = SETTING.match(label)
    if match is None:
        raise ValueError(f"{library} {label}: not a P1/n or P2/n setting")
    at = {"library": library, "element_degree": int(match.group(1)), "cells_per_side": int(match.group(2))}
    return f"{library} {label}", at, math.sqrt(max(plain * plain - lifted * lifted, 0.0)), lifted / share


def pricing(record: CaseRecord, oracle_dir: Path, valid, exact, part_error_at, extra=()) -> Pricing | None:
    """The calibration setting (DOLFINx) and its coarsest admitted versions at P1 and P2
    (``_coarsest_passing``) and in time, each with the bare record's baseline error and the
    part's (``part_error_at(setting, the bare record's baseline there)``), and the ``extra``
    rows (other tracks': ``track_row``); None for a record without a DOLFINx setting. A
    setting the oracle cannot run is left out."""
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
    return Pricing(rows).with_rows(extra)


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


def _setting(record: CaseRecord) -> dict | None:
    config = record.evaluation_metadata.calibration_config
    setting = config.settings.get("dolfinx") if config else None
    return setting.model_dump(exclude_none=True) if setting is not None else None
