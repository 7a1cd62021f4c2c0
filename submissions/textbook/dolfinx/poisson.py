"""Textbook DOLFINx solver for Poisson: -div(kappa grad u) = f.

P1 Lagrange on the fixed mesh of _textbook (64 cells along the largest extent, 16 per
side in 3-D), Dirichlet data strongly, Neumann/Robin weakly, one MUMPS LU solve.
"""

import time

import ufl
from dolfinx import fem

import _textbook as tb


def solve(case_spec):
    started = time.perf_counter()
    msh = tb.build_mesh(case_spec)
    V = fem.functionspace(msh, ("Lagrange", tb.DEGREE))
    pde = case_spec["pde"]
    kappa, f = tb.expr(pde["params"]["kappa"], msh), tb.expr(pde["forcing"]["value"], msh)

    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    F = kappa * ufl.inner(ufl.grad(u), ufl.grad(v)) * ufl.dx - f * v * ufl.dx - tb.natural(case_spec, msh, u, v)
    bcs, _ = tb.dirichlet(V, case_spec)
    uh = tb.linear_solve(F, bcs, "poisson_")
    tb.finish(case_spec, uh, started, {"element_degree": tb.DEGREE, "num_dofs": V.dofmap.index_map.size_global,
                                       "converged": True})
