"""The evaluation grid of a case: axes, array shape and the valid-point mask.

Axes are ``numpy.linspace(lo, hi, n)`` over the grid's bbox, endpoints included.
Arrays are indexed ``u[ny, nx]`` in 2-D and ``u[nz, ny, nx]`` in 3-D, so row j of a
2-D array is the line y = y[j].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .domains import Geometry, resolve_geometry


@dataclass(frozen=True)
class EvalGrid:
    axes: tuple[np.ndarray, ...]  # (x, y[, z])

    @classmethod
    def from_spec(cls, eval_grid: dict) -> EvalGrid:
        bbox = [float(v) for v in eval_grid["bbox"]]
        counts = [int(eval_grid["nx"]), int(eval_grid["ny"])]
        if len(bbox) == 6:
            counts.append(int(eval_grid["nz"]))
        axes = tuple(np.linspace(bbox[2 * i], bbox[2 * i + 1], n) for i, n in enumerate(counts))
        return cls(axes)

    @property
    def dim(self) -> int:
        return len(self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        """Array shape: (ny, nx) or (nz, ny, nx)."""
        return tuple(len(a) for a in reversed(self.axes))

    @property
    def axis_names(self) -> tuple[str, ...]:
        return ("x", "y", "z")[: self.dim]

    def points(self) -> np.ndarray:
        """All grid points as (N, dim), in the C order of an array of ``shape``."""
        mesh = np.meshgrid(*reversed(self.axes), indexing="ij")  # z, y, x order
        return np.column_stack([m.ravel() for m in reversed(mesh)])


def valid_mask(case_spec: dict, grid: EvalGrid | None = None, geometry: Geometry | None = None) -> np.ndarray:
    """Boolean array of the grid's shape: True where the point lies in the domain."""
    grid = grid or EvalGrid.from_spec(case_spec["eval_grid"])
    geometry = geometry or resolve_geometry(case_spec["domain"])
    return geometry.mask(grid.points()).reshape(grid.shape)
