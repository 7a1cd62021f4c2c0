"""The per-record checks of the shipped suite, and the digest that says they passed.

Each record must satisfy its stored PDE exactly (``pdes.residuals``), pass the static checks
(``validation.static_problems``), and carry boundary and initial data that are its exact
solution. Over the 698 records (the suite and the smoke cases) that is about 7 minutes of
sympy, so the tests run it on a sample and ``benchmarks/suite_checks.py`` runs it on all and,
when every record passes, writes ``tests/suite-checked.json``: the digest of the case files
and of the checks' code it passed on. ``tests/test_cases.py`` asserts that digest is the
suite's as it is now: a case or a check changed since is a failing test until the whole
suite is checked again (comments and docstrings aside).
"""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from . import REPO, STARTER

CASES_DIR = REPO / "cases"
CHECKED = REPO / "tests" / "suite-checked.json"
# the modules the checks run (a test asserts the checks import nothing else of the package)
CHECK_MODULES = (
    "boundaries",
    "bundled",
    "cases",
    "domains",
    "expression_syntax",
    "expressions",
    "grid",
    "leaks",
    "metrics",
    "pdes",
    "reference",
    "text_leaks",
    "validation",
    "vocabulary",
    "testing/suite_checks",
)


def suite_records() -> list[tuple[Path, object]]:
    """(case file, record) for every record of the shipped suite and the smoke cases."""
    from ..cases import load_cases

    return [(file, record) for folder in (CASES_DIR, STARTER) for file, _, record in load_cases(folder)]


def sample_records(per_group: int = 2) -> list[tuple[Path, object]]:
    """``per_group`` records of each (family, construction method), as ``--pde-sample`` picks."""
    from ..shards import sample

    kept, _ = sample(
        [SimpleNamespace(record=record, pair=(file, record)) for file, record in suite_records()], per_group
    )
    return [item.pair for item in kept]


def problems_of(file: Path, record) -> list[str]:
    """What is wrong with one record, by each check; empty when it passes them all."""
    from .. import pdes
    from ..validation import static_problems

    found = list(static_problems(record, file.parent))
    if record.evaluation_metadata.manufactured_solution:
        if any(residual != 0 for residual in pdes.residuals(record)):
            found.append("the manufactured solution does not satisfy the stored PDE")
        found += boundary_data_problems(record)
    return found


def boundary_data_problems(record) -> list[str]:
    """Dirichlet data is the exact solution on the boundary parts it applies to (inside the
    domain, data of revision 2 differ from it); the initial data is u(t0)."""
    import numpy as np

    from ..boundaries import boundary_points
    from ..domains import resolve_geometry
    from ..expressions import evaluate, parse_expression, t

    exact = record.evaluation_metadata.manufactured_solution["u"]
    exact = exact if isinstance(exact, list) else [exact]
    spec = record.case_spec
    geometry = resolve_geometry(record.case_spec_dict()["domain"])
    times = (spec.pde.time.t0, spec.pde.time.t_end) if spec.pde.time else (0.0,)
    found = []
    for condition in spec.bc.conditions("dirichlet"):
        values = condition.value if isinstance(condition.value, list) else [condition.value]
        points = np.concatenate([boundary_points(geometry, tag, 12) for tag in condition.tags])
        for g, u in zip(values, exact, strict=True):
            for when in times:
                want = evaluate(u, points, when)
                if not np.allclose(evaluate(g, points, when), want, rtol=1e-9, atol=1e-9 * (1 + np.abs(want).max())):
                    found.append(f"Dirichlet data on {condition.tags} is not u at t={when}")
    if spec.ic and (parse_expression(spec.ic.value) - parse_expression(exact[0]).subs(t, spec.pde.time.t0)).simplify():
        found.append("the initial data is not u(t0)")
    return found


def suite_digest() -> str:
    """Of every file under cases/ and the smoke suite (data/smoke/) and of the checks' code (its syntax tree
    without docstrings: a comment or a docstring edited does not call for a check again)."""
    package = REPO / "pytest_pdebench"
    digest = hashlib.sha256()
    for path in sorted(path for folder in (CASES_DIR, STARTER) for path in folder.rglob("*") if path.is_file()):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    for name in CHECK_MODULES:
        digest.update(name.encode() + b"\0" + _code_only(package / f"{name}.py").encode())
    return digest.hexdigest()


def _code_only(path: Path) -> str:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            setattr(node, "body", body[1:] or [ast.Pass()])  # noqa: B010 (any node with a body)
    return ast.dump(tree)


def checked_digest() -> str | None:
    """The digest the whole suite last passed on, or None if it was never written."""
    return json.loads(CHECKED.read_text())["digest"] if CHECKED.is_file() else None


def modules_the_checks_import(file: Path, record_id: str) -> set[str]:
    """The package's modules that loading the cases and running the checks on one record
    load, in a fresh interpreter (this module's own imports of the test helpers left out)."""
    code = (
        "import sys\n"
        "def ours(): return {m for m in sys.modules if m.startswith('pytest_pdebench.')}\n"
        "from pytest_pdebench.cases import load_cases\n"
        "loading = ours()\n"
        "from pytest_pdebench.testing.suite_checks import problems_of, Path\n"
        "helpers = ours()\n"
        f"path = Path({str(file)!r})\n"
        f"record = next(r for _, _, r in load_cases(path) if r.id == {record_id!r})\n"
        "problems_of(path, record)\n"
        "print('\\n'.join(loading | (ours() - helpers)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {name.removeprefix("pytest_pdebench.").replace(".", "/") for name in done.stdout.split()}
