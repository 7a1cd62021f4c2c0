"""Firedrake oracle for Poisson: -div(kappa grad u) = f with Dirichlet, Neumann, Robin or
periodic data. P2 Lagrange, h = L/48 (2-D) or L/12 (3-D), MUMPS LU."""

import time

import firedrake as fd
import ufl

from _fd_common import (calibrated_degree, check_bc_kinds, converged, Dirichlet, Domain, element_degree, LU,
                        natural_term, sample_on_grid, to_ufl)
from _outputs import write_outputs

DEGREE = 2
CELLS_PER_LENGTH = 48
CELLS_PER_LENGTH_3D = 12


def solve(case_spec):
    started = time.perf_counter()
    pde, bc = case_spec["pde"], case_spec.get("bc", {})
    check_bc_kinds(bc, ("neumann", "robin", "periodic"))
    domain = Domain(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D)
    V = fd.FunctionSpace(domain.mesh, "CG", calibrated_degree(DEGREE))
    u, v = fd.TrialFunction(V), fd.TestFunction(V)
    kappa = to_ufl(pde.get("params", {}).get("kappa", 1.0), domain.mesh)
    f = to_ufl(pde.get("forcing", {}).get("value", 0.0), domain.mesh)
    a, L = ufl.system((kappa * ufl.inner(ufl.grad(u), ufl.grad(v)) - f * v) * ufl.dx
                      - natural_term(u, v, domain, bc))
    uh = fd.Function(V)
    problem = fd.LinearVariationalProblem(a, L, uh, bcs=Dirichlet(V, domain, bc).bcs)
    solver = fd.LinearVariationalSolver(problem, solver_parameters=LU, options_prefix="poisson")
    solver.solve()
    axes, (u_grid,) = sample_on_grid([uh], case_spec["eval_grid"])
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(domain.size / domain.h), "element_degree": element_degree(V), "num_dofs": V.dim(),
        "ksp_type": "preonly", "pc_type": "lu", "converged": converged(solver),
    })
