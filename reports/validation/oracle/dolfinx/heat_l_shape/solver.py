"""DOLFINx oracle for the heat equation: u_t - div(kappa grad u) = f, Dirichlet and
Neumann data.

P2 Lagrange, h = L/40, Crank-Nicolson with about 20 steps (dt <= 0.005). The
matrix is assembled and factorized once (MUMPS); time enters the forms as a
Constant, so each step only re-assembles the right-hand side.
"""

import math
import time

import ufl
from dolfinx import fem
from dolfinx.fem.petsc import apply_lifting, assemble_matrix, assemble_vector, create_vector, set_bc
from petsc4py import PETSc

from _oracle_common import (build_mesh, dirichlet_conditions, direct_solver_options, domain_size, linear_solver,
                            neumann_term, sample_on_grid, to_ufl, unsupported, write_outputs)

DEGREE = 2


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec["bc"]
    unsupported(bc)
    dim = 3 if "nz" in case_spec["eval_grid"] else 2
    h = domain_size(domain_spec) / (10 if dim == 3 else 40)
    t0, t_end = pde["time"].get("t0", 0.0), pde["time"]["t_end"]
    steps = max(10, math.ceil((t_end - t0) / 0.005))
    dt = (t_end - t0) / steps

    msh = build_mesh(domain_spec, h)
    V = fem.functionspace(msh, ("Lagrange", DEGREE))
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    t_new = fem.Constant(msh, PETSc.ScalarType(t0))
    t_old = fem.Constant(msh, PETSc.ScalarType(t0))
    kappa = to_ufl(pde.get("params", {}).get("kappa", 1.0), msh)
    forcing = pde["forcing"]["value"]
    f_new, f_old = to_ufl(forcing, msh, t_new), to_ufl(forcing, msh, t_old)

    u_old = fem.Function(V)
    u_old.interpolate(fem.Expression(to_ufl(case_spec["ic"]["value"], msh), V.element.interpolation_points))
    u_new = fem.Function(V)
    dirichlet, refresh_dirichlet = dirichlet_conditions(V, domain_spec, bc, t_new)

    half = 0.5 * dt
    a = fem.form(u * v * ufl.dx + half * kappa * ufl.inner(ufl.grad(u), ufl.grad(v)) * ufl.dx)
    L = fem.form(u_old * v * ufl.dx - half * kappa * ufl.inner(ufl.grad(u_old), ufl.grad(v)) * ufl.dx
                 + half * (f_new + f_old) * v * ufl.dx
                 + half * (neumann_term(v, domain_spec, bc, t_new) + neumann_term(v, domain_spec, bc, t_old)))
    A = assemble_matrix(a, bcs=dirichlet)
    A.assemble()
    ksp = linear_solver(A, "heat_", direct_solver_options())
    b = create_vector(V)

    reason = 1
    for step in range(1, steps + 1):
        t_old.value = t0 + (step - 1) * dt
        t_new.value = t0 + step * dt
        refresh_dirichlet()
        with b.localForm() as local:
            local.set(0.0)
        assemble_vector(b, L)
        apply_lifting(b, [a], [dirichlet])
        b.ghostUpdate(addv=PETSc.InsertMode.ADD, mode=PETSc.ScatterMode.REVERSE)
        set_bc(b, dirichlet)
        ksp.solve(b, u_new.x.petsc_vec)
        reason = min(reason, ksp.getConvergedReason())
        u_new.x.scatter_forward()
        u_old.x.array[:] = u_new.x.array

    axes, u_grid = sample_on_grid(u_new, case_spec["eval_grid"], h)
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(domain_size(domain_spec) / h), "element_degree": DEGREE,
        "num_dofs": V.dofmap.index_map.size_global, "num_time_steps": steps, "dt": dt,
        "time_scheme": "crank_nicolson", "ksp_type": "preonly", "pc_type": "lu",
        "converged": bool(reason > 0), "converged_reason": int(reason),
    })
