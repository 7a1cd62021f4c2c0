"""Textbook DOLFINx solver for convection-diffusion: [u_t] - eps lap(u) + beta . grad(u) = f.

P1 Lagrange on the fixed mesh of _textbook, plain Galerkin (no stabilization: the guide
shows none, so layers thinner than the mesh may oscillate), MUMPS LU. Steady cases in
one solve; transient ones with Crank-Nicolson at the fixed step of _textbook.
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
    transient = "time" in pde
    t0, dt, steps = tb.time_steps(case_spec) if transient else (0.0, None, 0)
    t_old, t_new = fem.Constant(msh, t0), fem.Constant(msh, t0)
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)

    def operator(w, t):  # -eps lap(w) + beta . grad(w) - f, weakly, with the boundary flux
        eps = tb.expr(pde["params"]["epsilon"], msh, t)
        beta = tb.expr(pde["params"]["beta"][:msh.geometry.dim], msh, t)
        f = tb.expr(pde["forcing"]["value"], msh, t)
        return ((eps * ufl.inner(ufl.grad(w), ufl.grad(v)) + ufl.dot(beta, ufl.grad(w)) * v - f * v) * ufl.dx
                - tb.natural(case_spec, msh, w, v, t))

    bcs, update_bcs = tb.dirichlet(V, case_spec, t_new)
    info = {"element_degree": tb.DEGREE, "num_dofs": V.dofmap.index_map.size_global, "stabilization": "none",
            "converged": True}
    if not transient:
        uh = tb.linear_solve(operator(u, t_new), bcs, "cd_")
        return tb.finish(case_spec, uh, started, info)

    u_n = fem.Function(V)
    u_n.interpolate(fem.Expression(tb.expr(case_spec["ic"]["value"], msh, t_old), V.element.interpolation_points))
    F = (u - u_n) / dt * v * ufl.dx + 0.5 * (operator(u, t_new) + operator(u_n, t_old))
    uh = fem.Function(V)
    problem = tb.linear_problem(F, bcs, "cd_", u=uh)
    for n in range(steps):
        t_old.value, t_new.value = t0 + n * dt, t0 + (n + 1) * dt
        update_bcs()
        tb.lu_solve(problem)
        u_n.x.array[:] = uh.x.array
    tb.finish(case_spec, uh, started, dict(info, time_scheme="crank_nicolson", dt=dt, n_steps=steps))
