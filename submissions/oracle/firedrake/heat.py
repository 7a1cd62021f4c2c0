"""Firedrake oracle for the heat equation: u_t - div(kappa grad u) = f, Dirichlet, Neumann,
Robin or periodic data. P2 Lagrange, h = L/40, Crank-Nicolson (dt <= 0.005) started
with 4 implicit Euler sub-steps; one LU factorization per step size (MUMPS)."""

import time

import firedrake as fd
import ufl

from _fd_common import (Dirichlet, element_degree, forcing_of, initial_function, natural_term, run_linear_steps,
                        sample_on_grid, scalar_space, Stepping, to_ufl)
from _outputs import write_outputs

DEGREE = 2
CELLS_PER_LENGTH = 40
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    pde, bc = case_spec["pde"], case_spec.get("bc", {})
    domain, V = scalar_space(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE)
    mesh, s = domain.mesh, Stepping(pde["time"])
    u, v = fd.TrialFunction(V), fd.TestFunction(V)
    kappa = to_ufl(pde.get("params", {}).get("kappa", 1.0), mesh)

    def part(w, when):  # -div(kappa grad w) - f, weakly, with the boundary terms
        return ((kappa * ufl.inner(ufl.grad(w), ufl.grad(v)) - to_ufl(forcing_of(pde), mesh, when) * v) * ufl.dx
                - natural_term(w, v, domain, bc, when))

    u_old = initial_function(V, case_spec, domain)
    u_new = fd.Function(V).assign(u_old)
    a, L = ufl.system((u - u_old) * v * ufl.dx + s.dt * (s.theta * part(u, s.t_new)
                                                         + (1 - s.theta) * part(u_old, s.t_old)))
    ok = run_linear_steps(a, L, u_new, u_old, Dirichlet(V, domain, bc, s.t_new), s, "heat")
    axes, (u_grid,) = sample_on_grid([u_new], case_spec["eval_grid"])
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(domain.size / domain.h), "element_degree": element_degree(V), "num_dofs": V.dim(),
        "ksp_type": "preonly", "pc_type": "lu", "converged": ok, **s.info()})
