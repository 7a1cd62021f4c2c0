"""DOLFINx oracle for the heat equation: u_t - div(kappa grad u) = f, Dirichlet, Neumann,
Robin or periodic data.

P2 Lagrange, h = L/40, Crank-Nicolson with dt <= 0.005 (at least 10 steps), its first
step as 4 implicit Euler sub-steps against the ringing of data that do not fit at t0. The
matrix is assembled and factorized once per (theta, dt) (MUMPS); time enters the forms
as a Constant, so each step only re-assembles the right-hand side.
"""

import time

import ufl
from dolfinx import fem
from petsc4py import PETSc

from _oracle_common import (dirichlet_conditions, element_degree, forcing_of, mesh_and_space, natural_term,
                            run_linear_steps, sample_on_grid, SCALAR_BC_KINDS, Stepping, time_grid, to_ufl)
from _outputs import write_outputs
from _periodic import periodic_map

DEGREE = 2
CELLS_PER_LENGTH = 40  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec["bc"]
    t0, dt, steps = time_grid(pde["time"])
    msh, V, h, size = mesh_and_space(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE,
                                     bc_kinds=SCALAR_BC_KINDS)
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    t_new = fem.Constant(msh, PETSc.ScalarType(t0))
    t_old = fem.Constant(msh, PETSc.ScalarType(t0))
    kappa = to_ufl(pde.get("params", {}).get("kappa", 1.0), msh)
    forcing = forcing_of(pde)
    f_new, f_old = to_ufl(forcing, msh, t_new), to_ufl(forcing, msh, t_old)

    u_old = fem.Function(V)
    u_old.interpolate(fem.Expression(to_ufl(case_spec["ic"]["value"], msh), V.element.interpolation_points))
    u_new = fem.Function(V)
    dirichlet, refresh = dirichlet_conditions(V, domain_spec, bc, t_new)

    stepping = Stepping(msh, dt)
    theta = stepping.theta

    def part(w, f, when):  # -div(kappa grad w) - f, weakly, with the boundary terms
        return (kappa * ufl.inner(ufl.grad(w), ufl.grad(v)) - f * v) * ufl.dx - natural_term(w, v, domain_spec, bc,
                                                                                            when)

    a, L = ufl.system((u - u_old) * v * ufl.dx + stepping.dt * (theta * part(u, f_new, t_new)
                                                                + (1 - theta) * part(u_old, f_old, t_old)))
    reason = run_linear_steps(a, L, dirichlet, refresh, u_new, u_old, t_old, t_new, t0, dt, steps, "heat_",
                              periodic_map(V, case_spec, dirichlet), stepping)

    axes, u_grid = sample_on_grid(u_new, case_spec["eval_grid"], h)
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(size / h), "element_degree": element_degree(V),
        "num_dofs": V.dofmap.index_map.size_global, "num_time_steps": steps, "dt": dt,
        "time_scheme": "crank_nicolson_euler_start", "ksp_type": "preonly", "pc_type": "lu",
        "converged": bool(reason > 0), "converged_reason": int(reason),
    })
