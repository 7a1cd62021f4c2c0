"""Where the bundled folders are: the suite's cases, the stored calibrations, the library
guides, the reference solvers (submissions/) and the container recipes; and the package's
own data (``data/``: the smoke suite and the attacker the part builds keep their margin from),
which sit in the package in a checkout and in a wheel alike.

In a checkout (or an editable install) they are the checkout's top-level folders; a wheel
carries copies under ``pytest_pdebench/_bundled/`` (setup.py puts them there), so an
installed plugin runs from any folder. A project folder with its own top-level folder of
that name (its own ``cases/``, say) takes precedence where the caller passes its rootdir.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent
INSTALLED = PACKAGE / "_bundled"
FOLDERS = ("cases", "calibrations", "guides", "submissions", "containers")  # what a wheel carries
DATA = PACKAGE / "data"
SMOKE = "smoke"  # --pde-cases=smoke names the smoke suite
SMOKE_CASES = DATA / "smoke"  # the 53-case smoke suite (all eleven families; the shipped suite is cases/)
ATTACKER = DATA / "attacker" / "solver.py"  # the ansatz-fit attacker, whose margin the part builds keep
# the upstream benchmark (CC BY 4.0): read by the builders at run time, never copied here
UPSTREAM_FILE = Path("../shared/upstream/benchmark_v2.jsonl")


def cache_root() -> Path:
    """Per-machine caches outside the repository (toolchains, kernels, provisioned runtimes)."""
    return Path(os.environ.get("PDEBENCH_CACHE") or Path.home() / ".cache" / "pytest-pdebench")


def baselines_folder() -> Path:
    """This machine's kept runtime baselines (kept_baselines.py): ``$PDEBENCH_BASELINES``, else
    under the cache root (a test suite points it at a folder of its own)."""
    return Path(os.environ.get("PDEBENCH_BASELINES") or cache_root() / "baselines")


def answers_cache() -> Path:
    """Answers the harness builds at run time (live variants' solve-only parts): under the
    cache root, hidden from every run as the bundled answer key is."""
    return cache_root() / "answers"


def _in_checkout() -> bool:
    # site-packages has no pyproject.toml beside the package: its folders are other packages'
    return (CHECKOUT / "pyproject.toml").is_file()


def bundled(name: str, rootdir: Path | None = None) -> Path:
    """The bundled folder ``name`` (e.g. "cases", "submissions/oracle"): the rootdir's if it
    has one, else the checkout's, else the installed copy (returned even if missing, so that
    the caller's message names where it looked)."""
    if rootdir is not None and (rootdir / name).exists():
        return rootdir / name
    if _in_checkout() and (CHECKOUT / name).exists():
        return CHECKOUT / name
    return INSTALLED / name


def count_records(path: Path) -> int:
    """The non-blank lines of the case files at ``path`` (a file, or the *.jsonl files under a
    folder): the records a run collects, or reports as broken, without parsing them."""
    path = Path(path)
    files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path] if path.is_file() else []
    count = 0
    for file in files:
        with open(file, "rb") as handle:
            count += sum(1 for line in handle if line.strip())
    return count


def named_cases(value: str) -> str:
    """A --cases value as a path: ``smoke`` names the bundled smoke suite (unless a file or
    folder of that name is here), anything else is the path it says."""
    return str(SMOKE_CASES) if value == SMOKE and not Path(value).exists() else value


def case_source(rootdir: Path | None) -> Path:
    """The cases a run takes without --pde-cases: the rootdir's ``cases/`` folder if it holds
    records (a checkout's suite, a project that keeps its own), else the bundled suite; a
    ``cases/`` folder with no records in it (a schema file, nothing yet) is not a suite."""
    if rootdir is not None and (rootdir / "cases").is_dir() and count_records(rootdir / "cases"):
        return rootdir / "cases"
    return bundled("cases")
