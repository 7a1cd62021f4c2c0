"""The documentation site (mkdocs.yml, docs/): it builds strictly, a broken link or an
orphan page stops the build, the tutorial's commands run as written, and what the pages
state about options, commands and the suite matches the code and the data."""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_pdebench.testing import REPO

DOCS = REPO / "docs"
MKDOCS = Path(sys.executable).with_name("mkdocs")
# a marked block of the tutorial: <!-- tutorial: run -->, <!-- tutorial: run, exits 1 -->,
# <!-- tutorial: file PATH --> right before a fenced block
STEP = re.compile(r"<!-- tutorial: (?P<what>[^>]*?) -->\n```[^\n]*\n(?P<body>.*?)\n```\n", re.S)
TUTORIAL_CASE = "poisson_graded_kappa_unit_square_010"


def _pages() -> dict[Path, str]:
    """The pages people write (docs/reference/ is written from the code itself)."""
    return {path: path.read_text() for path in DOCS.rglob("*.md") if "reference" not in path.relative_to(DOCS).parts}


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    if not MKDOCS.is_file():
        pytest.fail("mkdocs is missing: pip install -e '.[docs]' (make setup installs it)", pytrace=False)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its future, not a finding
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


# ---- the build ----


@pytest.mark.slow
def test_the_site_builds_strictly_with_generated_references(tmp_path):
    done = _mkdocs_build(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    options = (tmp_path / "site" / "reference" / "options" / "index.html").read_text()
    for name in ("--pde-submissions", "--pde-variants", "--pde-agent-cost", "--pde-llm-backoff"):
        assert f'id="{name.lstrip("-")}"' in options, name
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "usage: pdebench calibrate" in cli and "usage: pdebench report" in cli
    # pages outside docs/ that pages link to are on the site: a guide, an example solver, a result
    assert (tmp_path / "site" / "guides" / "DOLFINX_GUIDE" / "index.html").is_file()
    example = tmp_path / "site" / "submissions" / "textbook" / "dolfinx" / "poisson.py" / "index.html"
    assert "Textbook DOLFINx solver for Poisson" in example.read_text()
    assert (tmp_path / "site" / "benchmarks" / "results" / "dolfinx-textbook.json").is_file()


@pytest.mark.slow
def test_a_broken_link_a_broken_anchor_or_an_orphan_page_stops_the_build(tmp_path):
    """The same configuration, with one more hook that adds a page outside the nav holding a
    link to a missing page and one to a missing anchor: three findings, and no site."""
    extra = tmp_path / "broken_page.py"
    extra.write_text(
        "from mkdocs.structure.files import File\n\n\n"
        "def on_files(files, config):\n"
        "    page = '# Broken\\n\\n[gone](no-such-page.md) and [gone too](gates.md#no-such-anchor)\\n'\n"
        "    files.append(File.generated(config, 'broken.md', content=page))\n"
        "    return files\n"
    )
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {REPO / 'mkdocs.yml'}\ndocs_dir: {DOCS}\nhooks:\n  - {DOCS / 'hooks.py'}\n  - {extra}\n"
    )
    done = _mkdocs_build(config, tmp_path / "site")
    said = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Aborted with 3 warnings in strict mode" in said, said[-3000:]
    assert 'not included in the "nav"' in said and "- broken.md" in said
    assert "'no-such-page.md', but the target is not found" in said
    assert "does not contain an anchor '#no-such-anchor'" in said


# ---- what the pages say ----


def test_every_option_the_pages_name_is_an_option_of_the_plugin():
    from _pytest.config.argparsing import Parser

    from pytest_pdebench import plugin

    parser = Parser(_ispytest=True)
    plugin.pytest_addoption(parser)
    declared = {name for group in parser._groups for option in group.options for name in option.names()}
    named = {
        (page.relative_to(DOCS), name)
        for page, text in _pages().items()
        for name in re.findall(r"--pde-[a-z-]*[a-z]", text)
    }
    assert len(named) > 50
    assert sorted((str(page), name) for page, name in named if name not in declared) == []


def test_every_pdebench_command_the_pages_name_exists():
    # argparse lists the commands when it refuses one
    refused = subprocess.run(
        [sys.executable, "-m", "pytest_pdebench.cli", "no-such-command"], capture_output=True, text=True, timeout=120
    )
    commands = set(re.findall(r"'([a-z-]+)'", refused.stderr.split("choose from", 1)[1]))
    assert {"calibrate", "report", "variants", "containers"} <= commands
    named = {
        (str(page.relative_to(DOCS)), word)
        for page, text in _pages().items()
        for word in re.findall(r"(?<![\w/-])pdebench ([a-z][a-z-]*[a-z])\b", text)
    }
    assert len(named) > 20
    assert sorted((page, word) for page, word in named if word not in commands) == []


def test_the_suite_table_matches_the_suite():
    records = [json.loads(line) for line in (REPO / "cases" / "suite.jsonl").read_text().splitlines() if line]
    counts = {
        "families": collections.Counter(r["pde_classification"]["equation_family"] for r in records),
        "domains (all 14)": collections.Counter(r["case_spec"]["domain"]["type"] for r in records),
        "math types": collections.Counter(m for r in records for m in r["pde_classification"]["math_type"]),
        "tracks": collections.Counter(lib for r in records for lib in r["supported_libraries"]),
    }
    rows = dict(re.findall(r"^\| ([a-z][^|]*?) \| (.*) \|$", (DOCS / "suite.md").read_text(), re.M))
    for row, counter in counts.items():
        stated = {name: int(n) for name, n in re.findall(r"\b([a-z_]+) (\d+)\b", rows[row])}
        assert stated == dict(counter), row
    construction = collections.Counter(r["evaluation_metadata"]["construction_method"] for r in records)
    assert rows["construction"] == (
        f"{construction['manufactured_solution']} manufactured, "
        f"{construction['reference_numerical']} numerical references"
    )
    timed = sum(1 for r in records if r["case_spec"]["pde"].get("time"))
    solid = sum(1 for r in records if r["case_spec"]["eval_grid"].get("nz"))
    assert rows["time"] == f"{timed} time-dependent, {len(records) - timed} steady; {solid} in 3-D"
    bcs = collections.Counter(kind for r in records for kind in r["case_spec"].get("bc") or {})
    assert rows["boundary data"] == (
        f"Dirichlet in {bcs['dirichlet']} ({len(records) - bcs['dirichlet']} fully periodic cases have none), "
        f"Neumann {bcs['neumann']}, Robin {bcs['robin']}, periodic {bcs['periodic']}, "
        f"lap(u) {bcs['laplacian']} (biharmonic)"
    )


# ---- the tutorial ----


def test_the_tutorial_marks_its_steps():
    steps = STEP.findall((DOCS / "tutorial.md").read_text())
    kinds = [what.split()[0] for what, _ in steps]
    assert kinds.count("file") == 1 and kinds.count("run") >= 3
    solver = next(body for what, body in steps if what.startswith("file"))
    compile(solver, "poisson.py", "exec")
    assert "def solve(case_spec)" in solver


@pytest.mark.fem
@pytest.mark.slow
def test_the_tutorial_runs_as_written(tmp_path, dolfinx_available):
    """Every marked block, in order, in an empty folder with the venv on PATH: the solver it
    writes passes its case, and the failing example fails the accuracy gate."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    outputs = []
    for what, body in STEP.findall((DOCS / "tutorial.md").read_text()):
        if what.startswith("file "):
            path = tmp_path / what.removeprefix("file ").strip()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body + "\n")
            continue
        expected = int(what.rsplit("exits", 1)[1]) if "exits" in what else 0
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == expected, f"{body}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout)
    report = json.loads((tmp_path / "tutorial.json").read_text())
    verdicts = [test["metadata"]["pde"] for test in report["tests"]]
    assert [(v["case_id"], v["outcome"]) for v in verdicts] == [(TUTORIAL_CASE, "PASS")]
    assert verdicts[0]["error"] < verdicts[0]["tau_acc"] / 2  # not a near miss that load could flip
    assert any(line.startswith("PASS error") for out in outputs for line in out.splitlines())
    assert "F-Acc: rel. L2 error" in outputs[-1]


def test_the_tutorial_solver_refuses_what_it_does_not_solve(tmp_path, dolfinx_available):
    """On the install page's own case, an annulus: F-Exec with its message, as the tutorial
    promises (it used to mesh the bounding square and fail the accuracy gate instead)."""
    from pytest_pdebench.testing import REPO, run_track

    blocks = [body for what, body in STEP.findall((DOCS / "tutorial.md").read_text()) if what.startswith("file ")]
    solvers = tmp_path / "solvers" / "dolfinx"
    solvers.mkdir(parents=True)
    (solvers / "poisson.py").write_text(blocks[0] + "\n")
    done, outcomes = run_track(tmp_path, "dolfinx", REPO / "cases", tmp_path / "solvers", "--pde-baseline=stored",
                               "-k", "poisson_smooth_kappa_annulus_000")
    verdict = outcomes["poisson_smooth_kappa_annulus_000"]
    assert verdict["outcome"] == "F-Exec", (verdict["reason"], done.stdout[-2000:])
    assert "this solver meshes rectangles only, not annulus" in verdict["reason"]


def test_the_committed_reference_pages_are_what_the_code_writes():
    """docs/reference/ is committed (its links work on GitHub) and must say what the plugin's
    options and the pdebench command are now; the site's build stops on a stale page too."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    for name, text in hooks.reference_pages().items():
        assert (DOCS / name).read_text() == text, f"docs/{name} is stale: run python docs/hooks.py"
    assert "&lt;library&gt;" in (DOCS / "reference" / "options.md").read_text()  # a placeholder, not a tag
