"""DOLFINx oracle for (scalar) Burgers: u_t + u (sum_i du/dx_i) - nu lap(u) = f.

P2 Lagrange, h = L/40, Crank-Nicolson (dt <= 0.005, the first step as 4 implicit Euler
sub-steps) with a Newton solve per step (MUMPS LU); every step's convergence is checked.
"""

import time

import ufl

from _oracle_common import solve_crank_nicolson_newton

DEGREE = 2
CELLS_PER_LENGTH = 40  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    nu = float(case_spec["pde"]["params"]["nu"])

    def operator(w, v):  # w (dw/dx + dw/dy [+ dw/dz]) - nu lap(w), weakly
        dim = w.ufl_function_space().mesh.geometry.dim
        return nu * ufl.inner(ufl.grad(w), ufl.grad(v)) + w * sum(w.dx(i) for i in range(dim)) * v

    solve_crank_nicolson_newton(case_spec, operator, "burgers_", CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE,
                                started)
