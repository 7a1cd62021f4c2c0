"""DOLFINx oracle for Helmholtz: -lap(u) - k^2 u = f with Dirichlet, Neumann, Robin or
periodic data.

P2 Lagrange with at least 12 cells per wavelength in 2-D (h <= 2 pi / (12 k), and L/48),
15 in 3-D (and L/12, at most L/24),
direct LU (MUMPS): the operator is indefinite, so no CG.
"""

import math
import time

import ufl
from _oracle_common import (dirichlet_conditions, domain_size, element_degree, forcing_of, mesh_and_space,
                            natural_term, sample_on_grid, SCALAR_BC_KINDS, solve_linear, to_ufl)
from _outputs import write_outputs
from _periodic import periodic_map

DEGREE = 2
CELLS_PER_LENGTH = 48  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 12
# references (build/refinement.py): at 12 the oracle was 1.0e-3 from its level 2 at k = 5
# round a sharp Gaussian source, above 0.1 x tau_max; levels 8, 16, 24 (the cap)
REFERENCE_CELLS_PER_LENGTH_3D = 16
MAX_CELLS_PER_LENGTH_3D = 24  # P2 on 24^3 cells: ~120k dofs, an LU of about 20 s here
CELLS_PER_WAVELENGTH = 12  # graded with the level too, so a reference's coarse level is coarser
CELLS_PER_WAVELENGTH_3D = 15


def solve(case_spec):
    started = time.perf_counter()
    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec.get("bc", {})
    k = float(pde["params"]["k"])
    size = domain_size(domain_spec)
    wavelengths = k * size / (2 * math.pi)
    # 12 P2 cells per wavelength in 2-D; 15 in 3-D up to L/24, where a 3-D LU of more
    # would not fit (k = 20 at 2-D density: 493k dofs, MUMPS ran out of memory). At 6 per
    # wavelength (L/12 for k = 10) the error was 1.2e-2, above any tau_acc the cap allows.
    cells_3d = min(MAX_CELLS_PER_LENGTH_3D, max(CELLS_PER_LENGTH_3D, math.ceil(CELLS_PER_WAVELENGTH_3D * wavelengths)))
    msh, V, h, size = mesh_and_space(case_spec, max(CELLS_PER_LENGTH, math.ceil(CELLS_PER_WAVELENGTH * wavelengths)),
                                     cells_3d, DEGREE,
                                     bc_kinds=SCALAR_BC_KINDS)
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    a, L = ufl.system((ufl.inner(ufl.grad(u), ufl.grad(v)) - k ** 2 * u * v - to_ufl(forcing_of(pde), msh) * v)
                      * ufl.dx - natural_term(u, v, domain_spec, bc))
    bcs, _ = dirichlet_conditions(V, domain_spec, bc)
    uh, reason = solve_linear(a, L, bcs, V, "helmholtz_", periodic_map(V, case_spec, bcs))
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], h)
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(size / h), "element_degree": element_degree(V), "num_dofs": V.dofmap.index_map.size_global,
        "ksp_type": "preonly", "pc_type": "lu", "converged": bool(reason > 0), "converged_reason": int(reason),
    })
