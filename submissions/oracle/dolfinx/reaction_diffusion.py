"""DOLFINx oracle for reaction-diffusion: u_t - eps lap(u) + R(u) = f, R from the case.

P2 Lagrange, h = L/40, Crank-Nicolson (dt <= 0.005) with a Newton solve per step
(PETSc SNES, MUMPS LU for the Jacobian); every step's convergence is checked.
"""

import time

import ufl

from _oracle_common import (domain_size, forcing_of, neumann_term, run_newton_steps, sample_on_grid,
                            scalar_transient_setup, to_ufl, write_outputs)

DEGREE = 2
CELLS_PER_LENGTH = 40  # mesh size h = L / CELLS_PER_LENGTH (2-D)
CELLS_PER_LENGTH_3D = 10


def solve(case_spec):
    started = time.perf_counter()
    s = scalar_transient_setup(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D, DEGREE)
    msh, uh, u_old, t_new, t_old, dt = s["msh"], s["uh"], s["u_old"], s["t_new"], s["t_old"], s["dt"]
    pde, domain_spec, bc = case_spec["pde"], case_spec["domain"], case_spec["bc"]
    v = ufl.TestFunction(s["V"])
    eps, reaction, forcing = float(pde["params"]["epsilon"]), pde["params"].get("reaction", 0.0), forcing_of(pde)
    F = ((uh - u_old) / dt * v + eps * ufl.inner(ufl.grad(0.5 * (uh + u_old)), ufl.grad(v))
         + 0.5 * (to_ufl(reaction, msh, u=uh) + to_ufl(reaction, msh, u=u_old)) * v
         - 0.5 * (to_ufl(forcing, msh, t_new) + to_ufl(forcing, msh, t_old)) * v) * ufl.dx
    F -= 0.5 * (neumann_term(v, domain_spec, bc, t_new) + neumann_term(v, domain_spec, bc, t_old))
    reason, newton = run_newton_steps(F, uh, u_old, s["dirichlet"], s["refresh"], t_old, t_new, s["t0"], dt,
                                      s["steps"], "rd_")
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], s["h"])
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(domain_size(domain_spec) / s["h"]), "element_degree": DEGREE,
        "num_dofs": s["V"].dofmap.index_map.size_global, "num_time_steps": s["steps"], "dt": dt,
        "time_scheme": "crank_nicolson", "newton_iterations": newton, "snes_type": "newtonls", "pc_type": "lu",
        "converged": bool(reason > 0), "converged_reason": int(reason),
    })
