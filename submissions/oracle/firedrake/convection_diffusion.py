"""Firedrake oracle for convection-diffusion: [u_t] - eps lap(u) + beta . grad(u) = f.

P2 Lagrange, h = L/48, SUPG with the residual of the full operator and
tau = h / (2 |beta|) * min(1, Pe_h / 3), Pe_h = |beta| h / (2 eps). Steady cases: one
LU solve. Transient cases: Crank-Nicolson (dt <= 0.005, the first step as 4 implicit
Euler sub-steps) with the SUPG residual of the time-discrete equation.
"""

import time

import firedrake as fd
import ufl

from _fd_common import (element_degree, LU, Dirichlet, Stepping, converged, forcing_of, initial_function, natural_term,
                        run_linear_steps, sample_on_grid, scalar_space, to_ufl)
from _outputs import write_outputs

DEGREE = 2
CELLS_PER_LENGTH = 48
CELLS_PER_LENGTH_3D = 12


def solve(case_spec):
    started = time.perf_counter()
    pde, bc = case_spec["pde"], case_spec.get("bc", {})
    domain, V = scalar_space(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE)
    mesh = domain.mesh
    u, v = fd.TrialFunction(V), fd.TestFunction(V)
    eps = fd.Constant(float(pde["params"]["epsilon"]))
    beta = ufl.as_vector([float(b) for b in pde["params"]["beta"]])
    beta_norm = ufl.sqrt(ufl.dot(beta, beta)) + 1e-14
    cell_h = domain.cell_diameter()
    tau = cell_h / (2 * beta_norm) * ufl.min_value(1.0, beta_norm * cell_h / (2 * eps) / 3)
    streamline_v = tau * ufl.dot(beta, ufl.grad(v))

    def operator(w):  # strong form of -eps lap(w) + beta . grad(w)
        return -eps * ufl.div(ufl.grad(w)) + ufl.dot(beta, ufl.grad(w))

    def weak(w):
        return (eps * ufl.inner(ufl.grad(w), ufl.grad(v)) + ufl.dot(beta, ufl.grad(w)) * v) * ufl.dx

    info = {"mesh_resolution": round(domain.size / domain.h), "element_degree": element_degree(V), "num_dofs": V.dim(),
            "stabilization": "supg", "ksp_type": "preonly", "pc_type": "lu"}
    if "time" not in pde:
        f = to_ufl(forcing_of(pde), mesh)
        a, L = ufl.system(weak(u) + (operator(u) - f) * streamline_v * ufl.dx - f * v * ufl.dx
                          - natural_term(u, v, domain, bc))
        uh = fd.Function(V)
        solver = fd.LinearVariationalSolver(fd.LinearVariationalProblem(a, L, uh, bcs=Dirichlet(V, domain, bc).bcs),
                                            solver_parameters=LU, options_prefix="cd")
        solver.solve()
        ok = converged(solver)
    else:
        s = Stepping(pde["time"])
        theta = s.theta
        f_mid = theta * to_ufl(forcing_of(pde), mesh, s.t_new) + (1 - theta) * to_ufl(forcing_of(pde), mesh, s.t_old)
        u_old = initial_function(V, case_spec, domain)
        uh = fd.Function(V).assign(u_old)
        residual_u = u / s.dt + theta * operator(u)
        residual_old = u_old / s.dt - (1 - theta) * operator(u_old) + f_mid
        a, L = ufl.system((u - u_old) / s.dt * v * ufl.dx + theta * weak(u) + (1 - theta) * weak(u_old)
                          - f_mid * v * ufl.dx + (residual_u - residual_old) * streamline_v * ufl.dx
                          - theta * natural_term(u, v, domain, bc, s.t_new)
                          - (1 - theta) * natural_term(u_old, v, domain, bc, s.t_old))
        ok = run_linear_steps(a, L, uh, u_old, Dirichlet(V, domain, bc, s.t_new), s, "cd")
        info.update(s.info())
    axes, (u_grid,) = sample_on_grid([uh], case_spec["eval_grid"])
    write_outputs(u_grid, axes, started, {**info, "converged": ok})
