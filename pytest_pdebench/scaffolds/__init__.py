"""Template-guided mode (``--pde-prompt=template``, paper Appendix M): a runnable solver
skeleton per library, generated from the agent view. It brings the input handling,
expression parsing, sampling on the grid and the output files; the numerics (mesh,
spaces, weak form, boundary and initial conditions, time stepping, solver settings) are
left to the model as TODOs."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
SUPPORTED = ("dolfinx", "firedrake", "dealii")
# Python tracks: the library's own part (imports, sampling), then the parts they share
PYTHON_PARTS = ("{library}_utilities.py", "ufl_utilities.py", "grid_utilities.py")
FUNCTION_KIND = {"dolfinx": "dolfinx Function", "firedrake": "Firedrake Function"}


def scaffold_for(view: dict) -> str:
    library = view["target_library"]
    if library not in SUPPORTED:
        raise ValueError(f"--pde-prompt=template has a scaffold for {', '.join(SUPPORTED)} only (not {library})")
    spec = view["case_spec"]
    pde = spec["pde"]
    transient = bool(pde.get("time"))
    if library == "dealii":
        return _cpp_scaffold(spec, transient)
    vector = pde["type"] in ("linear_elasticity", "stokes", "navier_stokes")
    utilities = "\n\n".join((HERE / part.format(library=library)).read_text().rstrip() for part in PYTHON_PARTS)
    lines = [
        f'"""Solver for the {pde["type"]} case: fill in the TODOs (mesh, spaces, weak form, boundary',
        'and initial conditions, solver); the input, sampling and output code is ready."""',
        "",
        utilities,
        "",
        "",
        "# ---- the numerics: yours ----",
        "",
        "def build_mesh(case_spec):",
        f'    """A mesh of the {spec["domain"]["type"]} domain (see case_spec["domain"])."""',
        '    raise NotImplementedError("TODO: build the mesh")',
        "",
        "",
        "def solve_problem(case_spec, msh):",
        f'    """The {"vector " if vector else ""}solution as a {FUNCTION_KIND[library]}'
        + (" at t_end" if transient else "") + ', and a dict of solver facts."""',
    ]
    if transient:
        lines += [
            '    t0, t_end = case_spec["pde"]["time"].get("t0", 0.0), case_spec["pde"]["time"]["t_end"]',
            "    # TODO: space, initial condition from case_spec['ic'], forms with t as a Constant,",
            "    # then step from t0 to t_end",
        ]
    lines += [
        '    raise NotImplementedError("TODO: spaces, forms, boundary conditions, solve")',
        "",
        "",
        "def solve(case_spec):",
        "    started = time.perf_counter()",
        "    msh = build_mesh(case_spec)",
        "    solution, solver_info = solve_problem(case_spec, msh)",
        "    arrays = output_arrays(case_spec, sample(solution, case_spec))",
        "    write_solution(case_spec, arrays, started, solver_info)",
    ]
    return "\n".join(lines) + "\n"


def _cpp_scaffold(spec: dict, transient: bool) -> str:
    text = (HERE / "dealii_scaffold.cpp").read_text()
    replacements = {
        "@DIM@": "3" if spec["eval_grid"].get("nz") else "2",
        "@FAMILY@": spec["pde"]["type"],
        "@DOMAIN@": spec["domain"]["type"],
        "@TRANSIENT@": " at t_end" if transient else "",
        "@TRANSIENT_TODO@": (", initial condition from spec[\"ic\"], time stepping from t0 to t_end"
                             if transient else ""),
    }
    for key, value in replacements.items():
        text = text.replace(key, value)
    return text
