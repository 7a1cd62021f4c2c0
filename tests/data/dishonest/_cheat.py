"""Shared by the dishonest solvers (test data for issue 11's validity ladder): each one
writes an answer without solving anything, from what the case shows the agent. None of
them may ever pass. Expressions are evaluated with numpy (test data only: a real
submission would not be trusted with eval either, it runs in the sandbox)."""

import json

import numpy as np

NAMES = {name: getattr(np, name) for name in ("sin", "cos", "tan", "exp", "sqrt", "sinh", "cosh", "tanh", "arctan")}
NAMES.update(log=np.log, atan=np.arctan, atan2=np.arctan2, asin=np.arcsin, acos=np.arccos, abs=np.abs, Abs=np.abs,
             pi=np.pi, e=np.e)


def grid(spec):
    g = spec["eval_grid"]
    counts = [g["nx"], g["ny"]] + ([g["nz"]] if "nz" in g else [])
    axes = [np.linspace(g["bbox"][2 * i], g["bbox"][2 * i + 1], n) for i, n in enumerate(counts)]
    mesh = np.meshgrid(*axes, indexing="xy" if len(axes) == 2 else "ij")
    if len(axes) == 3:  # arrays are (nz, ny, nx)
        mesh = [np.transpose(m, (2, 1, 0)) for m in mesh]
    return axes, mesh


def field(value, mesh, t):
    """One expression (or a list of them) on the grid."""
    if isinstance(value, list):
        return [field(v, mesh, t) for v in value]
    names = dict(NAMES, x=mesh[0], y=mesh[1], z=mesh[2] if len(mesh) > 2 else 0.0, t=t)
    return np.broadcast_to(np.asarray(eval(str(value), {"__builtins__": {}}, names), dtype=float),
                           mesh[0].shape).copy()


def first(condition):
    return condition[0] if isinstance(condition, list) else condition


def write(spec, values, axes):
    """values: a scalar field or a list of components; written as the output asks."""
    output = spec["output"]
    components = values if isinstance(values, list) else [values]
    names = output.get("components") or (["u"] if output.get("field", "scalar") == "scalar" else [output["field"]])
    arrays = {}
    for index, name in enumerate(names):
        if name.endswith("magnitude"):
            arrays[name] = np.sqrt(sum(c ** 2 for c in components))
        elif name[-2:] in ("_x", "_y", "_z"):
            arrays[name] = components["xyz".index(name[-1])] if len(components) > 1 else components[0]
        else:
            arrays[name] = components[min(index, len(components) - 1)]
    coordinates = dict(zip("xyz", axes))
    np.savez("solution.npz", **coordinates, **arrays)
    with open("meta.json", "w") as handle:
        json.dump({"wall_time_sec": 0.0, "status": "done", "solver_info": {"method": "none: a dishonest rung"}}, handle)


def t_end(spec):
    return (spec["pde"].get("time") or {}).get("t_end", 0.0)
