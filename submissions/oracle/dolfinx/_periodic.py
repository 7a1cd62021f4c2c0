"""Periodic boundary conditions for the DOLFINx oracle, without dolfinx_mpc (it has no
wheel for this DOLFINx).

On a rectangle whose opposite sides are identified, every degree of freedom on a "high"
side (x = x1, y = y1) is a copy of the one at the same place on the "low" side. With the
prolongation matrix P (full dofs x independent dofs, one 1 per row), a periodic
function is u = P u_r; the Galerkin system restricted to periodic test and trial
functions is (P^T A P) u_r = P^T b. Dirichlet dofs stay independent (they are pinned
anyway), so a side can be periodic in x and Dirichlet in y. Serial only, as the oracle.
"""

import numpy as np
from petsc4py import PETSc

AXES = {"x": 0, "y": 1, "z": 2}


class PeriodicMap:
    def __init__(self, V, domain_spec, directions, fixed_dofs=()):
        params = domain_spec.get("geometry_params", {})
        x0, x1, y0, y1 = params.get("bounds", (0, 1, 0, 1))
        low, high = np.array([x0, y0, 0.0]), np.array([x1, y1, 0.0])
        coords = V.tabulate_dof_coordinates()
        bs = V.dofmap.index_map_bs
        blocks = V.dofmap.index_map.size_local
        scale = float(np.max(high - low))
        tolerance = 1e-8 * scale
        master = np.arange(blocks)
        for direction in directions:
            axis = AXES[direction]
            period = high[axis] - low[axis]
            lookup = {self._key(c, tolerance): i for i, c in enumerate(coords[:blocks])}
            for slave in np.flatnonzero(np.isclose(coords[:blocks, axis], high[axis], atol=tolerance)):
                image = coords[slave].copy()
                image[axis] -= period
                partner = lookup.get(self._key(image, tolerance))
                if partner is None:
                    raise RuntimeError(f"no periodic partner for the dof at {coords[slave]}: the mesh is not "
                                       f"periodic in {direction}")
                master[slave] = partner
        fixed_blocks = np.unique(np.asarray(fixed_dofs, dtype=np.int64) // bs)
        master[fixed_blocks] = fixed_blocks  # pinned dofs stay their own
        for _ in range(len(directions)):  # corners: a copy of a copy
            master = master[master]
        independent = np.flatnonzero(master == np.arange(blocks))
        column_of_block = np.full(blocks, -1, dtype=np.int64)
        column_of_block[independent] = np.arange(len(independent))
        rows = blocks * bs
        columns = len(independent) * bs
        self.P = PETSc.Mat().createAIJ(((rows, rows), (columns, columns)), nnz=1, comm=PETSc.COMM_SELF)
        for block in range(blocks):
            for component in range(bs):
                self.P.setValue(block * bs + component, column_of_block[master[block]] * bs + component, 1.0)
        self.P.assemble()
        self.slaves = int(blocks - len(independent))

    @staticmethod
    def _key(point, tolerance):
        return tuple(np.round(np.asarray(point) / tolerance).astype(np.int64))

    def reduce_matrix(self, A):
        return A.PtAP(self.P)

    def reduce_vector(self, b):
        b_r = self.P.createVecRight()
        self.P.multTranspose(b, b_r)
        return b_r

    def new_reduced_vector(self):
        return self.P.createVecRight()

    def expand(self, x_r, x):
        self.P.mult(x_r, x)


def periodic_map(V, case_spec, dirichlet):
    """The case's PeriodicMap, or None when it declares no periodic directions."""
    periodic = case_spec.get("bc", {}).get("periodic")
    if not periodic:
        return None
    fixed = np.concatenate([bc.dof_indices()[0] for bc in dirichlet] or [np.zeros(0, dtype=np.int32)])
    return PeriodicMap(V, case_spec["domain"], periodic["directions"], fixed)
