"""DOLFINx oracle for reaction-diffusion: u_t - eps lap(u) + R(u) = f, R from the case.

P2 Lagrange, h = L/40, Crank-Nicolson (dt <= 0.005) with a Newton solve per step
(PETSc SNES, MUMPS LU for the Jacobian); every step's convergence is checked.
"""

import time

import ufl
from dolfinx import fem
from dolfinx.fem.petsc import NonlinearProblem
from petsc4py import PETSc

from _oracle_common import (build_mesh, dirichlet_conditions, domain_size, neumann_term, sample_on_grid,
                            time_grid, to_ufl, unsupported, write_outputs)

DEGREE = 2
CELLS_PER_LENGTH = 40  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec["bc"]
    unsupported(bc)
    dim = 3 if "nz" in case_spec["eval_grid"] else 2
    size = domain_size(domain_spec)
    h = size / (CELLS_PER_LENGTH_3D if dim == 3 else CELLS_PER_LENGTH)
    t0, dt, steps = time_grid(pde["time"])
    msh = build_mesh(domain_spec, h)
    V = fem.functionspace(msh, ("Lagrange", DEGREE))
    v = ufl.TestFunction(V)
    params = pde["params"]
    eps = float(params["epsilon"])
    t_new, t_old = fem.Constant(msh, PETSc.ScalarType(t0)), fem.Constant(msh, PETSc.ScalarType(t0))

    u_old = fem.Function(V)
    u_old.interpolate(fem.Expression(to_ufl(case_spec["ic"]["value"], msh), V.element.interpolation_points))
    uh = fem.Function(V)
    uh.x.array[:] = u_old.x.array
    reaction = params.get("reaction", 0.0)
    forcing = pde["forcing"]["value"]
    u_mid = 0.5 * (uh + u_old)
    F = ((uh - u_old) / dt * v + eps * ufl.inner(ufl.grad(u_mid), ufl.grad(v))
         + 0.5 * (to_ufl(reaction, msh, u=uh) + to_ufl(reaction, msh, u=u_old)) * v
         - 0.5 * (to_ufl(forcing, msh, t_new) + to_ufl(forcing, msh, t_old)) * v) * ufl.dx
    F -= 0.5 * (neumann_term(v, domain_spec, bc, t_new) + neumann_term(v, domain_spec, bc, t_old))
    dirichlet, refresh = dirichlet_conditions(V, domain_spec, bc, t_new)
    problem = NonlinearProblem(F, uh, bcs=dirichlet, petsc_options_prefix="rd_", petsc_options={
        "snes_type": "newtonls", "snes_linesearch_type": "basic", "snes_rtol": 1e-10, "snes_atol": 1e-12,
        "ksp_type": "preonly", "pc_type": "lu", "pc_factor_mat_solver_type": "mumps"})
    reason, newton = 1, 0
    for step in range(1, steps + 1):
        t_old.value = t0 + (step - 1) * dt
        t_new.value = t0 + step * dt
        refresh()
        problem.solve()
        reason = min(reason, problem.solver.getConvergedReason())
        newton += problem.solver.getIterationNumber()
        u_old.x.array[:] = uh.x.array
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], h)
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(size / h), "element_degree": DEGREE, "num_dofs": V.dofmap.index_map.size_global,
        "num_time_steps": steps, "dt": dt, "time_scheme": "crank_nicolson", "newton_iterations": newton,
        "snes_type": "newtonls", "pc_type": "lu", "converged": bool(reason > 0), "converged_reason": int(reason),
    })
