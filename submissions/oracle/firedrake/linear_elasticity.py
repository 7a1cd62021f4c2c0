"""Firedrake oracle for linear elasticity: -div(sigma(u)) = f, sigma = 2 mu eps(u) +
lambda tr(eps(u)) I, Lame parameters from E and nu (plane strain) or given as mu and
lambda. Vector P2 Lagrange, h = L/40, MUMPS LU; parts without Dirichlet data are
traction free."""

import time

import firedrake as fd
import ufl

from _fd_common import (calibrated_degree, check_bc_kinds, converged, Dirichlet, Domain, element_degree, forcing_of,
                        LU, sample_on_grid, to_ufl)
from _materials import lame
from _outputs import vector_outputs, write_outputs

DEGREE = 2
CELLS_PER_LENGTH = 40
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    pde, bc = case_spec["pde"], case_spec.get("bc", {})
    check_bc_kinds(bc, ())
    domain = Domain(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D)
    V = fd.VectorFunctionSpace(domain.mesh, "CG", calibrated_degree(DEGREE))
    u, v = fd.TrialFunction(V), fd.TestFunction(V)
    mu, lmbda = lame(pde["params"])

    def sigma(w):
        strain = ufl.sym(ufl.grad(w))
        return 2 * mu * strain + lmbda * ufl.tr(strain) * ufl.Identity(domain.dim)

    forcing = forcing_of(pde) or [0.0] * domain.dim
    f = ufl.as_vector([to_ufl(c, domain.mesh) for c in forcing])
    uh = fd.Function(V)
    problem = fd.LinearVariationalProblem(ufl.inner(sigma(u), ufl.sym(ufl.grad(v))) * ufl.dx,
                                          ufl.dot(f, v) * ufl.dx, uh, bcs=Dirichlet(V, domain, bc, vector=True).bcs)
    solver = fd.LinearVariationalSolver(problem, solver_parameters=LU, options_prefix="elasticity")
    solver.solve()
    axes, (u_grid,) = sample_on_grid([uh], case_spec["eval_grid"])
    write_outputs(vector_outputs(case_spec, u_grid), axes, started, {
        "mesh_resolution": round(domain.size / domain.h), "element_degree": element_degree(V), "num_dofs": V.dim(),
        "ksp_type": "preonly", "pc_type": "lu", "converged": converged(solver)})
