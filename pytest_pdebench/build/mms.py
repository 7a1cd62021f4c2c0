"""Manufactured solutions: from an exact solution, sympy derives the PDE data.

The forcing comes from the family's equation in ``pdes.py`` applied to the exact
fields; Neumann data is the diffusive flux through a straight side. The exact solution
itself goes only to ``evaluation_metadata.manufactured_solution``.
"""

from __future__ import annotations

import sympy as sp

from .. import pdes
from ..expressions import expression_to_string, parse_expression, t, x, y, z

COORDS_T = (x, y, z, t)
SIMPLIFY_LIMIT = 130  # operations (the starter suite's largest forcing has 125)

# outward unit normals of the straight sides that Neumann data may be put on
SIDE_NORMALS = {
    "x_min": (-1, 0, 0), "x_max": (1, 0, 0),
    "y_min": (0, -1, 0), "y_max": (0, 1, 0),
    "z_min": (0, 0, -1), "z_max": (0, 0, 1),
}
# the coefficient in front of the Laplacian, whose flux a Neumann condition prescribes
FLUX_COEFFICIENT = {"poisson": "kappa", "heat": "kappa", "convection_diffusion": "epsilon",
                    "reaction_diffusion": "epsilon"}


def text(expr: sp.Expr) -> str:
    """Simplified record form, checked to parse back to the same values (floats in the
    data make an exact symbolic comparison fail on rounding alone)."""
    import numpy as np

    from ..expressions import evaluate

    # simplify() is worth its (super-linear) cost only on small expressions
    simplified = sp.simplify(expr) if sp.count_ops(expr) <= SIMPLIFY_LIMIT else expr
    rendered = expression_to_string(simplified)
    points = np.random.default_rng(0).uniform(-1, 1, size=(20, 3))
    expected = np.broadcast_to(np.asarray(sp.lambdify(COORDS_T, simplified, "numpy")(*points.T, 0.3), float), (20,))
    if not np.allclose(evaluate(rendered, points, 0.3), expected, rtol=1e-12, atol=1e-12):
        raise AssertionError(f"{rendered!r} does not evaluate like {simplified}")
    return rendered


def _fields(solution: dict) -> dict:
    def read(value):
        return pdes.exact(parse_expression(value))

    return {name: [read(v) for v in value] if isinstance(value, list) else read(value)
            for name, value in solution.items()}


def derive(family: str, params: dict, solution: dict, dim: int, transient: bool) -> str | list[str]:
    """The forcing f that makes ``solution`` solve the family's equation (exact arithmetic)."""
    lhs = pdes.operator(family, params, _fields(solution), dim, transient)
    vector = family in ("linear_elasticity", "stokes", "navier_stokes")
    forcing = lhs[:dim] if vector else lhs[0]  # the flows' last equation is div u = 0
    return [text(f) for f in forcing] if vector else text(forcing)


def neumann_flux(family: str, params: dict, u: str, dim: int, sides: tuple[str, ...]) -> str:
    """coefficient * du/dn, one expression valid on every listed side."""
    coefficient = parse_expression(params.get(FLUX_COEFFICIENT.get(family, ""), 1))
    gradient = pdes.grad(parse_expression(u), dim)
    fluxes = {sp.simplify(sum(coefficient * g * n for g, n in zip(gradient, SIDE_NORMALS[side][:dim])))
              for side in sides}
    if len(fluxes) != 1:
        raise ValueError(f"the Neumann flux differs between sides {list(sides)}: give them one side at a time")
    return text(fluxes.pop())


def initial_value(exact: str, t0: float) -> str:
    return text(parse_expression(exact).subs(t, t0))


def initial_velocity(exact: str, t0: float) -> str:
    return text(sp.diff(parse_expression(exact), t).subs(t, t0))


def laplacian(u: str, dim: int) -> str:
    return text(pdes.lap(pdes.exact(parse_expression(u)), dim))
