"""The governing equation of each PDE family, as sympy residuals.

``residuals(record)`` returns the strong-form residuals of a manufactured-solution
case with its stored data (zero when the record is consistent). The same forms define
what the parameters in ``case_spec.pde.params`` mean:

poisson              -div(kappa grad u) = f
heat                 u_t - div(kappa grad u) = f
helmholtz            -lap(u) - k^2 u = f
biharmonic           lap(lap(u)) = f
convection_diffusion [u_t] - epsilon lap(u) + beta . grad u = f        (u_t if pde.time)
reaction_diffusion   u_t - epsilon lap(u) + R(u) = f                  (R = params.reaction, in u)
burgers              u_t + u (sum_i du/dx_i) - nu lap(u) = f          (scalar, direction (1,..,1))
wave                 u_tt - c^2 lap(u) = f
linear_elasticity    -div(sigma(u)) = f, sigma = 2 mu eps(u) + lambda tr(eps(u)) I,
                     mu = E / (2 (1 + nu)), lambda = E nu / ((1 + nu)(1 - 2 nu))  (plane strain)
stokes               -nu lap(u) + grad p = f, div u = 0
navier_stokes        [u_t] + (u . grad) u - nu lap(u) + grad p = f, div u = 0
"""

from __future__ import annotations

import sympy as sp

from .expressions import parse_expression, t, x, y, z
from .expressions import u as U

COORDS = (x, y, z)


# Natural boundary data: Neumann gives c du/dn, Robin gives c du/dn + alpha u, with c
# the coefficient in front of the Laplacian (1 when the family has none).
FLUX_COEFFICIENT = {
    "poisson": "kappa",
    "heat": "kappa",
    "convection_diffusion": "epsilon",
    "reaction_diffusion": "epsilon",
    "burgers": "nu",
}
# outward unit normals of the straight sides natural data may be put on
SIDE_NORMALS = {
    "x_min": (-1, 0, 0),
    "x_max": (1, 0, 0),
    "y_min": (0, -1, 0),
    "y_max": (0, 1, 0),
    "z_min": (0, 0, -1),
    "z_max": (0, 0, 1),
}


def lap(f: sp.Expr, dim: int) -> sp.Expr:
    return sum(sp.diff(f, c, 2) for c in COORDS[:dim])


def grad(f: sp.Expr, dim: int) -> list[sp.Expr]:
    return [sp.diff(f, c) for c in COORDS[:dim]]


def div(v: list[sp.Expr]) -> sp.Expr:
    return sum(sp.diff(vi, c) for vi, c in zip(v, COORDS))


def exact(expr: sp.Expr) -> sp.Expr:
    """Decimals as the rationals they denote (0.2 -> 1/5), so derived data is exact."""
    return sp.nsimplify(expr, rational=True)


def _param(params: dict, name: str, default=None):
    if name not in params:
        if default is None:
            raise KeyError(f"params.{name} is required")
        return sp.sympify(default)
    value = params[name]
    if isinstance(value, list):
        return [exact(parse_expression(v)) for v in value]
    return exact(parse_expression(value, allow=("u",) if name == "reaction" else ()))


def lame(params: dict) -> tuple[sp.Expr, sp.Expr]:
    """(mu, lambda) from E and nu, or given directly as mu and lambda."""
    if "mu" in params and "lambda" in params:
        return _param(params, "mu"), _param(params, "lambda")
    E, nu = _param(params, "E"), _param(params, "nu")
    return E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))


def elasticity_operator(displacement: list[sp.Expr], mu, lmbda, dim: int) -> list[sp.Expr]:
    """-div(sigma(u)) component-wise."""
    eps = [
        [(sp.diff(displacement[i], COORDS[j]) + sp.diff(displacement[j], COORDS[i])) / 2 for j in range(dim)]
        for i in range(dim)
    ]
    trace = sum(eps[i][i] for i in range(dim))
    sigma = [[2 * mu * eps[i][j] + (lmbda * trace if i == j else 0) for j in range(dim)] for i in range(dim)]
    return [-sum(sp.diff(sigma[i][j], COORDS[j]) for j in range(dim)) for i in range(dim)]


def operator(family: str, params: dict, fields: dict, dim: int, transient: bool) -> list[sp.Expr]:
    """Left-hand side of the family's equations applied to fields {"u": ..., "p": ...}."""
    u = fields["u"]
    if family == "poisson":
        kappa = _param(params, "kappa", 1)
        return [-div([kappa * g for g in grad(u, dim)])]
    if family == "heat":
        kappa = _param(params, "kappa", 1)
        return [sp.diff(u, t) - div([kappa * g for g in grad(u, dim)])]
    if family == "helmholtz":
        return [-lap(u, dim) - _param(params, "k") ** 2 * u]
    if family == "biharmonic":
        return [lap(lap(u, dim), dim)]
    if family == "convection_diffusion":
        beta = _param(params, "beta")
        lhs = -_param(params, "epsilon") * lap(u, dim) + sum(b * g for b, g in zip(beta, grad(u, dim)))
        return [lhs + (sp.diff(u, t) if transient else 0)]
    if family == "reaction_diffusion":
        reaction = _param(params, "reaction", 0)
        return [sp.diff(u, t) - _param(params, "epsilon") * lap(u, dim) + reaction.subs(U, u)]
    if family == "burgers":
        return [sp.diff(u, t) + u * sum(grad(u, dim)) - _param(params, "nu") * lap(u, dim)]
    if family == "wave":
        return [sp.diff(u, t, 2) - _param(params, "c") ** 2 * lap(u, dim)]
    if family == "linear_elasticity":
        mu, lmbda = lame(params)
        return elasticity_operator(u, mu, lmbda, dim)
    if family in ("stokes", "navier_stokes"):
        nu, p = _param(params, "nu"), fields.get("p", sp.Integer(0))
        momentum = [-nu * lap(ui, dim) + sp.diff(p, c) for ui, c in zip(u, COORDS)]
        if family == "navier_stokes":
            momentum = [m + sum(uj * sp.diff(ui, c) for uj, c in zip(u, COORDS)) for m, ui in zip(momentum, u)]
            if transient:
                momentum = [m + sp.diff(ui, t) for m, ui in zip(momentum, u)]
        return momentum + [div(u)]
    raise ValueError(f"unknown family {family!r}")


def _sides(record) -> tuple[list[sp.Expr], list[sp.Expr], int]:
    """(operator applied to the exact fields, stored right-hand sides, dimension)."""
    spec = record.case_spec
    dim = 3 if spec.eval_grid.nz is not None else 2
    solution = record.evaluation_metadata.manufactured_solution

    def read(value):  # decimals as exact rationals before any arithmetic (0.1 * 0.05 != 0.005 in floats)
        return [exact(parse_expression(v)) for v in (value if isinstance(value, list) else [value])]

    fields = {name: read(value) if isinstance(value, list) else read(value)[0] for name, value in solution.items()}
    forcing = read(spec.pde.forcing.value if spec.pde.forcing else 0)
    part = record.evaluation_metadata.solve_only
    if part is not None:  # the term that drives the part only a solve recovers is not u's
        forcing = [f - extra for f, extra in zip(forcing, read(part.forcing))]
    lhs = operator(record.family, spec.pde.params, fields, dim, transient=spec.pde.time is not None)
    return lhs, forcing + [sp.Integer(0)] * (len(lhs) - len(forcing)), dim


def residuals(record) -> list[sp.Expr]:
    """Strong-form residuals of a manufactured case (all zero when consistent)."""
    lhs, rhs, _ = _sides(record)
    # decimals in the data become exact rationals, so rounding cannot hide or fake a zero
    return [sp.simplify(exact(a - b)) for a, b in zip(lhs, rhs)]


def max_residual(record, samples: int = 7) -> float:
    """Largest |residual| at a few points and times: a fast numerical consistency check
    (symbolic simplification of long upstream expressions is slow)."""
    import numpy as np

    lhs, rhs, dim = _sides(record)
    spec = record.case_spec
    bbox = spec.eval_grid.bbox
    rng = np.random.default_rng(0)
    worst = 0.0
    t_end = spec.pde.time.t_end if spec.pde.time else 0.0
    for a, b in zip(lhs, rhs):
        function = sp.lambdify((x, y, z, t), a - b, modules="numpy")
        scale = sp.lambdify((x, y, z, t), b, modules="numpy")
        for _ in range(samples):
            point = [rng.uniform(bbox[2 * i], bbox[2 * i + 1]) for i in range(dim)] + [0.5] * (3 - dim)
            when = rng.uniform(0, t_end) if t_end else 0.0
            value = abs(float(function(*point, when)))
            worst = max(worst, value / max(1.0, abs(float(scale(*point, when)))))
    return worst
