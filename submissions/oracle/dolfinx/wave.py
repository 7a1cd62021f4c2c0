"""DOLFINx oracle for the wave equation: u_tt - c^2 lap(u) = f, u(t0) and u_t(t0) given.

P2 Lagrange, h = L/40, Newmark average acceleration (beta = 1/4, gamma = 1/2: implicit,
unconditionally stable, second order), dt <= 0.005 / 2; references are built with
dt <= 0.005 / 4 (the time error led: at 0.005 it was 1-10e-3 on curved domains, measured
against level 2). Written for the displacement, the
matrix M / (beta dt^2) + c^2 K is factorized once; Dirichlet data enters as u(t_n+1).
"""

import time

import ufl
from dolfinx import fem
from dolfinx.fem.petsc import assemble_matrix, assemble_vector
from petsc4py import PETSc

from _oracle_common import (element_degree, LinearStep, direct_solver_options, domain_size, forcing_of, linear_solver,
                            sample_on_grid, scalar_transient_setup, to_ufl)
from _outputs import write_outputs

DEGREE = 2
CELLS_PER_LENGTH = 40  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 10
BETA, GAMMA = 0.25, 0.5
DT_SHARE = 0.5  # of the common DT_MAX (calibration runs keep their own dt)
# at 0.25 the anchor took up to 3.5 x t_base (4 x the baseline's steps at equal dofs), its
# error at most 0.08 x tau_acc; references keep the finer step (build/refinement.py)
REFERENCE_DT_SHARE = 0.25


def solve(case_spec):
    started = time.perf_counter()
    s = scalar_transient_setup(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE, bc_kinds=(),
                               strong_dt_share=DT_SHARE)
    msh, V, u_n, dt, t_new = s["msh"], s["V"], s["u_old"], s["dt"], s["t_new"]
    pde = case_spec["pde"]
    c2 = float(pde["params"]["c"]) ** 2
    u, w = ufl.TrialFunction(V), ufl.TestFunction(V)
    forcing = forcing_of(pde)
    f_new = to_ufl(forcing, msh, t_new)

    v_n = fem.Function(V)  # velocity
    v_n.interpolate(fem.Expression(to_ufl(case_spec["ic"].get("velocity", 0.0), msh), V.element.interpolation_points))
    a_n = fem.Function(V)  # acceleration at t0 from M a = f(t0) - c^2 K u0
    mass = assemble_matrix(fem.form(u * w * ufl.dx))
    mass.assemble()
    initial = assemble_vector(fem.form((f_new * w - c2 * ufl.inner(ufl.grad(u_n), ufl.grad(w))) * ufl.dx))
    initial.ghostUpdate(addv=PETSc.InsertMode.ADD, mode=PETSc.ScatterMode.REVERSE)
    linear_solver(mass, "wave_mass_", direct_solver_options()).solve(initial, a_n.x.petsc_vec)
    a_n.x.scatter_forward()

    k = 1.0 / (BETA * dt * dt)
    predictor = u_n + dt * v_n + (0.5 - BETA) * dt * dt * a_n  # known part of u_{n+1}
    a = fem.form((k * u * w + c2 * ufl.inner(ufl.grad(u), ufl.grad(w))) * ufl.dx)
    L = fem.form((f_new * w + k * predictor * w) * ufl.dx)
    u_next = fem.Function(V)
    step_solver = LinearStep(a, L, s["dirichlet"], u_next, "wave_")
    reason = 1
    for step in range(1, s["steps"] + 1):
        t_new.value = s["t0"] + step * dt
        s["refresh"]()
        reason = min(reason, step_solver.solve())
        a_next = k * (u_next.x.array - u_n.x.array - dt * v_n.x.array) - (0.5 - BETA) / BETA * a_n.x.array
        v_n.x.array[:] += dt * ((1 - GAMMA) * a_n.x.array + GAMMA * a_next)
        a_n.x.array[:] = a_next
        u_n.x.array[:] = u_next.x.array
    axes, u_grid = sample_on_grid(u_n, case_spec["eval_grid"], s["h"])
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(domain_size(case_spec["domain"]) / s["h"]), "element_degree": element_degree(s["V"]),
        "num_dofs": V.dofmap.index_map.size_global, "num_time_steps": s["steps"], "dt": dt,
        "time_scheme": "newmark_average_acceleration", "ksp_type": "preonly", "pc_type": "lu",
        "converged": bool(reason > 0), "converged_reason": int(reason),
    })
