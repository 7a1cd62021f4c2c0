"""Textbook DOLFINx solver for linear elasticity (plane strain in 2-D):
-div(sigma(u)) = f, sigma = 2 mu eps(u) + lambda tr(eps(u)) I.

Vector P1 Lagrange on the fixed mesh of _textbook, Lame parameters from E and nu (or
given as mu and lambda), Dirichlet data strongly (sides without it are traction free),
one MUMPS LU solve. P1 locks for nu near 1/2: that is part of being a plain solver.
"""

import time

import ufl
from dolfinx import fem

import _textbook as tb


def solve(case_spec):
    started = time.perf_counter()
    msh = tb.build_mesh(case_spec)
    dim = msh.geometry.dim
    V = fem.functionspace(msh, ("Lagrange", tb.DEGREE, (dim,)))
    pde = case_spec["pde"]
    params = pde["params"]
    if "mu" in params:
        mu, lmbda = float(params["mu"]), float(params["lambda"])
    else:
        E, nu = float(params["E"]), float(params["nu"])
        mu, lmbda = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
    f = tb.expr(pde["forcing"]["value"], msh)

    def sigma(w):
        eps = ufl.sym(ufl.grad(w))
        return 2 * mu * eps + lmbda * ufl.tr(eps) * ufl.Identity(dim)

    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    F = ufl.inner(sigma(u), ufl.sym(ufl.grad(v))) * ufl.dx - ufl.dot(f, v) * ufl.dx
    bcs, _ = tb.dirichlet(V, case_spec)
    uh = tb.linear_solve(F, bcs, "elasticity_")
    tb.finish(case_spec, uh, started, {"element_degree": tb.DEGREE, "num_dofs": V.dofmap.index_map.size_global * dim,
                                       "converged": True})
