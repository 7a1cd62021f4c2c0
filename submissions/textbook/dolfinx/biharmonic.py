"""Textbook DOLFINx solver for the biharmonic equation lap(lap(u)) = f, with u and
lap(u) given on the boundary.

Mixed splitting into two Poisson problems (w = lap(u)): first lap(w) = f with w = the
given lap(u) data, then lap(u) = w with u = the Dirichlet data. P1 Lagrange on the
fixed mesh of _textbook, MUMPS LU for each solve.
"""

import time

import ufl
from dolfinx import fem

import _textbook as tb


def solve(case_spec):
    started = time.perf_counter()
    msh = tb.build_mesh(case_spec)
    V = fem.functionspace(msh, ("Lagrange", tb.DEGREE))
    f = tb.expr(case_spec["pde"]["forcing"]["value"], msh)
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)

    # lap(w) = f  ->  (grad w, grad v) = -(f, v), w = lap(u) data on the boundary
    w_bcs, _ = tb.dirichlet(V, case_spec, kind="laplacian")
    w = tb.linear_solve(ufl.inner(ufl.grad(u), ufl.grad(v)) * ufl.dx + f * v * ufl.dx, w_bcs, "bih_w_")
    # lap(u) = w  ->  (grad u, grad v) = -(w, v), u = Dirichlet data
    u_bcs, _ = tb.dirichlet(V, case_spec)
    uh = tb.linear_solve(ufl.inner(ufl.grad(u), ufl.grad(v)) * ufl.dx + w * v * ufl.dx, u_bcs, "bih_u_")
    tb.finish(case_spec, uh, started, {"element_degree": tb.DEGREE, "num_dofs": V.dofmap.index_map.size_global,
                                       "scheme": "two Poisson solves", "converged": True})
