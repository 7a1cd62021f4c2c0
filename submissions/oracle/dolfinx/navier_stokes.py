"""DOLFINx oracle for steady Navier-Stokes: (u . grad) u - nu lap(u) + grad(p) = f, div(u) = 0.

Taylor-Hood P2-P1, h = L/24 at Re >= 100 and L/16 below (2-D); Newton (PETSc SNES, MUMPS LU
on the Jacobian) started from the Stokes solution, by continuation in the viscosity where that
fails. The Newton convergence reason is reported; an unconverged solve is never passed off as
a result.
"""

import time

import numpy as np
import ufl
from _flow import TaylorHood
from _oracle_common import check_bc_kinds, direct_solver_options
from dolfinx import fem
from dolfinx.fem.petsc import LinearProblem, NonlinearProblem

# Coarser than Stokes' L/40: at L/40 three Newton solves took up to 2.2x tau_time of
# their P2/11-21 calibration baselines (F-Time for the always-PASS anchor). Measured at
# L/24 (runs=1, -n 2): all 28 PASS, time at most 0.85 tau_time, error at most 0.65 tau_acc
# (two Re 100 cases on the holed and L-shaped domains; the rest at most 0.32).
CELLS_PER_LENGTH = 24
# At Re <= 20 (nu >= 0.05) L/24 was up to 2.6 x t_base for an error of 0.008 tau_acc
# (ns_re20_unit_square_021): a solver should not over-resolve that much. At L/16 the error
# grows about (24/16)^3 = 3.4 x: the largest of those items, 0.087 tau_acc at L/24.
SLOW_FLOW_CELLS_PER_LENGTH, SLOW_FLOW_NU = 16, 0.05
REFERENCE_CELLS_PER_LENGTH = 40  # references: levels of L/40 (pytest_pdebench/authoring/refinement.py)
# Newton from the Stokes field took at most 5 iterations on the published cases (9 on a
# variant): past 12 it has left its basin, and the viscosity walks down from 4 nu to nu
NEWTON_MAX_ITERATIONS = 12
CONTINUATION_FACTOR, CONTINUATION_STEPS = 4.0, 3


def solve(case_spec):
    started = time.perf_counter()
    if "time" in case_spec["pde"]:
        raise NotImplementedError("the DOLFINx oracle solves steady Navier-Stokes only")
    check_bc_kinds(case_spec.get("bc", {}), ())
    nu = float(case_spec["pde"]["params"]["nu"])
    flow = TaylorHood(case_spec, SLOW_FLOW_CELLS_PER_LENGTH if nu >= SLOW_FLOW_NU else CELLS_PER_LENGTH)
    a, L = flow.stokes_forms()
    w = LinearProblem(a, L, bcs=flow.bcs, petsc_options=direct_solver_options(),
                      petsc_options_prefix="ns_stokes_").solve()
    u, p = ufl.split(w)
    v, q = ufl.TestFunctions(flow.W)
    viscosity = fem.Constant(flow.msh, flow.nu)  # a Constant: the continuation below changes it
    F = (viscosity * ufl.inner(ufl.grad(u), ufl.grad(v)) + ufl.dot(ufl.dot(ufl.grad(u), u), v)
         - p * ufl.div(v) - q * ufl.div(u) - ufl.dot(flow.f, v)) * ufl.dx
    problem = NonlinearProblem(F, w, bcs=flow.bcs, petsc_options_prefix="ns_", petsc_options={
        "snes_type": "newtonls", "snes_linesearch_type": "bt", "snes_rtol": 1e-10, "snes_atol": 1e-12,
        "snes_max_it": NEWTON_MAX_ITERATIONS, **direct_solver_options()})
    stokes = w.x.array.copy()
    problem.solve()
    reason, iterations, steps = problem.solver.getConvergedReason(), problem.solver.getIterationNumber(), 0
    if reason <= 0:
        # Newton from the Stokes field can leave its basin at Re ~ 100 (a variant's moved
        # L-corner did): walk down to nu from a larger viscosity, each solve starting at the last
        w.x.array[:] = stokes
        for nu_step in np.geomspace(CONTINUATION_FACTOR * flow.nu, flow.nu, CONTINUATION_STEPS):
            viscosity.value, steps = nu_step, steps + 1
            problem.solve()
            reason = problem.solver.getConvergedReason()
            iterations += problem.solver.getIterationNumber()
            if reason <= 0:
                break
    flow.write(w, started, {"snes_type": "newtonls", "pc_type": "lu", "newton_iterations": iterations,
                            "continuation_steps": steps, "converged": bool(reason > 0),
                            "converged_reason": int(reason)})
