"""Textbook DOLFINx solver for Helmholtz: -lap(u) - k^2 u = f.

P1 Lagrange on the fixed mesh of _textbook (64 cells along the largest extent, 16 per
side in 3-D), Dirichlet data strongly, Neumann/Robin weakly; the system is indefinite,
so MUMPS LU (as the guide advises).
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
    k, f = tb.expr(pde["params"]["k"], msh), tb.expr(pde["forcing"]["value"], msh)

    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    F = (ufl.inner(ufl.grad(u), ufl.grad(v)) - k**2 * u * v - f * v) * ufl.dx - tb.natural(case_spec, msh, u, v)
    bcs, _ = tb.dirichlet(V, case_spec)
    uh = tb.linear_solve(F, bcs, "helmholtz_")
    tb.finish(case_spec, uh, started, {"element_degree": tb.DEGREE, "num_dofs": V.dofmap.index_map.size_global,
                                       "converged": True})
