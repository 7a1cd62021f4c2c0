"""Manufactured solutions: from an exact solution, sympy derives the PDE data.

Each function takes sympy expressions in x, y, z, t and returns the record fields
(forcing, boundary data, initial condition) as expression strings. The exact
solution itself goes only to ``evaluation_metadata.manufactured_solution``.
"""

from __future__ import annotations

import sympy as sp

from ..expressions import expression_to_string, parse_expression, t, x, y, z

COORDS = (x, y, z)

# outward unit normals of the straight sides that Neumann data may be put on
SIDE_NORMALS = {
    "x_min": (-1, 0, 0), "x_max": (1, 0, 0),
    "y_min": (0, -1, 0), "y_max": (0, 1, 0),
    "z_min": (0, 0, -1), "z_max": (0, 0, 1),
}


def gradient(u: sp.Expr, dim: int) -> list[sp.Expr]:
    return [sp.diff(u, c) for c in COORDS[:dim]]


def divergence(vector: list[sp.Expr]) -> sp.Expr:
    return sum(sp.diff(component, c) for component, c in zip(vector, COORDS))


def diffusion_operator(u: sp.Expr, kappa: sp.Expr, dim: int) -> sp.Expr:
    """-div(kappa grad u)."""
    return -divergence([kappa * g for g in gradient(u, dim)])


def neumann_flux(u: sp.Expr, kappa: sp.Expr, dim: int, side: str) -> sp.Expr:
    """kappa du/dn on a straight side of a box."""
    normal = SIDE_NORMALS[side][:dim]
    return sum(kappa * g * n for g, n in zip(gradient(u, dim), normal))


def text(expr: sp.Expr) -> str:
    """Simplified record form, checked to parse back to the same expression."""
    simplified = sp.simplify(expr)
    rendered = expression_to_string(simplified)
    assert sp.simplify(parse_expression(rendered) - simplified) == 0, rendered
    return rendered


def poisson_data(u: str, kappa: str, dim: int, neumann_sides: tuple[str, ...] = ()) -> dict:
    """-div(kappa grad u) = f, with u on the Dirichlet part and kappa du/dn on sides."""
    u_expr, kappa_expr = parse_expression(u), parse_expression(kappa)
    data = {"forcing": text(diffusion_operator(u_expr, kappa_expr, dim)), "dirichlet": text(u_expr)}
    if neumann_sides:
        fluxes = {side: neumann_flux(u_expr, kappa_expr, dim, side) for side in neumann_sides}
        data["neumann"] = _one_expression_per_sides(fluxes)
    return data


def heat_data(u: str, kappa: str, dim: int, t0: float) -> dict:
    """du/dt - div(kappa grad u) = f, u(t0) = u0, u = g on the boundary."""
    u_expr, kappa_expr = parse_expression(u), parse_expression(kappa)
    forcing = sp.diff(u_expr, t) + diffusion_operator(u_expr, kappa_expr, dim)
    return {"forcing": text(forcing), "dirichlet": text(u_expr), "initial": text(u_expr.subs(t, t0))}


def _one_expression_per_sides(fluxes: dict[str, sp.Expr]) -> str:
    """One flux expression valid on all listed sides, or an error if they differ."""
    values = {sp.simplify(v) for v in fluxes.values()}
    if len(values) != 1:
        raise ValueError(f"the Neumann flux differs between sides {list(fluxes)}: give them one side at a time")
    return text(values.pop())


def pde_residual(record) -> sp.Expr:
    """Residual of a manufactured case's PDE with its stored data (0 when consistent)."""
    spec = record.case_spec
    dim = 3 if spec.eval_grid.nz is not None else 2
    u = parse_expression(record.evaluation_metadata.manufactured_solution["u"])
    kappa = parse_expression(spec.pde.params.get("kappa", 1.0))
    forcing = parse_expression(spec.pde.forcing.value)
    residual = diffusion_operator(u, kappa, dim) - forcing
    if spec.pde.type == "heat":
        residual += sp.diff(u, t)
    return sp.simplify(residual)
