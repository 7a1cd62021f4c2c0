"""The house rules of the package (issue 38), each checked by its tool in a subprocess from
the repository's root, with the configuration in pyproject.toml:

- its layers ([tool.importlinter]): no module imports from a layer above its own, in
  functions or not, so there are no import cycles (``lint-imports``);
- lint and format ([tool.ruff]): ``ruff check`` (the package and ``benchmarks/``) and
  ``ruff format --check`` (the package);
- types ([tool.mypy]): ``mypy``, with its cache in the root's ``.mypy_cache`` (a few
  seconds once warm, about a minute the first time).

The tools are the ones in the virtual environment of the interpreter running the tests
(the test extra: ``make setup`` installs them)."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "pytest_pdebench"


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found, f"{name} is missing: pip install -e '.[test]' (make setup installs it)"
    return found


def _run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def _output(done: subprocess.CompletedProcess) -> str:
    return done.stdout[-6000:] + done.stderr[-2000:]


def test_no_module_imports_from_a_layer_above_its_own():
    done = _run(_tool("lint-imports"), "--no-cache")
    assert done.returncode == 0, _output(done)
    assert "1 kept, 0 broken" in done.stdout


def test_the_package_passes_ruff_lint():
    # the benchmarks too: scripts a maintainer runs months later (lint only; their tables keep their layout)
    done = _run(_tool("ruff"), "check", "--no-fix", PACKAGE, "benchmarks")
    assert done.returncode == 0, "ruff check (`ruff check --fix` mends some):\n" + _output(done)


def test_the_package_is_ruff_formatted():
    done = _run(_tool("ruff"), "format", "--check", "--diff", PACKAGE)
    assert done.returncode == 0, f"ruff format would change these (`ruff format {PACKAGE}`):\n" + _output(done)


def test_the_package_passes_mypy():
    done = _run(_tool("mypy"), timeout=900)  # pyproject's [tool.mypy] names the files
    assert done.returncode == 0, "mypy:\n" + _output(done)
    assert "Success: no issues found" in done.stdout, _output(done)


def test_docstrings_name_files_and_classes_that_exist():
    """After a move, a docstring that names ``a_module.py`` or ``module.ClassName`` must
    still point somewhere: every file name named exists in the checkout, every class named
    after one of the package's modules is in that module."""
    import ast
    import importlib
    import re

    package = REPO / PACKAGE
    skip = {".venv", ".git", "node_modules", "site"}
    files = {p.name for p in REPO.rglob("*.py") if not skip & set(p.relative_to(REPO).parts)}
    modules = {}
    for path in package.rglob("*.py"):
        parts = [part for part in path.relative_to(package).with_suffix("").parts if part != "__init__"]
        if parts:
            modules.setdefault(parts[-1], ".".join(["pytest_pdebench", *parts]))
    file_name = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)*[a-z_][a-z0-9_]*\.py)\b")
    class_name = re.compile(r"``([a-z_][a-z0-9_]*)\.([A-Z][A-Za-z0-9_]*)")
    stale = []
    for path in sorted(package.rglob("*.py")):
        if "scaffolds" in path.parts:  # prompt text, kept byte for byte
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node) or ""
            stale += [f"{path.name}: {m[1]}" for m in file_name.finditer(doc) if m[1].split("/")[-1] not in files]
            for module, name in class_name.findall(doc):
                if module in modules and not hasattr(importlib.import_module(modules[module]), name):
                    stale.append(f"{path.name}: {module}.{name}")
    assert not stale, stale
