"""DOLFINx oracle for Poisson: -div(kappa grad u) = f with Dirichlet, Neumann, Robin or
periodic data.

P2 Lagrange on a mesh of size h = L/48 (2-D) or L/12 (3-D), direct LU (MUMPS).
"""

import time

import ufl
from _oracle_common import (dirichlet_conditions, element_degree, forcing_of, mesh_and_space, natural_term,
                            sample_on_grid, SCALAR_BC_KINDS, solve_linear, to_ufl)
from _outputs import write_outputs
from _periodic import periodic_map

DEGREE = 2
CELLS_PER_LENGTH = 48  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 12


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec.get("bc", {})
    msh, V, h, size = mesh_and_space(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE,
                                     bc_kinds=SCALAR_BC_KINDS)
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    kappa = to_ufl(pde.get("params", {}).get("kappa", 1.0), msh)
    f = to_ufl(forcing_of(pde), msh)
    a, L = ufl.system((kappa * ufl.inner(ufl.grad(u), ufl.grad(v)) - f * v) * ufl.dx
                      - natural_term(u, v, domain_spec, bc))
    bcs, _ = dirichlet_conditions(V, domain_spec, bc)
    uh, reason = solve_linear(a, L, bcs, V, "poisson_", periodic_map(V, case_spec, bcs))
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], h)
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(size / h), "element_degree": element_degree(V),
        "num_dofs": V.dofmap.index_map.size_global, "ksp_type": "preonly", "pc_type": "lu",
        "converged": bool(reason > 0), "converged_reason": int(reason),
    })
