"""Firedrake oracle for the biharmonic equation lap(lap(u)) = f with u and lap(u) given on
the boundary (Navier / simply supported data). Ciarlet-Raviart splitting into two
Poisson problems, w = -lap(u) then u; P2 Lagrange, h = L/48, MUMPS LU."""

import time

import firedrake as fd
import ufl

from _fd_common import (calibrated_degree, check_bc_kinds, conditions, converged, Dirichlet, Domain, element_degree,
                        forcing_of, LU, sample_on_grid, to_ufl)
from _outputs import write_outputs

DEGREE = 2
CELLS_PER_LENGTH = 48
CELLS_PER_LENGTH_3D = 12


def solve(case_spec):
    started = time.perf_counter()
    pde, bc = case_spec["pde"], case_spec["bc"]
    if "laplacian" not in bc:
        raise ValueError("a biharmonic case needs lap(u) on the boundary (bc.laplacian)")
    check_bc_kinds(bc, ("laplacian",))
    domain = Domain(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D)
    V = fd.FunctionSpace(domain.mesh, "CG", calibrated_degree(DEGREE))
    u, v = fd.TrialFunction(V), fd.TestFunction(V)
    a = ufl.inner(ufl.grad(u), ufl.grad(v)) * ufl.dx
    minus_laplacian = {"dirichlet": [{"on": c["on"], "value": f"-({c['value']})"} for c in conditions(bc, "laplacian")]}
    w, uh = fd.Function(V), fd.Function(V)
    ok = True
    for target, rhs, data in ((w, to_ufl(forcing_of(pde), domain.mesh), minus_laplacian), (uh, w, bc)):
        solver = fd.LinearVariationalSolver(
            fd.LinearVariationalProblem(a, rhs * v * ufl.dx, target, bcs=Dirichlet(V, domain, data).bcs),
            solver_parameters=LU, options_prefix="biharmonic")
        solver.solve()
        ok = ok and converged(solver)
    axes, (u_grid,) = sample_on_grid([uh], case_spec["eval_grid"])
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(domain.size / domain.h), "element_degree": element_degree(V), "num_dofs": 2 * V.dim(),
        "method": "ciarlet_raviart_mixed", "ksp_type": "preonly", "pc_type": "lu", "converged": ok})
