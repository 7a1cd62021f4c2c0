"""DOLFINx oracle for linear elasticity: -div(sigma(u)) = f, sigma = 2 mu eps(u) + lambda tr(eps(u)) I,
Lame parameters from E and nu (plane strain) or given as mu and lambda.

Vector P2 Lagrange (robust enough for nu up to about 0.49), h = L/40, direct LU (MUMPS).
Parts of the boundary without Dirichlet data are traction free.
"""

import time

import ufl
from dolfinx.fem.petsc import LinearProblem

from _oracle_common import (direct_solver_options, element_degree, mesh_and_space, sample_on_grid,
                            vector_dirichlet_conditions, vector_forcing)
from _materials import lame
from _outputs import vector_outputs, write_outputs

DEGREE = 2
CELLS_PER_LENGTH = 40  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec.get("bc", {})
    msh, V, h, size = mesh_and_space(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE, vector=True)
    dim = msh.geometry.dim
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    mu, lmbda = lame(pde["params"])

    def sigma(w):
        strain = ufl.sym(ufl.grad(w))
        return 2 * mu * strain + lmbda * ufl.tr(strain) * ufl.Identity(dim)

    a = ufl.inner(sigma(u), ufl.sym(ufl.grad(v))) * ufl.dx
    L = ufl.dot(vector_forcing(pde, msh), v) * ufl.dx
    bcs = vector_dirichlet_conditions(V, None, domain_spec, bc)
    problem = LinearProblem(a, L, bcs=bcs, petsc_options=direct_solver_options(), petsc_options_prefix="elast_")
    uh = problem.solve()
    reason = problem.solver.getConvergedReason()
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], h)
    write_outputs(vector_outputs(case_spec, u_grid), axes, started, {
        "mesh_resolution": round(size / h), "element_degree": element_degree(V), "num_dofs": V.dofmap.index_map.size_global * dim,
        "ksp_type": "preonly", "pc_type": "lu", "converged": bool(reason > 0), "converged_reason": int(reason),
    })
