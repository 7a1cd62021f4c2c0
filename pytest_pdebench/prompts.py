"""Prompts for LLM solver generation (paper, Appendix L), written from the agent view.

Every builder takes the agent view (``cases.agent_view``: case_spec and target library)
and never a record, so evaluator-only data (exact solutions, references, thresholds,
calibration) cannot reach a prompt; a test plants markers in those fields of every
suite record and looks for them in every prompt. Prompts are deterministic: no
timestamps, paths or machine facts, JSON with sorted keys.

Single-shot prompt, in this order: (1) task summary, (2) the family's equation and what
makes it hard, (3) the case_spec block, (4) the implementation contract of the library,
(5) output and sandbox rules, (6) the library guide from ``guides/``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from .cases import CaseRecord, agent_view
from .vocabulary import EQUATIONS

LIBRARY_TITLES = {"dolfinx": "DOLFINx 0.11", "firedrake": "Firedrake 2026.10", "dealii": "deal.II 9.4"}
GUIDE_FILES = {"dolfinx": "DOLFINX_GUIDE.md", "firedrake": "FIREDRAKE_GUIDE.md", "dealii": "DEALII_GUIDE.md"}
CODE_EXCERPT_CHARS = 2000
STDERR_EXCERPT_CHARS = 1500

FAMILY_TITLES = {
    "poisson": "Poisson equation",
    "heat": "heat equation",
    "helmholtz": "Helmholtz equation",
    "biharmonic": "biharmonic equation",
    "convection_diffusion": "convection-diffusion equation",
    "reaction_diffusion": "reaction-diffusion equation",
    "burgers": "viscous Burgers equation",
    "wave": "wave equation",
    "linear_elasticity": "linear elasticity system",
    "stokes": "Stokes system",
    "navier_stokes": "incompressible Navier-Stokes system",
}
# what a solver writer has to watch for, per family (our words)
HAZARDS = {
    "poisson": "An elliptic boundary-value problem: treat variable coefficients and every boundary part as given.",
    "heat": "Parabolic: you choose the space discretization and the time stepping; the answer is the field at t_end.",
    "helmholtz": "Indefinite and oscillatory: resolve the wavelength 2*pi/k, and iterative solvers may stall.",
    "biharmonic": "Fourth order: plain C0 Lagrange elements need a mixed or interior-penalty formulation; "
    "bc.laplacian gives the second boundary condition.",
    "convection_diffusion": "When |beta| h / epsilon is large, plain Galerkin oscillates: layers need "
    "stabilization or resolution.",
    "reaction_diffusion": "R(u) may be nonlinear or stiff: linearize (Newton or similar) and step stably.",
    "burgers": "Nonlinear transport with small viscosity: steep fronts, needs a nonlinear solve each step.",
    "wave": "Second order in time, hyperbolic: the time scheme must not damp or disperse the wave much.",
    "linear_elasticity": "A vector elliptic system; near nu = 0.5 low-order displacement elements lock.",
    "stokes": "A saddle-point system: use an inf-sup stable velocity-pressure pair; with velocity data on the "
    "whole boundary the pressure is fixed only up to a constant.",
    "navier_stokes": "Nonlinear saddle-point system: a stable pair plus a nonlinear iteration (Newton or Picard).",
}


def readable_json(value, indent: int = 0) -> str:
    """JSON with sorted keys, objects indented, lists of plain values on one line."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {readable_json(v, indent + 1)}" for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        return "[\n" + ",\n".join(inner + readable_json(v, indent + 1) for v in value) + f"\n{pad}]"
    return json.dumps(value)


def _bc_kinds(case_spec: dict) -> list[str]:
    bc = case_spec.get("bc", {})
    kinds = [kind for kind in ("dirichlet", "neumann", "robin", "periodic") if bc.get(kind)]
    return kinds or ["no"]


def task_summary(view: dict) -> str:
    spec, library = view["case_spec"], view["target_library"]
    pde = spec["pde"]
    regime = "time-dependent" if pde.get("time") else "steady"
    coefficients = [
        name
        for name, value in pde.get("params", {}).items()
        if isinstance(value, str) and any(symbol in value for symbol in ("x", "y", "z"))
    ]
    variable = f" with spatially varying {', '.join(coefficients)}" if coefficients else ""
    dim = "3-D" if spec["eval_grid"].get("nz") else "2-D"
    kinds = " and ".join(_bc_kinds(spec))
    return (
        f"Solve a {regime} {FAMILY_TITLES[pde['type']]}{variable} on a {dim} {spec['domain']['type']} domain "
        f"with {kinds} boundary conditions, using {LIBRARY_TITLES[library]}. Write the numerical solution on the "
        f"evaluation grid described below."
    )


def _python_contract(view: dict, arrays: list[str]) -> str:
    dim = 3 if view["case_spec"]["eval_grid"].get("nz") else 2
    shape = "(nz, ny, nx)" if dim == 3 else "(ny, nx)"
    axes = "x, y, z" if dim == 3 else "x, y"
    return f"""Write one Python module that defines

```python
def solve(case_spec: dict) -> None:
    ...
```

The harness imports your module and calls `solve` with the case_spec above (as a dict)
in a working directory that also holds `case_spec.json`. `solve` writes, in that
directory:

- `solution.npz` with the arrays {", ".join(f"`{a}`" for a in arrays)}, each of shape {shape},
  plus the axes {axes} as 1-D arrays, `x = numpy.linspace(bbox[0], bbox[1], nx)` and so on.
  Entry `[j, i]` is the value at `(x[i], y[j])`{" (`[k, j, i]` at `(x[i], y[j], z[k])`)" if dim == 3 else ""}.
  Time-dependent problems: the field at `t_end`.
- `meta.json` with `wall_time_sec` (number), `status` (string) and, if you like,
  `solver_info` (an object: mesh resolution, element degree, solver, iterations...)."""


def _cpp_contract(view: dict, arrays: list[str]) -> str:
    dim = 3 if view["case_spec"]["eval_grid"].get("nz") else 2
    shape = "(nz, ny, nx)" if dim == 3 else "(ny, nx)"
    index = (
        "`[k, j, i]` is the value at `(x[i], y[j], z[k])`" if dim == 3 else "`[j, i]` is the value at `(x[i], y[j])`"
    )
    single = len(arrays) == 1
    files = (
        f"`solution_grid.bin` (the array `{arrays[0]}`)"
        if single
        else "one `<name>.bin` per array, " + ", ".join(f"`{a}.bin`" for a in arrays)
    )
    return f"""Write one C++17 program: a single source file with `int main(int argc, char **argv)`.
The harness compiles it once against deal.II 9.4.1 (Release flags; compile time is not
part of the timed run) and runs it as

    solver case_spec.json OUTDIR

`case_spec.json` holds a JSON object whose `"case_spec"` member is the specification
above (`nlohmann/json.hpp` is available to read it). The program writes into OUTDIR:

- {files}: the solution on the evaluation grid as raw float64 values (little-endian)
  in row-major order of shape {shape}, so that entry {index}, with
  `x[i] = bbox[0] + i (bbox[1] - bbox[0]) / (nx - 1)` and likewise for the other axes;
- `meta.json` with `wall_time_sec` (number), `status` (string) and, if you like,
  `solver_info` (an object: mesh resolution, element degree, solver, iterations...).

A `solution.npz` with the same arrays and the axes is accepted instead of the binary
files. The `gmsh` executable is installed if you want to mesh a shape with it."""


def _rules(view: dict, timeout_sec: float) -> str:
    return f"""- The program runs in a sandbox: no network, no files but its working directory,
  a hard wall-clock limit of {timeout_sec:g} s for the whole run. Use only the target
  library and what it ships with (numpy, mpi4py, petsc4py for the Python tracks).
- Grid points outside the domain are ignored (write NaN there); every point inside the
  domain or on its boundary must hold a finite value. Arrays of another shape are not
  resampled: they fail.
- The evaluation is staged: the program must run and write valid files; then its
  relative L2 error on the grid must be within a hidden accuracy threshold; then its
  run time must be within a hidden time budget. Thresholds are not disclosed."""


def _guide(library: str, guides_dir: Path | None) -> str:
    """The library guide (it starts with its own top heading), or a note that there is none."""
    path = Path(guides_dir) / GUIDE_FILES[library] if guides_dir else None
    if path and path.is_file():
        return path.read_text(encoding="utf-8").strip()
    return f"# {LIBRARY_TITLES[library]} guide\n\n(No API guide for this library is bundled yet.)"


MODEL_ANSWER = "Answer with the complete program in one fenced code block."


def agent_answer(library: str) -> str:
    """The last section of an agent's task, in place of MODEL_ANSWER."""
    solver = "solver.cpp" if library == "dealii" else "solver.py"
    helpers = "`_*.h`" if library == "dealii" else "`_*.py`"
    trial = (
        "compile it with the deal.II headers and libraries installed here and run it as described above"
        if library == "dealii"
        else "run it with `python3 -c \"import json, solver; solver.solve(json.load(open('case_spec.json'))"
        "['case_spec'])\"`, say"
    )
    return f"""# Working as an agent

You work in a folder holding this task (`TASK.md`) and the case data the evaluator will
give your program (`case_spec.json`). You may create files and run commands there; the
target library is installed, the network is not reachable. You may try your program
({trial}); nothing tells you the hidden thresholds. When you are done, leave the complete
program in `{solver}` in this folder (with any helper files it includes, named {helpers}):
the evaluator then runs that file alone, in a fresh sandbox, as described above, on this
case with an evaluation grid of its own: the grid here is for trials, so read `nx`, `ny`
(and `nz`) from the case specification at run time."""


def agent_feedback_task(attempt: int, feedback: dict, library: str) -> str:
    """An agent's next task after a failed attempt: what happened, on the same folder."""
    solver = "solver.cpp" if library == "dealii" else "solver.py"
    rule = "=" * 70
    lines = [
        rule,
        f"ATTEMPT {attempt}: THE EVALUATOR'S VERDICT ON `{solver}`",
        rule,
        "",
        *_what_happened(feedback),
        "",
        f"Fix `{solver}` in this folder (the task is unchanged, in `TASK.md`), then leave it there as before.",
    ]
    return "\n".join(lines) + "\n"


def single_shot_prompt(
    view: dict, timeout_sec: float, guides_dir: Path | None, scaffold: str | None = None, answer: str = MODEL_ANSWER
) -> str:
    spec, library = view["case_spec"], view["target_library"]
    family = spec["pde"]["type"]
    arrays = _arrays(spec)
    contract = _cpp_contract(view, arrays) if library == "dealii" else _python_contract(view, arrays)
    parts = [
        "# Task\n\n" + task_summary(view),
        f"# Equation: {FAMILY_TITLES[family]}\n\n    {EQUATIONS[family]}\n\n{HAZARDS[family]} The case data below "
        "gives the coefficients, forcing, boundary and initial data; the meaning of each parameter is that of the "
        "equation above.",
        "# Case specification (authoritative)\n\n```json\n" + readable_json(spec) + "\n```",
        "# What to write\n\n" + contract,
    ]
    if scaffold is not None:
        parts.append(
            "# Starting point\n\nComplete this program: keep its structure, input handling and output "
            "writing, and fill in the numerics (mesh, spaces, weak form, boundary and initial conditions, "
            "time stepping, solver settings) where marked TODO.\n\n"
            f"```{'cpp' if library == 'dealii' else 'python'}\n{scaffold.rstrip()}\n```"
        )
    parts += [
        "# Rules\n\n" + _rules(view, timeout_sec),
        _guide(library, guides_dir),
        answer,
    ]
    return "\n\n".join(parts) + "\n"


def item_prompts(
    records: Iterable[CaseRecord], guides_dir: Path | None, libraries: list[str] | None = None
) -> Iterator[tuple[str, str]]:
    """(library, single-shot prompt) of every item of ``records`` (each record with each
    library it supports; only ``libraries`` when given), each prompt built from the item's
    agent view alone, as a model gets it (`pdebench prompt-cost` counts their tokens)."""
    for record in records:
        for library in record.supported_libraries:
            if libraries and library not in libraries:
                continue
            yield (
                library,
                single_shot_prompt(agent_view(record, library), record.evaluation_config.timeout_sec, guides_dir),
            )


def _arrays(spec: dict) -> list[str]:
    output = spec["output"]
    if output.get("components"):
        return list(output["components"])
    return ["u"] if output.get("field", "scalar") == "scalar" else [output["field"]]


GENERIC_HINTS = {
    "F-Exec": "Check: syntax and imports, the entry point's name and signature, the library's API for the "
    "installed version, the output file names, array names and shapes, NaN or inf inside the domain.",
    "F-Acc": "Check: the weak form and its signs, every boundary condition and its type, coefficients, the time "
    "stepping up to t_end, nonlinear convergence, mesh resolution, and how the solution is evaluated on "
    "the grid.",
    "F-Time": "Check: repeated assembly or form compilation inside loops, the linear solver and preconditioner, "
    "needlessly fine meshes or tolerances, needless output.",
}


def feedback_prompt(attempt: int, previous_code: str | None, feedback: dict, base_prompt: str) -> str:
    """The repair prompt for ``attempt`` (2, 3, ...): header, the previous code (excerpt),
    what failed first, then the whole original prompt. ``feedback`` holds only facts of the
    previous attempt: outcome, reason, stderr tail, its error or wall time."""
    rule = "=" * 70
    lines = [
        rule,
        f"ATTEMPT {attempt}: FEEDBACK ON THE PREVIOUS ATTEMPT",
        rule,
        "Your previous program did not pass. Fix it using what follows, then answer with the whole corrected program.",
        "",
    ]
    if previous_code:
        excerpt = previous_code[:CODE_EXCERPT_CHARS]
        cut = len(previous_code) - len(excerpt)
        lines += [
            "## Your previous program" + (f" (first {CODE_EXCERPT_CHARS} characters; {cut} more cut)" if cut else ""),
            "",
            "```",
            excerpt.rstrip(),
            "```",
            "",
        ]
    else:
        lines += ["## Your previous answer", "", "It contained no fenced code block.", ""]
    lines += _what_happened(feedback)
    lines += ["", rule, "THE TASK (unchanged)", rule, ""]
    return "\n".join(lines) + base_prompt


def _what_happened(feedback: dict) -> list[str]:
    """The facts of a failed attempt and the checklist for its kind of failure."""
    outcome = feedback["outcome"]
    lines = ["## What happened", ""]
    if outcome == "F-Exec":
        lines.append(f"It failed to run or to write valid output: {feedback.get('reason', '')}")
        if feedback.get("stderr_tail"):
            lines += ["", "Last lines of its standard error:", "", "```", feedback["stderr_tail"].rstrip(), "```"]
    elif outcome == "F-Acc":
        lines.append(
            f"It ran and wrote valid output, but missed the accuracy threshold: relative L2 error "
            f"{feedback['error']:.3e} on the grid."
        )
    elif outcome == "F-Time":
        lines.append(f"It ran and was accurate enough, but too slow: {feedback['wall_time']:.2f} s.")
    return lines + ["", GENERIC_HINTS[outcome]]


def feedback_of(verdict: dict, stderr: str = "") -> dict:
    """The facts of a failed attempt that may go back to the model: never thresholds,
    baselines or references."""
    facts = {"outcome": verdict["outcome"], "reason": verdict.get("reason", "")}
    if verdict["outcome"] == "F-Exec" and stderr.strip():
        facts["stderr_tail"] = stderr.strip()[-STDERR_EXCERPT_CHARS:]
    if verdict["outcome"] == "F-Acc":
        facts["error"] = verdict["error"]
        facts["reason"] = ""
    if verdict["outcome"] == "F-Time":
        facts["wall_time"] = verdict["t_agent"]
        facts["reason"] = ""
    return facts
