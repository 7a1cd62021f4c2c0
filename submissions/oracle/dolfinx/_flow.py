"""Taylor-Hood (P2-P1) pieces shared by the Stokes and Navier-Stokes oracles."""

import basix.ufl
import ufl
from dolfinx import fem

from _calibration import discretization
from _oracle_common import (build_mesh, conditions, covers_whole_boundary, domain_size, pressure_pin, sample_on_grid,
                            vector_dirichlet_conditions, vector_forcing)
from _outputs import vector_outputs, write_outputs

CELLS_PER_LENGTH = 24  # mesh size h = L / CELLS_PER_LENGTH (2-D)
# at L/40 the Stokes anchor took up to 4.9 x its P2/11-27 baselines' time (an LU of 29k
# dofs), its error at most 0.04 x tau_acc; references are built from L/40
REFERENCE_CELLS_PER_LENGTH = 40
CELLS_PER_LENGTH_3D = 12  # at L/8 the 3-D Stokes error was 4.5-5.5e-3, near tau_acc of the P2/16 baselines


class TaylorHood:
    def __init__(self, case_spec, cells_per_length=None):
        self.case_spec = case_spec
        domain_spec, bc = case_spec["domain"], case_spec.get("bc", {})
        self.dim = 3 if "nz" in case_spec["eval_grid"] else 2
        self.size = domain_size(domain_spec)
        # read at call time, so that a reference build's level reaches it
        _, cells = discretization(2, CELLS_PER_LENGTH_3D if self.dim == 3 else cells_per_length or CELLS_PER_LENGTH)
        self.h = self.size / cells  # the element stays Taylor-Hood in calibration runs
        self.msh = build_mesh(domain_spec, self.h)
        cell = self.msh.basix_cell()
        element = basix.ufl.mixed_element([basix.ufl.element("Lagrange", cell, 2, shape=(self.dim,)),
                                           basix.ufl.element("Lagrange", cell, 1)])
        self.W = fem.functionspace(self.msh, element)
        self.bcs = vector_dirichlet_conditions(self.W, self.W.sub(0), domain_spec, bc)
        self.pinned = covers_whole_boundary(self.msh, domain_spec, conditions(bc, "dirichlet"))
        if self.pinned:
            self.bcs.append(pressure_pin(self.W, self.msh))
        self.f = vector_forcing(case_spec["pde"], self.msh)
        self.nu = float(case_spec["pde"]["params"]["nu"])

    def stokes_forms(self):
        (u, p), (v, q) = ufl.TrialFunctions(self.W), ufl.TestFunctions(self.W)
        a = (self.nu * ufl.inner(ufl.grad(u), ufl.grad(v)) - p * ufl.div(v) - q * ufl.div(u)) * ufl.dx
        return a, ufl.dot(self.f, v) * ufl.dx

    def write(self, w, started, info):
        uh, ph = w.sub(0).collapse(), w.sub(1).collapse()
        axes, u_grid = sample_on_grid(uh, self.case_spec["eval_grid"], self.h)
        _, p_grid = sample_on_grid(ph, self.case_spec["eval_grid"], self.h)
        write_outputs(vector_outputs(self.case_spec, u_grid, p_grid), axes, started, {
            "mesh_resolution": round(self.size / self.h), "element": "taylor_hood_p2_p1",
            "num_dofs": self.W.dofmap.index_map.size_global * self.W.dofmap.index_map_bs,
            "pressure_pinned": self.pinned, **info})
