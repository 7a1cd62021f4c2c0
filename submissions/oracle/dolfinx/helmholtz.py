"""DOLFINx oracle for Helmholtz: -lap(u) - k^2 u = f with Dirichlet and Neumann data.

P2 Lagrange with at least 12 nodes per wavelength (h <= 2 pi / (12 k), and L/48),
direct LU (MUMPS): the operator is indefinite, so no CG.
"""

import math
import time

import ufl
from dolfinx.fem.petsc import LinearProblem

from _oracle_common import (direct_solver_options, dirichlet_conditions, domain_size, forcing_of,
                            mesh_and_space, neumann_term, sample_on_grid, to_ufl, write_outputs)

DEGREE = 2
CELLS_PER_LENGTH = 48  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 12


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec.get("bc", {})
    k = float(pde["params"]["k"])
    size = domain_size(domain_spec)
    per_wavelength = math.ceil(12 * k * size / (2 * math.pi))  # at least 12 nodes per wavelength
    msh, V, h, size = mesh_and_space(case_spec, max(CELLS_PER_LENGTH, per_wavelength),
                                     max(CELLS_PER_LENGTH_3D, per_wavelength), DEGREE)
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    a = (ufl.inner(ufl.grad(u), ufl.grad(v)) - k ** 2 * u * v) * ufl.dx
    L = to_ufl(forcing_of(pde), msh) * v * ufl.dx + neumann_term(v, domain_spec, bc)
    bcs, _ = dirichlet_conditions(V, domain_spec, bc)
    problem = LinearProblem(a, L, bcs=bcs, petsc_options=direct_solver_options(), petsc_options_prefix="helmholtz_")
    uh = problem.solve()
    reason = problem.solver.getConvergedReason()
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], h)
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(size / h), "element_degree": DEGREE, "num_dofs": V.dofmap.index_map.size_global,
        "ksp_type": "preonly", "pc_type": "lu", "converged": bool(reason > 0), "converged_reason": int(reason),
    })
