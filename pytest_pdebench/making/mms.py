"""Manufactured solutions: from an exact solution, sympy derives the PDE data.

The forcing comes from the family's equation in ``pdes.py`` applied to the exact
fields; Neumann data is the diffusive flux through a straight side. The exact solution
itself goes only to ``evaluation_metadata.manufactured_solution``.
"""

from __future__ import annotations

import contextlib
from typing import cast

import numpy as np
import sympy as sp

from .. import pdes
from ..expressions import evaluate, expression_to_string, parse_expression, t, x, y, z

COORDS_T = (x, y, z, t)
SIMPLIFY_LIMIT = 130  # operations (the starter suite's largest forcing has 125)

FLUX_COEFFICIENT, SIDE_NORMALS = pdes.FLUX_COEFFICIENT, pdes.SIDE_NORMALS


@contextlib.contextmanager
def simplify_limit(limit: int):
    """Simplify only expressions of at most ``limit`` operations inside the block."""
    global SIMPLIFY_LIMIT
    saved, SIMPLIFY_LIMIT = SIMPLIFY_LIMIT, limit
    try:
        yield
    finally:
        SIMPLIFY_LIMIT = saved


def simplified(expr: sp.Expr) -> sp.Expr:
    # simplify() is worth its (super-linear) cost only on small expressions
    return sp.simplify(expr) if sp.count_ops(expr) <= SIMPLIFY_LIMIT else expr


def text(expr: sp.Expr) -> str:
    """Simplified record form, checked to parse back to the same values (floats in the
    data make an exact symbolic comparison fail on rounding alone)."""

    simple = simplified(expr)
    rendered = expression_to_string(simple)
    points = np.random.default_rng(0).uniform(-1, 1, size=(20, 3))

    def values(e):
        return np.broadcast_to(np.asarray(sp.lambdify(COORDS_T, e, "numpy")(*points.T, 0.3), float), (20,))

    got, expected = evaluate(rendered, points, 0.3), values(simple)
    if not np.allclose(got, expected, rtol=1e-12, atol=1e-12):
        # terms that nearly cancel (a bump that adds almost nothing to the forcing) round
        # differently in either order of evaluation: compare with the terms' own size
        size = sum(np.abs(values(term)) for term in sp.Add.make_args(simple))
        if not np.all(np.abs(got - expected) <= 1e-12 * (1 + size)):
            raise AssertionError(f"{rendered!r} does not evaluate like {simple}")
    return rendered


def _fields(solution: dict) -> dict:
    def read(value):
        return pdes.exact(parse_expression(value))

    return {
        name: [read(v) for v in value] if isinstance(value, list) else read(value) for name, value in solution.items()
    }


def derive(family: str, params: dict, solution: dict, dim: int, transient: bool) -> str | list[str]:
    """The forcing f that makes ``solution`` solve the family's equation (exact arithmetic)."""
    lhs = pdes.operator(family, params, _fields(solution), dim, transient)
    vector = family in ("linear_elasticity", "stokes", "navier_stokes")
    forcing = lhs[:dim] if vector else lhs[0]  # the flows' last equation is div u = 0
    return [text(f) for f in forcing] if vector else text(forcing)


def _side_data(family: str, params: dict, u: str, dim: int, sides: tuple[str, ...], alpha: str | None) -> str:
    """coefficient * du/dn [+ alpha u], one expression valid on every listed side."""
    coefficient = parse_expression(params.get(FLUX_COEFFICIENT.get(family, ""), 1))
    solution = parse_expression(u)
    gradient = pdes.grad(solution, dim)
    extra = parse_expression(alpha) * solution if alpha is not None else 0
    values = {
        simplified(sum(coefficient * g * n for g, n in zip(gradient, SIDE_NORMALS[side][:dim])) + extra)
        for side in sides
    }
    if len(values) != 1:
        raise ValueError(f"the boundary data differs between sides {list(sides)}: give them one side at a time")
    return text(values.pop())


def neumann_flux(family: str, params: dict, u: str, dim: int, sides: tuple[str, ...]) -> str:
    """coefficient * du/dn on the sides."""
    return _side_data(family, params, u, dim, sides, None)


def robin_value(family: str, params: dict, u: str, dim: int, sides: tuple[str, ...], alpha: str) -> str:
    """g = coefficient * du/dn + alpha u on the sides."""
    return _side_data(family, params, u, dim, sides, alpha)


def initial_value(exact: str, t0: float) -> str:
    return text(parse_expression(exact).subs(t, t0))


def initial_velocity(exact: str, t0: float) -> str:
    return text(sp.diff(parse_expression(exact), t).subs(t, t0))


def laplacian(u: str, dim: int) -> str:
    return text(pdes.lap(pdes.exact(parse_expression(u)), dim))


def initial_condition(family: str, u: str | list[str] | tuple[str, ...], t0: float) -> dict:
    """The ic block: u(t0), and u_t(t0) for the wave equation (second order in time)."""
    value = [initial_value(c, t0) for c in u] if isinstance(u, (list, tuple)) else initial_value(u, t0)
    ic = {"value": value}
    if family == "wave":
        ic["velocity"] = initial_velocity(cast(str, u), t0)  # the wave equation: scalar
    return ic


def fill_boundary_data(bc: dict, family: str, params: dict, u: str | list[str] | tuple[str, ...], dim: int) -> dict:
    """``bc`` (in place) with every condition's value derived from the exact solution on
    its tags: Dirichlet u, Neumann c du/dn and Robin c du/dn + alpha u (straight sides),
    the biharmonic lap(u)."""
    exact = [text(parse_expression(c)) for c in u] if isinstance(u, (list, tuple)) else text(parse_expression(u))

    def data(kind: str, condition: dict):
        scalar = cast(str, u)  # flux and Laplacian data: the scalar families'
        sides = tuple(condition["on"]) if isinstance(condition["on"], list) else (condition["on"],)
        if kind == "dirichlet":
            return exact
        if kind == "neumann":
            return neumann_flux(family, params, scalar, dim, sides)
        if kind == "robin":
            return robin_value(family, params, scalar, dim, sides, condition["alpha"])
        return laplacian(scalar, dim)

    for kind in ("dirichlet", "neumann", "robin", "laplacian"):
        conditions = bc.get(kind)
        for condition in conditions if isinstance(conditions, list) else [conditions] if conditions else []:
            condition["value"] = data(kind, condition)
    return bc
