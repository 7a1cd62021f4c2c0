"""The field F that drives a solve-only part, and the problems the part is solved in: F is
a few oblique waves drawn from the case id (``driving_field``; the rough and smooth tiers draw
shorter or longer ones), the part's problem is the record's with F as its forcing and
homogeneous data (``homogeneous_spec``), the record with its part is the record with s F added
to its forcing (``perturbed_spec``)."""

from __future__ import annotations

import copy
import functools
import hashlib
import math

import numpy as np
import sympy as sp

from ..cases import CaseRecord, ExpressionOrVector
from ..domains import resolve_geometry
from ..expressions import expression_to_string, parse_expression, x, y, z
from ..expressions import u as U
from ..grid import EvalGrid
from .pricing import _components

ROUGH_WAVES, ROUGH_PERIODS = 4, ((2, 5), (1, 3))  # the rough tier's waves; periods per axis [low, high) in 2-D, 3-D
NONLINEAR = ("burgers", "navier_stokes")
COORDS = (x, y, z)
WAVES = 2


def case_rng(case_id: str, purpose: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{case_id}:{purpose}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _number(value: float) -> sp.Float:
    return sp.Float(f"{value:.3g}")


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


def _field_values(field, record: CaseRecord) -> np.ndarray:
    """F on the record's grid, components stacked on the last axis."""
    from ..expressions import evaluate

    grid = EvalGrid.from_spec(record.case_spec_dict()["eval_grid"])
    columns = field if isinstance(field, list) else [field]
    return np.stack([evaluate(expression_to_string(c), grid.points(), 0.0).reshape(grid.shape) for c in columns], -1)
