"""Firedrake oracle for Stokes: -nu lap(u) + grad(p) = f, div(u) = 0. Taylor-Hood P2-P1,
h = L/40, MUMPS LU; with velocity data on the whole boundary the pressure constant is
removed by a null space (the compared outputs are velocity quantities)."""

import time

import firedrake as fd

from _fd_common import converged
from _fd_flow import LU_NULLSPACE, TaylorHood
from _outputs import write_outputs


def solve(case_spec):
    started = time.perf_counter()
    flow = TaylorHood(case_spec)
    a, L = flow.stokes_forms()
    w = fd.Function(flow.W)
    solver = fd.LinearVariationalSolver(fd.LinearVariationalProblem(a, L, w, bcs=flow.bcs),
                                        nullspace=flow.nullspace(), solver_parameters=LU_NULLSPACE,
                                        options_prefix="stokes")
    solver.solve()
    axes, arrays = flow.outputs(w)
    write_outputs(arrays, axes, started, {**flow.info(), "ksp_type": "preonly", "pc_type": "lu",
                                          "converged": converged(solver)})
