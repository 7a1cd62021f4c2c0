"""DOLFINx oracle for convection-diffusion: [u_t] - eps lap(u) + beta . grad(u) = f.

P2 Lagrange, h = L/48, SUPG with the residual of the full operator and
tau = h / (2 |beta|) * min(1, Pe_h / 3), Pe_h = |beta| h / (2 eps). Steady cases: one
LU solve. Transient cases: Crank-Nicolson (dt <= 0.005, the first step as 4 implicit
Euler sub-steps) with the SUPG residual of the time-discrete equation; one factorization
per (theta, dt).
"""

import time

import ufl
from dolfinx import fem
from petsc4py import PETSc

from _oracle_common import (cell_diameter, dirichlet_conditions, element_degree, forcing_of, mesh_and_space, natural_term,
                            run_linear_steps, sample_on_grid, SCALAR_BC_KINDS, solve_linear, Stepping, time_grid,
                            to_ufl)
from _outputs import write_outputs
from _periodic import periodic_map

DEGREE = 2
CELLS_PER_LENGTH = 48  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 12


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec.get("bc", {})
    msh, V, h, size = mesh_and_space(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE,
                                     bc_kinds=SCALAR_BC_KINDS)
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    params = pde["params"]
    eps = fem.Constant(msh, PETSc.ScalarType(float(params["epsilon"])))
    beta = ufl.as_vector([float(b) for b in params["beta"]])
    beta_norm = ufl.sqrt(ufl.dot(beta, beta)) + 1e-14
    cell_h = cell_diameter(msh)
    peclet = beta_norm * cell_h / (2 * eps)
    tau = cell_h / (2 * beta_norm) * ufl.min_value(1.0, peclet / 3)
    streamline_v = tau * ufl.dot(beta, ufl.grad(v))

    def operator(w):  # strong form of -eps lap(w) + beta . grad(w)
        return -eps * ufl.div(ufl.grad(w)) + ufl.dot(beta, ufl.grad(w))

    def weak(w):
        return (eps * ufl.inner(ufl.grad(w), ufl.grad(v)) + ufl.dot(beta, ufl.grad(w)) * v) * ufl.dx

    info = {"mesh_resolution": round(size / h), "element_degree": element_degree(V), "num_dofs": V.dofmap.index_map.size_global,
            "stabilization": "supg", "ksp_type": "preonly", "pc_type": "lu"}
    if "time" not in pde:
        f = to_ufl(forcing_of(pde), msh)
        a, L = ufl.system(weak(u) + (operator(u) - f) * streamline_v * ufl.dx - f * v * ufl.dx
                          - natural_term(u, v, domain_spec, bc))
        bcs, _ = dirichlet_conditions(V, domain_spec, bc)
        uh, reason = solve_linear(a, L, bcs, V, "cd_", periodic_map(V, case_spec, bcs))
    else:
        t0, dt, steps = time_grid(pde["time"])
        t_new, t_old = fem.Constant(msh, PETSc.ScalarType(t0)), fem.Constant(msh, PETSc.ScalarType(t0))
        forcing = forcing_of(pde)
        stepping = Stepping(msh, dt)
        theta, dt_c = stepping.theta, stepping.dt
        f_mid = theta * to_ufl(forcing, msh, t_new) + (1 - theta) * to_ufl(forcing, msh, t_old)
        u_old = fem.Function(V)
        u_old.interpolate(fem.Expression(to_ufl(case_spec["ic"]["value"], msh), V.element.interpolation_points))
        uh = fem.Function(V)
        dirichlet, refresh = dirichlet_conditions(V, domain_spec, bc, t_new)
        # theta scheme (Crank-Nicolson after two implicit Euler steps):
        # (u - u_old)/dt + theta A u + (1 - theta) A u_old = f_mid, tested with v + tau beta.grad(v)
        residual_u = u / dt_c + theta * operator(u)
        residual_old = u_old / dt_c - (1 - theta) * operator(u_old) + f_mid
        a, L = ufl.system((u - u_old) / dt_c * v * ufl.dx + theta * weak(u) + (1 - theta) * weak(u_old)
                          - f_mid * v * ufl.dx + (residual_u - residual_old) * streamline_v * ufl.dx
                          - theta * natural_term(u, v, domain_spec, bc, t_new)
                          - (1 - theta) * natural_term(u_old, v, domain_spec, bc, t_old))
        reason = run_linear_steps(a, L, dirichlet, refresh, uh, u_old, t_old, t_new, t0, dt, steps, "cd_",
                                  periodic_map(V, case_spec, dirichlet), stepping)
        info.update(num_time_steps=steps, dt=dt, time_scheme="crank_nicolson_euler_start")
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], h)
    write_outputs(u_grid, axes, started, {**info, "converged": bool(reason > 0), "converged_reason": int(reason)})
