"""Textbook DOLFINx solver for Stokes: -nu lap(u) + grad(p) = f, div(u) = 0.

Taylor-Hood P2-P1 (the stable pair for this saddle point) on the fixed mesh of
_textbook, velocity data strongly; with velocity given on the whole boundary the
pressure is fixed to 0 at one boundary dof (it is only defined up to a constant).
One MUMPS LU solve of the monolithic system.
"""

import time

import ufl

import _textbook as tb


def solve(case_spec):
    started = time.perf_counter()
    msh = tb.build_mesh(case_spec)
    W, bcs, f = tb.taylor_hood(case_spec, msh)
    nu = tb.expr(case_spec["pde"]["params"]["nu"], msh)
    (u, p), (v, q) = ufl.TrialFunctions(W), ufl.TestFunctions(W)
    F = (nu * ufl.inner(ufl.grad(u), ufl.grad(v)) - p * ufl.div(v) - q * ufl.div(u) - ufl.dot(f, v)) * ufl.dx
    w = tb.linear_solve(F, bcs, "stokes_")
    tb.finish(case_spec, w.sub(0).collapse(), started, {"element": "taylor_hood_p2_p1",
                                                        "num_dofs": W.dofmap.index_map.size_global
                                                        * W.dofmap.index_map_bs, "converged": True})
