"""DOLFINx oracle for Poisson: -div(kappa grad u) = f with Dirichlet and Neumann data.

P2 Lagrange on a mesh of size h = L/48 (2-D) or L/12 (3-D), direct LU (MUMPS).
"""

import time

import numpy as np
import ufl
from dolfinx import fem, mesh
from dolfinx.fem.petsc import LinearProblem

from _oracle_common import (boundary_facets, build_mesh, direct_solver_options, domain_size, sample_on_grid,
                            to_ufl, write_outputs)

DEGREE = 2


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec.get("bc", {})
    dim = 3 if "nz" in case_spec["eval_grid"] else 2
    h = domain_size(domain_spec) / (12 if dim == 3 else 48)
    msh = build_mesh(domain_spec, h)
    V = fem.functionspace(msh, ("Lagrange", DEGREE))
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    kappa = to_ufl(pde.get("params", {}).get("kappa", 1.0), msh)
    f = to_ufl(pde["forcing"]["value"], msh)
    a = kappa * ufl.inner(ufl.grad(u), ufl.grad(v)) * ufl.dx
    L = f * v * ufl.dx

    if "neumann" in bc:
        facets = boundary_facets(msh, domain_spec, bc["neumann"]["on"])
        tags = mesh.meshtags(msh, msh.topology.dim - 1, facets, np.full(len(facets), 1, dtype=np.int32))
        ds = ufl.Measure("ds", domain=msh, subdomain_data=tags)
        L += to_ufl(bc["neumann"]["value"], msh) * v * ds(1)
    bcs = []
    if "dirichlet" in bc:
        facets = boundary_facets(msh, domain_spec, bc["dirichlet"]["on"])
        u_d = fem.Function(V)
        u_d.interpolate(fem.Expression(to_ufl(bc["dirichlet"]["value"], msh), V.element.interpolation_points))
        bcs.append(fem.dirichletbc(u_d, fem.locate_dofs_topological(V, msh.topology.dim - 1, facets)))

    problem = LinearProblem(a, L, bcs=bcs, petsc_options=direct_solver_options(), petsc_options_prefix="oracle_")
    uh = problem.solve()
    reason = problem.solver.getConvergedReason()
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], h)
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(domain_size(domain_spec) / h), "element_degree": DEGREE,
        "num_dofs": V.dofmap.index_map.size_global, "ksp_type": "preonly", "pc_type": "lu",
        "converged": bool(reason > 0), "converged_reason": int(reason),
    })
