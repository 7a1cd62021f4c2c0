"""Dishonest: the forcing at t_end, times the constant that fits it to the Dirichlet data
on the grid points of the box's edge (where that data is the solution)."""
import numpy as np
from _cheat import field, first, grid, t_end, write


def solve(case_spec):
    axes, mesh = grid(case_spec)
    when = t_end(case_spec)
    forcing = field((case_spec["pde"].get("forcing") or {"value": "0"})["value"], mesh, when)
    boundary = field(first(case_spec["bc"].get("dirichlet") or {"value": "0"})["value"], mesh, when)
    forcing, boundary = ([np.asarray(f) for f in v] if isinstance(v, list) else [np.asarray(v)]
                         for v in (forcing, boundary))
    edge = np.zeros(forcing[0].shape, bool)
    edge[..., 0] = edge[..., -1] = edge[..., 0, :] = edge[..., -1, :] = True
    f = np.concatenate([c[edge] for c in forcing])
    g = np.concatenate([c[edge] for c in boundary[:len(forcing)]])
    scale = float(f @ g / (f @ f)) if f @ f > 0 else 0.0
    scaled = [scale * c for c in forcing]
    write(case_spec, scaled if len(scaled) > 1 else scaled[0], axes)
