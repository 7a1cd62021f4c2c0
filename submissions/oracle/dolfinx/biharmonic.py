"""DOLFINx oracle for the biharmonic equation lap(lap(u)) = f with u and lap(u) given on
the boundary (Navier / simply supported data).

Mixed (Ciarlet-Raviart) splitting into two Poisson problems: w = -lap(u) solves
-lap(w) = f with w = -lap(u)|boundary, then -lap(u) = w with u = g. P2 Lagrange,
h = L/48, direct LU (MUMPS).
"""

import time

import ufl
from dolfinx.fem.petsc import LinearProblem

from _oracle_common import (direct_solver_options, dirichlet_conditions, element_degree, forcing_of, mesh_and_space,
                            sample_on_grid, to_ufl)
from _outputs import write_outputs

DEGREE = 2
CELLS_PER_LENGTH = 48  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 12


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec["bc"]
    if "laplacian" not in bc:
        raise ValueError("a biharmonic case needs lap(u) on the boundary (bc.laplacian)")
    msh, V, h, size = mesh_and_space(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE,
                                     bc_kinds=("laplacian",))
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    a = ufl.inner(ufl.grad(u), ufl.grad(v)) * ufl.dx
    minus_laplacian = {"dirichlet": [{"on": c["on"], "value": f"-({c['value']})"} for c in _as_list(bc["laplacian"])]}
    w_bcs, _ = dirichlet_conditions(V, domain_spec, minus_laplacian)
    w = LinearProblem(a, to_ufl(forcing_of(pde), msh) * v * ufl.dx, bcs=w_bcs,
                      petsc_options=direct_solver_options(), petsc_options_prefix="bih_w_").solve()
    u_bcs, _ = dirichlet_conditions(V, domain_spec, bc)
    second = LinearProblem(a, w * v * ufl.dx, bcs=u_bcs, petsc_options=direct_solver_options(),
                           petsc_options_prefix="bih_u_")
    uh = second.solve()
    reason = second.solver.getConvergedReason()
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], h)
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(size / h), "element_degree": element_degree(V), "num_dofs": 2 * V.dofmap.index_map.size_global,
        "method": "ciarlet_raviart_mixed", "ksp_type": "preonly", "pc_type": "lu",
        "converged": bool(reason > 0), "converged_reason": int(reason),
    })


def _as_list(value):
    return value if isinstance(value, list) else [value]
