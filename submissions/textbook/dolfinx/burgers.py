"""Textbook DOLFINx solver for (scalar) Burgers: u_t + u (du/dx + du/dy [+ du/dz]) - nu lap(u) = f.

P1 Lagrange on the fixed mesh of _textbook; Crank-Nicolson with the fixed step of
_textbook; each step a Newton solve (dolfinx NonlinearProblem, MUMPS LU) started from
the previous step. No stabilization.
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
    nu = tb.expr(pde["params"]["nu"], msh)
    t0, dt, steps = tb.time_steps(case_spec)
    t_old, t_new = fem.Constant(msh, t0), fem.Constant(msh, t0)

    u_n = fem.Function(V)  # the solution at t_n, first the initial condition
    u_n.interpolate(fem.Expression(tb.expr(case_spec["ic"]["value"], msh, t_old), V.element.interpolation_points))
    u = fem.Function(V)  # the unknown at t_n+1; Newton starts from the last step
    u.x.array[:] = u_n.x.array
    v = ufl.TestFunction(V)

    def operator(w, t):  # w (sum_i dw/dx_i) - nu lap(w) - f, weakly, with the boundary flux
        w, f = tb.whole(w, msh, t), tb.expr(pde["forcing"]["value"], msh, t)
        convection = w * sum(w.dx(i) for i in range(msh.geometry.dim))
        return ((nu * ufl.inner(ufl.grad(w), ufl.grad(v)) + (convection - f) * v) * ufl.dx
                - tb.natural(case_spec, msh, w, v, t))

    F = ((tb.whole(u, msh, t_new) - tb.whole(u_n, msh, t_old)) / dt * v * ufl.dx
         + 0.5 * (operator(u, t_new) + operator(u_n, t_old)))
    bcs, update_bcs = tb.dirichlet(V, case_spec, t_new)
    problem = tb.newton(F, u, bcs, "burgers_")
    iterations = 0
    for n in range(steps):
        t_old.value, t_new.value = t0 + n * dt, t0 + (n + 1) * dt
        update_bcs()
        iterations += tb.newton_solve(problem)
        u_n.x.array[:] = u.x.array
    tb.finish(case_spec, u, started, {"element_degree": tb.DEGREE, "num_dofs": V.dofmap.index_map.size_global,
                                      "time_scheme": "crank_nicolson", "dt": dt, "n_steps": steps,
                                      "newton_iterations": iterations, "converged": True})
