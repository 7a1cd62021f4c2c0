"""Static checks of a case record before it enters the suite (paper, Appendix K step 6).

Each check is a function ``record -> problem or None``, named in the failure message so
a contributor sees which check a record broke. Schema, id uniqueness, expression
parsing, pde.type/family agreement, boundary tags and the reference configuration of
numerical-reference cases are already enforced when a record is parsed (cases.py);
these add what needs more than one field. The trial execution of step 7 (the oracle
runs, the error is finite, the thresholds are sane) is a calibration run of the
record, done by the plugin after these pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import cast

from . import expressions, pdes
from .cases import CaseRecord, Expression, ExpressionOrVector, TimeSpec
from .domains import resolve_geometry
from .expressions import parse_expression, t
from .grid import EvalGrid, valid_mask
from .leaks import leak_problems

ALLOWED_MATH_TYPES = {  # the paper's Table 3a
    "poisson": {"elliptic"},
    "helmholtz": {"elliptic"},
    "biharmonic": {"elliptic"},
    "linear_elasticity": {"elliptic"},
    "heat": {"parabolic"},
    "convection_diffusion": {"elliptic", "mixed_type", "parabolic"},
    "reaction_diffusion": {"reaction_diffusion", "parabolic"},
    "stokes": {"elliptic", "incompressible_flow"},
    "navier_stokes": {"incompressible_flow"},
    "burgers": {"parabolic"},
    "wave": {"hyperbolic"},
}

REQUIRED_PARAMS = {
    "helmholtz": ("k",),
    "convection_diffusion": ("epsilon", "beta"),
    "reaction_diffusion": ("epsilon",),
    "burgers": ("nu",),
    "wave": ("c",),
    "stokes": ("nu",),
    "navier_stokes": ("nu",),
}
VECTOR_FAMILIES = ("linear_elasticity", "stokes", "navier_stokes")
MIN_VALID_POINTS = 100
MIN_VALID_FRACTION = 0.1
RESIDUAL_TOLERANCE = 1e-6


def check_math_type(record: CaseRecord) -> str | None:
    allowed = ALLOWED_MATH_TYPES[record.family]
    wrong = [m for m in record.pde_classification.math_type if m not in allowed]
    if wrong:
        return f"math_type {wrong} does not fit {record.family} (allowed: {sorted(allowed)})"
    return None


def check_params(record: CaseRecord) -> str | None:
    params = record.case_spec.pde.params
    missing = [p for p in REQUIRED_PARAMS.get(record.family, ()) if p not in params]
    if record.family == "linear_elasticity" and not ({"E", "nu"} <= set(params) or {"mu", "lambda"} <= set(params)):
        missing.append("E and nu (or mu and lambda)")
    if missing:
        return f"case_spec.pde.params lacks {missing} for {record.family}"
    beta = params.get("beta")
    dim = 3 if record.case_spec.eval_grid.nz else 2
    if beta is not None and (not isinstance(beta, list) or len(beta) != dim):
        return f"beta must be a vector of {dim} entries"
    return None


def check_time_use(record: CaseRecord) -> str | None:
    """A steady case's data must not depend on t (there is no time to evaluate it at)."""
    if record.case_spec.pde.time is not None:
        return None

    timed = [
        where
        for where, value in record.expressions()
        if where.startswith("case_spec") and t in parse_expression(value, allow=("u",)).free_symbols
    ]
    return f"a steady case uses t in {timed}" if timed else None


def check_data_shapes(record: CaseRecord) -> str | None:
    """Vector families take vector forcing and boundary data, scalar ones scalars."""
    spec = record.case_spec
    dim = 3 if spec.eval_grid.nz else 2
    vector = record.family in VECTOR_FAMILIES
    values = [("forcing", spec.pde.forcing.value if spec.pde.forcing else None)]
    values += [(f"bc.dirichlet on {c.on}", c.value) for c in spec.bc.conditions("dirichlet")]
    for where, value in values:
        if value is None:
            continue
        if vector and not (isinstance(value, list) and len(value) == dim):
            return f"{where} must be a vector of {dim} expressions for {record.family}"
        if not vector and isinstance(value, list):
            return f"{where} must be a scalar expression for {record.family}"
    return None


def check_boundary_data(record: CaseRecord) -> str | None:
    """Something must pin the solution: a Dirichlet or Robin part, or periodicity."""
    bc = record.case_spec.bc
    if record.family in ("stokes", "navier_stokes"):
        return None if bc.conditions("dirichlet") or bc.periodic else "a flow case needs velocity Dirichlet data"
    if not (bc.conditions("dirichlet") or bc.conditions("robin") or bc.periodic):
        return "no Dirichlet, Robin or periodic condition: the solution is not unique"
    if record.family == "biharmonic":
        tags = lambda kind: sorted(t for c in bc.conditions(kind) for t in c.tags)  # noqa: E731
        if tags("laplacian") != tags("dirichlet"):
            return "a biharmonic case needs bc.laplacian on the same tags as bc.dirichlet (u and lap(u))"
    elif bc.laplacian is not None:
        return "bc.laplacian is only meaningful for the biharmonic family"
    return None


BOUNDARY_TOLERANCE = 1e-7


def check_boundary_values(record: CaseRecord) -> str | None:
    """With a manufactured solution, the data on straight sides (x_min ... z_max, or the
    whole boundary of a box) is the exact solution's: Dirichlet u, Neumann c du/dn,
    Robin c du/dn + alpha u (c from pdes.FLUX_COEFFICIENT)."""
    import numpy as np
    import sympy as sp

    meta = record.evaluation_metadata
    # with that construction method the record's validator requires a manufactured solution
    solution = cast(dict[str, ExpressionOrVector], meta.manufactured_solution)
    if meta.construction_method != "manufactured_solution" or "u" not in solution:
        return None
    spec = record.case_spec
    geometry = resolve_geometry(record.case_spec_dict()["domain"])
    box_like = spec.domain.type in ("unit_square", "unit_cube", "periodic_square")
    dim, bbox = geometry.dim, geometry.bbox
    exact = solution["u"]
    components: list[Expression] = exact if isinstance(exact, list) else [exact]
    symbols = [expressions.parse_expression(c) for c in components]
    time = 0.0 if spec.pde.time is None else 0.5 * (spec.pde.time.t0 + spec.pde.time.t_end)
    rng = np.random.default_rng(1)
    flux_coefficient = spec.pde.params.get(pdes.FLUX_COEFFICIENT.get(record.family, ""), 1)
    coefficient = expressions.parse_expression(cast(Expression, flux_coefficient))  # a scalar
    for kind in ("dirichlet", "neumann", "robin"):
        for index, condition in enumerate(spec.bc.conditions(kind)):
            sides = [
                s
                for s in (pdes.SIDE_NORMALS if "boundary" in condition.tags and box_like else condition.tags)
                if s in pdes.SIDE_NORMALS and s in geometry.tags
            ]
            values = condition.value if isinstance(condition.value, list) else [condition.value]
            if kind != "dirichlet" and len(symbols) != 1:
                continue  # tractions are not checked here
            for side in sides:
                normal = pdes.SIDE_NORMALS[side][:dim]
                axis = int(np.flatnonzero(normal)[0])
                points = rng.uniform(bbox[0::2][:dim], bbox[1::2][:dim], size=(12, dim))
                points[:, axis] = bbox[2 * axis + (normal[axis] > 0)]
                for value, u in zip(values, symbols):
                    expected = u
                    if kind != "dirichlet":
                        expected = coefficient * sum(g * n for g, n in zip(pdes.grad(u, dim), normal))
                        if kind == "robin":
                            expected += expressions.parse_expression(condition.alpha or 1) * u
                    want = expressions.evaluate(expressions.expression_to_string(sp.sympify(expected)), points, time)
                    got = expressions.evaluate(value, points, time)
                    if not np.allclose(got, want, rtol=BOUNDARY_TOLERANCE, atol=BOUNDARY_TOLERANCE):
                        return (
                            f"bc.{kind}[{index}] on {side} differs from the manufactured solution's "
                            f"{'value' if kind == 'dirichlet' else kind + ' data'} "
                            f"(max gap {np.max(np.abs(got - want)):.2g})"
                        )
    return None


def check_periodicity(record: CaseRecord) -> str | None:
    """Every data expression (and the exact solution) repeats across the periodic
    directions of the rectangle."""
    import numpy as np

    periodic = record.case_spec.bc.periodic
    if periodic is None:
        return None
    geometry = resolve_geometry(record.case_spec_dict()["domain"])
    bbox = geometry.bbox
    points = np.random.default_rng(2).uniform(bbox[0::2][:2], bbox[1::2][:2], size=(12, 2))
    spec = record.case_spec
    time = 0.0 if spec.pde.time is None else spec.pde.time.t_end
    exact = record.evaluation_metadata.manufactured_solution or {}
    named = [(where, value) for where, value in record.expressions()] + [
        (f"manufactured_solution.{name}", v)
        for name, value in exact.items()
        for v in (value if isinstance(value, list) else [value])
    ]
    for direction in periodic.directions:
        axis = "xyz".index(direction)
        shifted = points.copy()
        shifted[:, axis] += bbox[2 * axis + 1] - bbox[2 * axis]
        for where, value in named:
            if "u" in str(expressions.parse_expression(value, allow=("u",)).free_symbols):
                continue  # a reaction term R(u)
            gap = np.max(np.abs(expressions.evaluate(value, shifted, time) - expressions.evaluate(value, points, time)))
            if gap > BOUNDARY_TOLERANCE * (1 + np.max(np.abs(expressions.evaluate(value, points, time)))):
                return f"{where} is not periodic in {direction} (gap {gap:.2g} across one period)"
    return None


def check_grid(record: CaseRecord) -> str | None:
    """Enough evaluation points fall inside the domain."""

    spec = record.case_spec_dict()
    grid = EvalGrid.from_spec(spec["eval_grid"])
    valid = valid_mask(spec, grid)
    count, fraction = int(valid.sum()), float(valid.mean())
    if count < MIN_VALID_POINTS or fraction < MIN_VALID_FRACTION:
        return f"only {count} grid points ({fraction:.0%}) lie inside the domain"
    return None


def check_manufactured_solution(record: CaseRecord) -> str | None:
    """The exact solution satisfies the PDE with the stored forcing, and the initial data."""
    if record.evaluation_metadata.construction_method != "manufactured_solution":
        return None

    try:
        residual = pdes.max_residual(record)
    except (KeyError, ValueError, TypeError) as exc:
        return f"cannot evaluate the PDE residual: {exc}"
    if residual > RESIDUAL_TOLERANCE:
        return f"the manufactured solution does not satisfy the PDE with the stored forcing (residual {residual:.2g})"
    # the method requires a manufactured solution (the record's validator), initial data a time span
    spec = record.case_spec
    exact = cast(dict[str, ExpressionOrVector], record.evaluation_metadata.manufactured_solution)
    if spec.ic is not None and "u" in exact and not isinstance(u := exact["u"], list):
        import numpy as np

        geometry_points = _interior_points(record)
        initial = expressions.evaluate(
            cast(Expression, spec.ic.value), geometry_points, cast(TimeSpec, spec.pde.time).t0
        )
        expected = expressions.evaluate(u, geometry_points, cast(TimeSpec, spec.pde.time).t0)
        if not np.allclose(initial, expected, rtol=1e-8, atol=1e-10):
            return "ic.value differs from the manufactured solution at t0"
    return None


def check_leaks(record: CaseRecord, case_dir: Path | None = None) -> str | None:
    """No agent-visible data field (or a multiple of it) is the answer, and returning the
    initial condition fails by far (leaks.py). Every record must be built under these
    rules (data_revision 2); only the starter suite's smoke case is exempt."""

    meta = record.evaluation_metadata
    if "smoke_case" in record.tags.structure:
        return None
    if (meta.data_revision or 1) < 2:
        return (
            "evaluation_metadata.data_revision is missing or < 2: the record predates the rule that its "
            "data must not give the answer away; rebuild it (pdebench build-suite / import-upstream)"
        )
    problems = leak_problems(record, case_dir)
    return "; ".join(problems) if problems else None


def check_text_leaks(record: CaseRecord) -> str | None:
    """The manufactured u cannot be read off the text of the agent-visible data
    (text_leaks.py), or it misses the solution by a part only a solve recovers (a record
    with ``evaluation_metadata.solve_only`` passes: check_solve_only sizes the part). The
    builders write records that fail this; ``pdebench build-solve-only`` gives them parts."""
    from .text_leaks import text_leak_problems

    if "smoke_case" in record.tags.structure:
        return None
    problems = text_leak_problems(record)
    if not problems:
        return None
    return "; ".join(problems) + " (pdebench build-solve-only gives the record a part only a solve recovers)"


def check_calibration_settings(record: CaseRecord) -> str | None:
    """Every supported library has a calibration baseline setting (the paper's standard
    calibration configuration; build/calibration_configs.py)."""
    config = record.evaluation_metadata.calibration_config
    missing = [library for library in record.supported_libraries if not config or library not in config.settings]
    if missing:
        return (
            f"evaluation_metadata.calibration_config has no settings for {', '.join(missing)} "
            "(pdebench calibration-configs draws them)"
        )
    return None


def check_reference(record: CaseRecord, case_dir: Path | None = None) -> str | None:
    meta = record.evaluation_metadata
    if meta.construction_method == "reference_numerical" and meta.reference_path:
        path = Path(case_dir or ".") / meta.reference_path
        if not path.is_file():
            return f"reference file {path} is missing"
    return check_solve_only(record, case_dir)


SOLVE_ONLY_TAUS = 5.0  # the manufactured u alone must miss the solution by this many tau_acc
# a solver that reads u out of the data's text and solves for the part alone may be at most
# LIFTING_GAIN_BOUND times more accurate than a plain solve on all but LIFTING_OVER_BOUND of a
# family's records, and LIFTING_GAIN_CEILING times on every one (issue 66), as the build priced it
# (the static check refuses a part over the ceiling) and as the lifting rung measures it
LIFTING_GAIN_BOUND, LIFTING_GAIN_CEILING, LIFTING_OVER_BOUND = 2.0, 3.0, 0.05
SOLVE_ONLY_REFERENCE = 0.1  # and the stored part's error estimate be at most this share of every tau_acc


def u_m_miss(record: CaseRecord) -> dict[str, float]:
    """Per track, the evaluator's error of the manufactured u alone (what the data's text may
    give) against the solution, in multiples of the track's tau_acc: what the threat model
    promises is at least SOLVE_ONLY_TAUS. Empty for a record without a solve-only part."""
    part = record.evaluation_metadata.solve_only
    if part is None:
        return {}
    return {library: part.miss / t.tau_acc for library, t in record.evaluation_metadata.thresholds.items()}


def lifting_gain(record: CaseRecord) -> float | None:
    """The build's estimate of what lifting u_m out of the text gains (the worst of the
    settings it priced at); None for a record without a priced part."""
    part = record.evaluation_metadata.solve_only
    gains = (part.build.get("lifting_gain") or {}) if part is not None else {}
    return max(gains.values()) if gains else None


def lifting_lines(gains: dict[str, tuple[str, float | None]]) -> tuple[list[str], bool]:
    """What the builds' estimates say of the records with a part (id: (family, the worst gain,
    None for a part built before the pricing)): those over LIFTING_GAIN_BOUND (and over the
    ceiling), the families with more than LIFTING_OVER_BOUND of their records over it, how many
    are unpriced; and whether the bound breaks (a family so, or a record over the ceiling)."""
    priced = {case: gain for case, (_, gain) in gains.items() if gain is not None}
    lines = []
    over = sorted(((gain, case) for case, gain in priced.items() if gain > LIFTING_GAIN_BOUND), reverse=True)
    if over:
        lines.append(f"lifting u_m out of the text gains over {LIFTING_GAIN_BOUND:g} x on {len(over)} records:")
        lines += [
            f"  {case}: {gain:.2f} x" + (f" (over {LIFTING_GAIN_CEILING:g} x)" if gain > LIFTING_GAIN_CEILING else "")
            for gain, case in over
        ]
    crowded = sorted({gains[case][0] for case in beyond_allowance(gains)})
    if crowded:
        share = f"{LIFTING_OVER_BOUND:.0%}"
        lines.append(f"over {LIFTING_GAIN_BOUND:g} x on more than {share} of the records of: " + ", ".join(crowded))
    if unpriced := len(gains) - len(priced):
        lines.append(f"{unpriced} records' parts were built before the lifting gain was priced: no estimate")
    return lines, bool(crowded) or any(gain > LIFTING_GAIN_CEILING for gain, _ in over)


def beyond_allowance(gains: dict[str, tuple[str, float | None]]) -> dict[str, float]:
    """The records (id: (family, the worst gain)) a family has over LIFTING_GAIN_BOUND beyond
    its LIFTING_OVER_BOUND share, the largest gains first: what a suite replaces so that every
    family keeps within the bound (id: gain)."""
    by_family: dict[str, list[tuple[float, str]]] = {}
    for case, (family, gain) in gains.items():
        by_family.setdefault(family, []).append((gain or 0.0, case))
    beyond = {}
    for found in by_family.values():
        allowed = int(LIFTING_OVER_BOUND * len(found))
        over = sorted((item for item in found if item[0] > LIFTING_GAIN_BOUND), reverse=True)
        beyond.update({case: gain for gain, case in over[: max(len(over) - allowed, 0)]})
    return beyond


def check_solve_only(record: CaseRecord, case_dir: Path | None = None) -> str | None:
    """A solve-only part (making/solve_only.py) is stored as built (its digest), has the
    grid's shape, and is large enough that the manufactured u, which the data's text may
    give, misses the solution by SOLVE_ONLY_TAUS x every library's tau_acc, a solver that
    solves for the part alone gains at most LIFTING_GAIN_CEILING where the build priced it, and
    its own error estimate is at most SOLVE_ONLY_REFERENCE x every library's tau_acc."""
    import hashlib

    import numpy as np

    part = record.evaluation_metadata.solve_only
    if part is None:
        return None
    path = Path(case_dir or ".") / part.path
    if not path.is_file():
        return f"the solve-only part's file {path} is missing"
    with np.load(path) as data:
        arrays = [np.asarray(data[name]) for name in sorted(data.files)]
    digest = hashlib.sha256(b"".join(a.tobytes() for a in arrays)).hexdigest()[:16]  # as stored
    if digest != part.digest:
        return f"the solve-only part in {path} is not the one built (digest {digest}, record {part.digest})"
    taus = {library: t.tau_acc for library, t in record.evaluation_metadata.thresholds.items()}
    gains = part.build.get("lifting_gain") or {}  # the build's estimate at each setting it priced at
    # the promise is what u_m alone gets on the output arrays (miss); a part built before the
    # pricing (issue 66) is held to its share until its rebuild lands (its build checked that alone)
    carried, what = (min(part.share, part.miss), "min(share, miss)") if gains else (part.share, "share")
    small = {library: tau for library, tau in taus.items() if carried < SOLVE_ONLY_TAUS * tau}
    if small:
        return (
            f"the solve-only part is too small: {what} {carried:.2g} of u, under {SOLVE_ONLY_TAUS:g} x tau_acc on "
            + ", ".join(f"{library} ({SOLVE_ONLY_TAUS * tau:.2g})" for library, tau in sorted(small.items()))
        )
    over = {label: gain for label, gain in gains.items() if gain > LIFTING_GAIN_CEILING}
    if over:
        return f"lifting the manufactured u out of the data's text gains over {LIFTING_GAIN_CEILING:g} x: " + ", ".join(
            f"{gain:.2f} x at {label}" for label, gain in sorted(over.items())
        )
    # the stored part's own error: a small share of every tau_acc (thresholds calibrated after the build)
    loose = {library: tau for library, tau in taus.items() if part.stored_error() > SOLVE_ONLY_REFERENCE * tau}
    if loose:
        return (
            f"the solve-only part's own error estimate {part.stored_error():.2g} is over {SOLVE_ONLY_REFERENCE:g} x "
            + ("tau_acc on " + ", ".join(f"{library} ({tau:.2g})" for library, tau in sorted(loose.items())))
        )
    return None


def _interior_points(record: CaseRecord):
    import numpy as np

    spec = record.case_spec_dict()
    grid = EvalGrid.from_spec(spec["eval_grid"])
    points = grid.points()[valid_mask(spec, grid).ravel()]
    return points[np.linspace(0, len(points) - 1, min(50, len(points))).astype(int)]


STATIC_CHECKS: dict[str, Callable] = {
    "math type": check_math_type,
    "parameters": check_params,
    "time": check_time_use,
    "data shapes": check_data_shapes,
    "boundary data": check_boundary_data,
    "boundary values": check_boundary_values,
    "periodicity": check_periodicity,
    "evaluation grid": check_grid,
    "manufactured solution": check_manufactured_solution,
    "leaks": check_leaks,
    "text leaks": check_text_leaks,
    "calibration settings": check_calibration_settings,
    "reference": check_reference,
}


# the checks a builder's fresh record fails until a later build step: its numerical
# reference (pdebench build-references), its solve-only part (pdebench build-solve-only)
BUILT_LATER = ("reference:", "text leaks:")


def static_problems(record: CaseRecord, case_dir: Path | None = None) -> list[str]:
    """``check: problem`` for every static check the record fails."""
    problems = []
    for name, check in STATIC_CHECKS.items():
        problem = check(record, case_dir) if check in (check_reference, check_leaks) else check(record)
        if problem:
            problems.append(f"{name}: {problem}")
    return problems


def checks_ran(
    records: Counter[str], trials: Counter[str], static_only: bool, lifting: dict[str, tuple[str, float | None]]
) -> list[str]:
    """What ``--pde-validate`` checked, for its terminal summary: the records' outcomes, the
    checks each record went through, the trial runs per library, and what lifting u_m out of
    the text gains on the records that passed the static checks with a part (``lifting_lines``)."""
    outcome = ", ".join(f"{records[o]} {word}" for o, word in (("passed", "passed"), ("failed", "failed")))
    if records["skipped"]:
        outcome += f", {records['skipped']} passed the static checks with no runtime here for a trial run"
    lines = [
        f"{sum(records.values())} records: {outcome}",
        "checks on each record: on loading, the schema, unique ids, expressions, the pde type and the boundary "
        f"tags; then {', '.join(STATIC_CHECKS)}",
    ]
    if static_only:
        lines.append("trial runs: none (--pde-validate-static)")
    else:
        runs = ", ".join(f"{count} on {library}" for library, count in sorted(trials.items())) or "none"
        lines.append(f"trial runs of the oracle (the error finite, the thresholds within bounds): {runs}")
    if lifting:
        priced = sorted(gain for _, gain in lifting.values() if gain is not None)
        figures = f", median {priced[len(priced) // 2]:.2f} x, largest {priced[-1]:.2f} x" if priced else ""
        lines.append(
            f"lifting u_m out of the text (the builds' estimates; over {LIFTING_GAIN_CEILING:g} x is refused): "
            f"{len(priced)} of {len(lifting)} records with a part priced{figures}"
        )
        lines += lifting_lines(lifting)[0]
    return lines
