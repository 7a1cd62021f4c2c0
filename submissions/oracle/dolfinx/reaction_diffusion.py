"""DOLFINx oracle for reaction-diffusion: u_t - eps lap(u) + R(u) = f, R from the case.

P2 Lagrange, h = L/32 (ungraded), Crank-Nicolson (dt <= 0.005, the first step as 4 implicit Euler
sub-steps) with a Newton solve per step (MUMPS LU for the Jacobian); every step's
convergence is checked.
"""

import time

import ufl

from _oracle_common import solve_crank_nicolson_newton, to_ufl

DEGREE = 2
CELLS_PER_LENGTH = 32  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CORNER_SIZE = 1.0  # no grading towards re-entrant corners
# References are built from a finer grade (build/refinement.py): at L/40 with graded corners
# the anchor took up to 5 x t_base (a Newton solve per step on a graded gear: 11k dofs
# against the baseline's 2.4k) with its error at most 0.04 x tau_acc.
REFERENCE_CELLS_PER_LENGTH = 40
REFERENCE_CORNER_SIZE = 0.1
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    params = case_spec["pde"]["params"]
    eps, reaction = float(params["epsilon"]), params.get("reaction", 0.0)

    def operator(w, v):  # -eps lap(w) + R(w), weakly
        return eps * ufl.inner(ufl.grad(w), ufl.grad(v)) + to_ufl(reaction, w.ufl_function_space().mesh, u=w) * v

    solve_crank_nicolson_newton(case_spec, operator, "rd_", CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE, started,
                                corner_size=CORNER_SIZE)
