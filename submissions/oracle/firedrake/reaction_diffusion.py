"""Firedrake oracle for reaction-diffusion: u_t - eps lap(u) + R(u) = f, R from the case.
P2 Lagrange, h = L/40, Crank-Nicolson (dt <= 0.005, the first step as 4 implicit Euler
sub-steps) with a Newton solve per step (MUMPS LU); every step's convergence is checked."""

import time

import firedrake as fd
import ufl

from _fd_common import (Dirichlet, element_degree, forcing_of, initial_function, natural_term, run_newton_steps,
                        sample_on_grid, scalar_space, Stepping, to_ufl)
from _outputs import write_outputs

DEGREE = 2
CELLS_PER_LENGTH = 40
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    pde, bc = case_spec["pde"], case_spec.get("bc", {})
    params = pde["params"]
    eps, reaction = float(params["epsilon"]), params.get("reaction", 0.0)
    domain, V = scalar_space(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE)
    mesh, s = domain.mesh, Stepping(pde["time"])
    v = fd.TestFunction(V)
    u_old = initial_function(V, case_spec, domain)
    uh = fd.Function(V).assign(u_old)

    def part(w, when):  # -eps lap(w) + R(w) - f, weakly, with the boundary terms
        return ((eps * ufl.inner(ufl.grad(w), ufl.grad(v)) + to_ufl(reaction, mesh, u=w) * v
                 - to_ufl(forcing_of(pde), mesh, when) * v) * ufl.dx - natural_term(w, v, domain, bc, when))

    F = (uh - u_old) / s.dt * v * ufl.dx + s.theta * part(uh, s.t_new) + (1 - s.theta) * part(u_old, s.t_old)
    ok, newton = run_newton_steps(F, uh, u_old, Dirichlet(V, domain, bc, s.t_new), s, "rd")
    axes, (u_grid,) = sample_on_grid([uh], case_spec["eval_grid"])
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(domain.size / domain.h), "element_degree": element_degree(V), "num_dofs": V.dim(),
        "newton_iterations": newton, "pc_type": "lu", "converged": ok, **s.info()})
