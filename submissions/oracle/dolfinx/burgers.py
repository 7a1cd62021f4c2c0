"""DOLFINx oracle for (scalar) Burgers: u_t + u (sum_i du/dx_i) - nu lap(u) = f.

P2 Lagrange, h = L/32 (ungraded), Crank-Nicolson (dt <= 0.005, the first step as 4 implicit Euler
sub-steps) with a Newton solve per step (MUMPS LU); every step's convergence is checked.
"""

import time

import ufl

from _oracle_common import solve_crank_nicolson_newton

DEGREE = 2
CELLS_PER_LENGTH = 32  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CORNER_SIZE = 1.0  # no grading towards re-entrant corners
# References are built from a finer grade (build/refinement.py): at L/40 with graded corners
# the anchor took up to 3.1 x t_base (a Newton solve per step; the baselines are P1) with
# its error at most 0.01 x tau_acc.
REFERENCE_CELLS_PER_LENGTH = 40
REFERENCE_CORNER_SIZE = 0.1
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    nu = float(case_spec["pde"]["params"]["nu"])

    def operator(w, v):  # w (dw/dx + dw/dy [+ dw/dz]) - nu lap(w), weakly
        dim = w.ufl_function_space().mesh.geometry.dim
        return nu * ufl.inner(ufl.grad(w), ufl.grad(v)) + w * sum(w.dx(i) for i in range(dim)) * v

    solve_crank_nicolson_newton(case_spec, operator, "burgers_", CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE,
                                started, corner_size=CORNER_SIZE)
