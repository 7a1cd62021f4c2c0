"""Textbook DOLFINx solver for steady Navier-Stokes: (u . grad) u - nu lap(u) + grad(p) = f,
div(u) = 0.

Taylor-Hood P2-P1 on the fixed mesh of _textbook (space, velocity data and pressure pin
from _textbook.taylor_hood); Newton (dolfinx NonlinearProblem, MUMPS LU) started from the
Stokes solution, as the tutorials do for moderate Reynolds numbers.
"""

import time

import ufl

import _textbook as tb


def solve(case_spec):
    started = time.perf_counter()
    if "time" in case_spec["pde"]:
        raise NotImplementedError("this textbook solver is for steady Navier-Stokes only")
    msh = tb.build_mesh(case_spec)
    W, bcs, f = tb.taylor_hood(case_spec, msh)
    nu = tb.expr(case_spec["pde"]["params"]["nu"], msh)

    (u, p), (v, q) = ufl.TrialFunctions(W), ufl.TestFunctions(W)
    u = tb.whole(u, msh)
    stokes = (nu * ufl.inner(ufl.grad(u), ufl.grad(v)) - p * ufl.div(v) - q * ufl.div(u) - ufl.dot(f, v)) * ufl.dx
    w = tb.linear_solve(stokes, bcs, "ns_stokes_")  # initial guess

    u, p = ufl.split(w)
    u, (v, q) = tb.whole(u, msh), ufl.TestFunctions(W)
    F = (nu * ufl.inner(ufl.grad(u), ufl.grad(v)) + ufl.dot(ufl.dot(ufl.grad(u), u), v)
         - p * ufl.div(v) - q * ufl.div(u) - ufl.dot(f, v)) * ufl.dx
    iterations = tb.newton_solve(tb.newton(F, w, bcs, "ns_"))
    tb.finish(case_spec, w.sub(0).collapse(), started, {"element": "taylor_hood_p2_p1",
                                                        "num_dofs": W.dofmap.index_map.size_global
                                                        * W.dofmap.index_map_bs,
                                                        "newton_iterations": iterations, "converged": True})
