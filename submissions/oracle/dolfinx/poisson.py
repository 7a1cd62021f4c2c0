"""DOLFINx oracle for Poisson: -div(kappa grad u) = f with Dirichlet and Neumann data.

P2 Lagrange on a mesh of size h = L/48 (2-D) or L/12 (3-D), direct LU (MUMPS).
"""

import time

import ufl
from dolfinx.fem.petsc import LinearProblem

from _oracle_common import (direct_solver_options, dirichlet_conditions, forcing_of, mesh_and_space,
                            neumann_term, sample_on_grid, to_ufl, write_outputs)

DEGREE = 2
CELLS_PER_LENGTH = 48  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 12


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec.get("bc", {})
    msh, V, h, size = mesh_and_space(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE)
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    kappa = to_ufl(pde.get("params", {}).get("kappa", 1.0), msh)
    f = to_ufl(forcing_of(pde), msh)
    a = kappa * ufl.inner(ufl.grad(u), ufl.grad(v)) * ufl.dx
    L = f * v * ufl.dx + neumann_term(v, domain_spec, bc)
    bcs, _ = dirichlet_conditions(V, domain_spec, bc)

    problem = LinearProblem(a, L, bcs=bcs, petsc_options=direct_solver_options(), petsc_options_prefix="oracle_")
    uh = problem.solve()
    reason = problem.solver.getConvergedReason()
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], h)
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(size / h), "element_degree": DEGREE,
        "num_dofs": V.dofmap.index_map.size_global, "ksp_type": "preonly", "pc_type": "lu",
        "converged": bool(reason > 0), "converged_reason": int(reason),
    })
