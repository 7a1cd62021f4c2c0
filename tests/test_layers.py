"""The house rules of the package (issue 38) that no linter checks: docstrings that name
files and classes that exist, and the like. The linters themselves (its layers with
``lint-imports``, ``ruff check`` and ``ruff format --check``, ``mypy``, configured in
pyproject.toml) run beside the tests, not inside one: ``make lint``, which ``make test`` and
``make check`` run in parallel with pytest (issue 63)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "pytest_pdebench"


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
