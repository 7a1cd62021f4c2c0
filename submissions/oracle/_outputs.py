"""The evaluation grid and the output files, shared by the oracles of every Python
library (pure numpy: the contract of the README's "Solver" section)."""

import json
import time

import numpy as np


def grid_axes(eval_grid):
    bbox = eval_grid["bbox"]
    counts = [eval_grid["nx"], eval_grid["ny"]] + ([eval_grid["nz"]] if "nz" in eval_grid else [])
    return [np.linspace(bbox[2 * i], bbox[2 * i + 1], n) for i, n in enumerate(counts)]


def grid_points(eval_grid):
    """(axes, points (N, dim) in row-major grid order, grid shape (ny, nx) or (nz, ny, nx))."""
    axes = grid_axes(eval_grid)
    shape = tuple(len(a) for a in reversed(axes))
    stacked = np.meshgrid(*reversed(axes), indexing="ij")
    return axes, np.column_stack([c.ravel() for c in reversed(stacked)]), shape


def requested_arrays(case_spec):
    """The array names the case asks for (see the output contract)."""
    output = case_spec.get("output", {})
    if output.get("components"):
        return list(output["components"])
    field = output.get("field", "scalar")
    return ["u"] if field == "scalar" else [field]


def vector_outputs(case_spec, vector_grid, pressure_grid=None):
    """Arrays for a vector solution: components ``*_x/_y/_z``, ``p``, or a magnitude."""
    arrays = {}
    for name in requested_arrays(case_spec):
        suffix = name.rpartition("_")[2]
        if name == "p" and pressure_grid is not None:
            arrays[name] = pressure_grid
        elif suffix in ("x", "y", "z") and name[:-2] in ("u", "velocity", "displacement"):
            arrays[name] = vector_grid[..., "xyz".index(suffix)]
        elif name.endswith("_magnitude") or name.endswith("_mag") or name == "u":
            arrays[name] = np.linalg.norm(vector_grid, axis=-1)
        else:
            raise ValueError(f"the oracle cannot produce output array {name!r}")
    return arrays


def write_outputs(fields, axes, started, solver_info):
    """solution.npz with the given arrays (or one scalar array u) and the axes, meta.json."""
    arrays = dict(fields) if isinstance(fields, dict) else {"u": fields}
    arrays.update(zip("xyz", axes))
    np.savez("solution.npz", **arrays)
    with open("meta.json", "w") as handle:
        json.dump({"wall_time_sec": time.perf_counter() - started, "status": "success",
                   "solver_info": solver_info}, handle)
