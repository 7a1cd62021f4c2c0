# ---- provided by the harness's scaffold: input, expressions, grid sampling, output ----
import json
import time

import numpy as np
from mpi4py import MPI  # before dolfinx

import dolfinx
import dolfinx.fem.petsc  # noqa: F401  (LinearProblem, NonlinearProblem, assemble_*)
import ufl
from dolfinx import fem, geometry, mesh  # noqa: F401

UFL_NAMES = {"sin": ufl.sin, "cos": ufl.cos, "tan": ufl.tan, "exp": ufl.exp, "log": ufl.ln, "sqrt": ufl.sqrt,
             "sinh": ufl.sinh, "cosh": ufl.cosh, "tanh": ufl.tanh, "atan": ufl.atan, "atan2": ufl.atan2,
             "asin": ufl.asin, "acos": ufl.acos, "abs": abs, "Abs": abs, "pi": ufl.pi, "e": ufl.e}


def expression(text, msh, t=0.0, u=None):
    """A case_spec expression (string or number) as UFL on ``msh``; ``t`` may be a
    fem.Constant, ``u`` the unknown (for reaction terms)."""
    coordinates = ufl.SpatialCoordinate(msh)
    names = dict(UFL_NAMES, x=coordinates[0], y=coordinates[1], t=t, u=u)
    if msh.geometry.dim == 3:
        names["z"] = coordinates[2]
    return eval(str(text), {"__builtins__": {}}, names)  # the case's own data, in the sandbox


def grid_axes(case_spec):
    grid = case_spec["eval_grid"]
    counts = [grid["nx"], grid["ny"]] + ([grid["nz"]] if grid.get("nz") else [])
    return [np.linspace(grid["bbox"][2 * i], grid["bbox"][2 * i + 1], n) for i, n in enumerate(counts)]


def sample(function, case_spec):
    """Values of a dolfinx Function on the evaluation grid: shape (ny, nx) or (nz, ny, nx),
    plus a trailing component axis for vector functions; NaN where no cell holds the point."""
    axes = grid_axes(case_spec)
    shape = tuple(len(a) for a in reversed(axes))
    stacked = np.meshgrid(*reversed(axes), indexing="ij")
    points = np.zeros((stacked[0].size, 3))
    for i, coordinate in enumerate(reversed(stacked)):
        points[:, i] = coordinate.ravel()
    msh = function.function_space.mesh
    tree = geometry.bb_tree(msh, msh.topology.dim)
    colliding = geometry.compute_colliding_cells(msh, geometry.compute_collisions_points(tree, points), points)
    size = int(np.prod(function.ufl_shape)) if function.ufl_shape else 1
    values = np.full((len(points), size), np.nan)
    cells = np.array([colliding.links(i)[0] if len(colliding.links(i)) else -1 for i in range(len(points))],
                     dtype=np.int32)
    missing = np.flatnonzero(cells < 0)
    if len(missing):  # a mesh inscribed in a curved boundary misses points near it: nearest cell
        tdim = msh.topology.dim
        msh.topology.create_entities(tdim)
        midpoints = geometry.create_midpoint_tree(msh, tdim, np.arange(msh.topology.index_map(tdim).size_local,
                                                                        dtype=np.int32))
        nearest = geometry.compute_closest_entity(tree, midpoints, msh, points[missing])
        nodes = msh.geometry.x[msh.geometry.dofmaps[0][nearest]]
        gap = np.linalg.norm(nodes - points[missing][:, None, :], axis=2).min(axis=1)
        h = msh.h(tdim, nearest).max() if len(nearest) else 0.0
        close = gap <= 1.5 * h
        cells[missing[close]] = nearest[close]
    found = cells >= 0
    if found.any():
        values[found] = function.eval(points[found], cells[found]).reshape(-1, size)
    return values.reshape(shape + ((size,) if function.ufl_shape else ()))


def output_arrays(case_spec, values):
    """The arrays the case asks for, from sampled values (scalar, or vector with a last axis)."""
    output = case_spec["output"]
    names = output.get("components") or (["u"] if output.get("field", "scalar") == "scalar" else [output["field"]])
    arrays = {}
    for name in names:
        if values.ndim == len(grid_axes(case_spec)):
            arrays[name] = values
        elif name.endswith("_magnitude"):
            arrays[name] = np.linalg.norm(values, axis=-1)
        else:
            arrays[name] = values[..., "xyz".index(name[-1])]
    return arrays


def write_solution(case_spec, arrays, started, solver_info):
    axes = grid_axes(case_spec)
    np.savez("solution.npz", **arrays, **dict(zip("xyz", axes)))
    with open("meta.json", "w") as handle:
        json.dump({"wall_time_sec": time.perf_counter() - started, "status": "success",
                   "solver_info": solver_info}, handle)
