"""Taylor-Hood (P2-P1) pieces shared by the Firedrake Stokes oracle (and Navier-Stokes,
when the Firedrake track gains it)."""

import firedrake as fd
import ufl

from _fd_common import Dirichlet, Domain, check_bc_kinds, conditions, forcing_of, sample_on_grid, to_ufl
from _outputs import vector_outputs

CELLS_PER_LENGTH = 40
CELLS_PER_LENGTH_3D = 8
# MUMPS with null-pivot detection: the pressure constant is removed by the null space
LU_NULLSPACE = {"ksp_type": "preonly", "pc_type": "lu", "pc_factor_mat_solver_type": "mumps",
                "mat_mumps_icntl_24": 1}


class TaylorHood:
    def __init__(self, case_spec):
        self.case_spec = case_spec
        bc = case_spec.get("bc", {})
        check_bc_kinds(bc, ("periodic",))
        self.domain = Domain(case_spec, CELLS_PER_LENGTH, CELLS_PER_LENGTH_3D)
        mesh = self.domain.mesh
        self.W = fd.VectorFunctionSpace(mesh, "CG", 2) * fd.FunctionSpace(mesh, "CG", 1)
        self.bcs = Dirichlet(self.W.sub(0), self.domain, bc, vector=True).bcs
        self.closed = self._velocity_given_everywhere(bc)
        forcing = forcing_of(case_spec["pde"]) or [0.0] * self.domain.dim
        self.f = ufl.as_vector([to_ufl(c, mesh) for c in forcing])
        self.nu = float(case_spec["pde"]["params"]["nu"])

    def _velocity_given_everywhere(self, bc):
        """Then the pressure is fixed only up to a constant (the null space)."""
        given = [self.domain.ids(c["on"]) for c in conditions(bc, "dirichlet")]
        if "on_boundary" in given:
            return True
        exterior = set(self.domain.tags.get("boundary", [])) or {i for ids in self.domain.tags.values() for i in ids}
        if bc.get("periodic"):  # the identified sides are not boundary
            exterior -= {i for d in bc["periodic"]["directions"] for name in (f"{d}_min", f"{d}_max")
                         for i in self.domain.tags.get(name, [])}
        return exterior <= {i for ids in given for i in ids}

    def nullspace(self):
        if not self.closed:
            return None
        return fd.MixedVectorSpaceBasis(self.W, [self.W.sub(0), fd.VectorSpaceBasis(constant=True)])

    def stokes_forms(self):
        (u, p), (v, q) = fd.TrialFunctions(self.W), fd.TestFunctions(self.W)
        a = (self.nu * ufl.inner(ufl.grad(u), ufl.grad(v)) - p * ufl.div(v) - q * ufl.div(u)) * ufl.dx
        return a, ufl.dot(self.f, v) * ufl.dx

    def outputs(self, w):
        uh, ph = w.subfunctions
        axes, (u_grid, p_grid) = sample_on_grid([uh, ph], self.case_spec["eval_grid"])
        return axes, vector_outputs(self.case_spec, u_grid, p_grid)

    def info(self):
        return {"mesh_resolution": round(self.domain.size / self.domain.h), "element": "taylor_hood_p2_p1",
                "num_dofs": self.W.dim(), "pressure_null_space": self.closed}
