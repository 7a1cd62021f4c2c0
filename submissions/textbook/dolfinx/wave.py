"""Textbook DOLFINx solver for the wave equation: u_tt - c^2 lap(u) = f, with u and u_t
given at t0.

P1 Lagrange on the fixed mesh of _textbook. Crank-Nicolson on the first-order system
u_t = w, w_t = c^2 lap(u) + f (the same as Newmark's average acceleration: no numerical
damping), with the fixed step of _textbook. Eliminating w^{n+1} leaves one
Poisson-like solve per step for u^{n+1}:
  u^{n+1} - (dt c)^2/4 lap(u^{n+1}) = u^n + dt w^n + dt^2/4 (c^2 lap(u^n) + f^{n+1} + f^n),
then w^{n+1} = 2 (u^{n+1} - u^n) / dt - w^n. MUMPS LU.
"""

import time

import ufl
from dolfinx import fem

import _textbook as tb


def solve(case_spec):
    started = time.perf_counter()
    msh = tb.build_mesh(case_spec)
    V = fem.functionspace(msh, ("Lagrange", tb.DEGREE))
    pde, ic = case_spec["pde"], case_spec["ic"]
    c = tb.expr(pde["params"]["c"], msh)
    t0, dt, steps = tb.time_steps(case_spec)
    t_old, t_new = fem.Constant(msh, t0), fem.Constant(msh, t0)
    points = V.element.interpolation_points

    u_n, w_n = fem.Function(V), fem.Function(V)  # u and u_t at t_n, first the initial data
    u_n.interpolate(fem.Expression(tb.expr(ic["value"], msh, t_old), points))
    w_n.interpolate(fem.Expression(tb.expr(ic.get("velocity", 0.0), msh, t_old), points))
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    f_old, f_new = tb.expr(pde["forcing"]["value"], msh, t_old), tb.expr(pde["forcing"]["value"], msh, t_new)

    k = dt**2 / 4 * c**2
    F = ((u - u_n - dt * w_n - dt**2 / 4 * (f_new + f_old)) * v * ufl.dx
         + k * ufl.inner(ufl.grad(u + u_n), ufl.grad(v)) * ufl.dx)
    bcs, update_bcs = tb.dirichlet(V, case_spec, t_new)
    uh = fem.Function(V)
    problem = tb.linear_problem(F, bcs, "wave_", u=uh)
    for n in range(steps):
        t_old.value, t_new.value = t0 + n * dt, t0 + (n + 1) * dt
        update_bcs()
        tb.lu_solve(problem)
        w_n.x.array[:] = 2 * (uh.x.array - u_n.x.array) / dt - w_n.x.array  # Lagrange: nodal values
        u_n.x.array[:] = uh.x.array
    tb.finish(case_spec, uh, started, {"element_degree": tb.DEGREE, "num_dofs": V.dofmap.index_map.size_global,
                                       "time_scheme": "crank_nicolson (newmark average acceleration)",
                                       "dt": dt, "n_steps": steps, "converged": True})
