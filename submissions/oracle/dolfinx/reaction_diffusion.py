"""DOLFINx oracle for reaction-diffusion: u_t - eps lap(u) + R(u) = f, R from the case.

P2 Lagrange, h = L/40, Crank-Nicolson (dt <= 0.005, the first step as 4 implicit Euler
sub-steps) with a Newton solve per step (MUMPS LU for the Jacobian); every step's
convergence is checked.
"""

import time

import ufl

from _oracle_common import solve_crank_nicolson_newton, to_ufl

DEGREE = 2
CELLS_PER_LENGTH = 40  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    params = case_spec["pde"]["params"]
    eps, reaction = float(params["epsilon"]), params.get("reaction", 0.0)

    def operator(w, v):  # -eps lap(w) + R(w), weakly
        return eps * ufl.inner(ufl.grad(w), ufl.grad(v)) + to_ufl(reaction, w.ufl_function_space().mesh, u=w) * v

    solve_crank_nicolson_newton(case_spec, operator, "rd_", CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE, started)
