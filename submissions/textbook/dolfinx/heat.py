"""Textbook DOLFINx solver for the heat equation: u_t - div(kappa grad u) = f.

P1 Lagrange on the fixed mesh of _textbook; Crank-Nicolson with the fixed step of
_textbook (dt = min(0.01, T/10), dividing T); t lives in fem.Constants so the forms
compile once; Dirichlet data at t_n+1, Neumann/Robin averaged like the rest; MUMPS LU.
"""

import time

import ufl
from dolfinx import fem

import _textbook as tb


def solve(case_spec):
    started = time.perf_counter()
    msh = tb.build_mesh(case_spec)
    V = fem.functionspace(msh, ("Lagrange", tb.DEGREE))
    pde = case_spec["pde"]
    t0, dt, steps = tb.time_steps(case_spec)
    t_old, t_new = fem.Constant(msh, t0), fem.Constant(msh, t0)

    u_n = fem.Function(V)  # the solution at t_n, first the initial condition
    u_n.interpolate(fem.Expression(tb.expr(case_spec["ic"]["value"], msh, t_old), V.element.interpolation_points))
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)

    def operator(w, t):  # -div(kappa grad w) - f, weakly, with the boundary flux
        kappa, f = tb.expr(pde["params"]["kappa"], msh, t), tb.expr(pde["forcing"]["value"], msh, t)
        return (kappa * ufl.inner(ufl.grad(w), ufl.grad(v)) - f * v) * ufl.dx - tb.natural(case_spec, msh, w, v, t)

    F = (u - u_n) / dt * v * ufl.dx + 0.5 * (operator(u, t_new) + operator(u_n, t_old))
    bcs, update_bcs = tb.dirichlet(V, case_spec, t_new)
    uh = fem.Function(V)
    problem = tb.linear_problem(F, bcs, "heat_", u=uh)
    for n in range(steps):
        t_old.value, t_new.value = t0 + n * dt, t0 + (n + 1) * dt
        update_bcs()
        tb.lu_solve(problem)
        u_n.x.array[:] = uh.x.array
    tb.finish(case_spec, uh, started, {"element_degree": tb.DEGREE, "num_dofs": V.dofmap.index_map.size_global,
                                       "time_scheme": "crank_nicolson", "dt": dt, "n_steps": steps,
                                       "converged": True})
