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

from pathlib import Path
from typing import Callable

from .cases import CaseRecord

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
    "helmholtz": ("k",), "convection_diffusion": ("epsilon", "beta"), "reaction_diffusion": ("epsilon",),
    "burgers": ("nu",), "wave": ("c",), "stokes": ("nu",), "navier_stokes": ("nu",),
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
    from .expressions import parse_expression, t

    timed = [where for where, value in record.expressions()
             if where.startswith("case_spec") and t in parse_expression(value, allow=("u",)).free_symbols]
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


def check_grid(record: CaseRecord) -> str | None:
    """Enough evaluation points fall inside the domain."""
    from .grid import EvalGrid, valid_mask

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
    from . import expressions, pdes

    try:
        residual = pdes.max_residual(record)
    except (KeyError, ValueError, TypeError) as exc:
        return f"cannot evaluate the PDE residual: {exc}"
    if residual > RESIDUAL_TOLERANCE:
        return f"the manufactured solution does not satisfy the PDE with the stored forcing (residual {residual:.2g})"
    spec, exact = record.case_spec, record.evaluation_metadata.manufactured_solution
    if spec.ic is not None and "u" in exact and not isinstance(exact["u"], list):
        import numpy as np

        geometry_points = _interior_points(record)
        initial = expressions.evaluate(spec.ic.value, geometry_points, spec.pde.time.t0)
        expected = expressions.evaluate(exact["u"], geometry_points, spec.pde.time.t0)
        if not np.allclose(initial, expected, rtol=1e-8, atol=1e-10):
            return "ic.value differs from the manufactured solution at t0"
    return None


def check_reference(record: CaseRecord, case_dir: Path | None = None) -> str | None:
    meta = record.evaluation_metadata
    if meta.construction_method == "reference_numerical" and meta.reference_path:
        path = Path(case_dir or ".") / meta.reference_path
        if not path.is_file():
            return f"reference file {path} is missing"
    return None


def _interior_points(record: CaseRecord):
    import numpy as np

    from .grid import EvalGrid, valid_mask

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
    "evaluation grid": check_grid,
    "manufactured solution": check_manufactured_solution,
    "reference": check_reference,
}


def static_problems(record: CaseRecord, case_dir: Path | None = None) -> list[str]:
    """``check: problem`` for every static check the record fails."""
    problems = []
    for name, check in STATIC_CHECKS.items():
        problem = check(record, case_dir) if check is check_reference else check(record)
        if problem:
            problems.append(f"{name}: {problem}")
    return problems
