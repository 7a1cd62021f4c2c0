"""DOLFINx oracle for Stokes: -nu lap(u) + grad(p) = f, div(u) = 0.

Taylor-Hood P2-P1 (inf-sup stable), h = L/24, direct LU (MUMPS). When velocity data is
given on the whole boundary, the pressure is fixed to 0 at one vertex (it is only
defined up to a constant); the outputs compared are velocity quantities unless the case
asks for p.
"""

import time

from dolfinx.fem.petsc import LinearProblem

from _flow import TaylorHood
from _oracle_common import check_bc_kinds, direct_solver_options


def solve(case_spec):
    started = time.perf_counter()
    check_bc_kinds(case_spec.get("bc", {}), ())
    flow = TaylorHood(case_spec)
    a, L = flow.stokes_forms()
    problem = LinearProblem(a, L, bcs=flow.bcs, petsc_options=direct_solver_options(), petsc_options_prefix="stokes_")
    w = problem.solve()
    reason = problem.solver.getConvergedReason()
    flow.write(w, started, {"ksp_type": "preonly", "pc_type": "lu", "converged": bool(reason > 0),
                            "converged_reason": int(reason)})
