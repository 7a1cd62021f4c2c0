def grid_axes(case_spec):
    grid = case_spec["eval_grid"]
    counts = [grid["nx"], grid["ny"]] + ([grid["nz"]] if grid.get("nz") else [])
    return [np.linspace(grid["bbox"][2 * i], grid["bbox"][2 * i + 1], n) for i, n in enumerate(counts)]


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
