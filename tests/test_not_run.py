"""Nothing silent (issue 40): items that cannot run are rows of the outcome table with
their reason, said once in the terminal summary without -rs; without --pde-library a
folder runs on the tracks it has solvers for; no speed warning for a track not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pytest_pdebench.testing import REPO

CASE = "poisson_smooth_kappa_annulus_000"
TEXTBOOK = REPO / "submissions" / "textbook" / "dolfinx"


def pytest_in(folder, *options, env=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *options],
        cwd=folder, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )  # fmt: skip


def solver_folder(tmp_path, *tracks):
    for track in tracks:
        (tmp_path / "solvers" / track).mkdir(parents=True)
    for name in ("_textbook.py", "poisson.py"):
        if "dolfinx" in tracks:
            (tmp_path / "solvers" / "dolfinx" / name).write_text((TEXTBOOK / name).read_text())
    if "firedrake" in tracks:
        (tmp_path / "solvers" / "firedrake" / "solver.py").write_text("def solve(case_spec):\n    pass\n")
    if "dealii" in tracks:
        (tmp_path / "solvers" / "dealii" / "_helper.h").write_text("// a helper alone is not a solver\n")
    return tmp_path / "solvers"


def test_a_folder_runs_on_the_tracks_it_has_solvers_for(tmp_path):
    solver_folder(tmp_path, "dolfinx", "dealii")
    done = pytest_in(tmp_path, "--pde-submissions=solvers", "--collect-only", "-k", CASE)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "on dolfinx (the tracks solvers has solvers for; --pde-library chooses)" in done.stdout
    assert f"{CASE}[dolfinx]" in done.stdout and "[dealii]" not in done.stdout and "[firedrake]" not in done.stdout


def test_a_folder_without_solvers_is_refused_saying_what_was_expected(tmp_path):
    (tmp_path / "solvers" / "dolfinx").mkdir(parents=True)
    done = pytest_in(tmp_path, "--pde-submissions=solvers")
    assert done.returncode == 4
    assert "no solver files in solvers" in done.stderr and "<library>/<family>.py" in done.stderr


@pytest.mark.fem
@pytest.mark.slow
def test_items_without_a_runtime_are_not_run_rows_with_their_reason(tmp_path, dolfinx_available):
    solver_folder(tmp_path, "dolfinx", "firedrake")
    done = pytest_in(
        tmp_path, "--pde-submissions=solvers", "-k", CASE, "--pde-runs=1", "--json-report", "--json-report-file=r.json",
        env={"PDEBENCH_FIREDRAKE_PYTHON": str(tmp_path / "no-python")},  # Firedrake absent, even where provisioned
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:]  # one item selected and not judged: not a success
    out = done.stdout
    firedrake_table = out[out.index("firedrake:") :]
    assert "not run" in firedrake_table.splitlines()[1]  # the column, in the header of that track's table
    assert "not run: 1 item, left out of the pass rates (the run exits with status 1" in out
    assert "1 on firedrake: firedrake runtime not found" in out and "pdebench provision firedrake" in out
    assert "WARNING: firedrake" not in out  # no speed or conditions warning for a track that is not here
    report = json.loads((tmp_path / "r.json").read_text())
    assert [(i["case_id"], i["library"], i["family"]) for i in report["pde"]["not_run"]] == [
        (CASE, "firedrake", "poisson")
    ]
    verdicts = [t["metadata"]["pde"] for t in report["tests"] if t.get("metadata", {}).get("pde")]
    assert [(v["library"], v["outcome"]) for v in verdicts] == [("dolfinx", "PASS")]


def test_the_summary_lists_the_audit_folders_of_failed_items():
    from pytest_pdebench.report import FIRST_FAILED, failed_folders

    verdicts = [
        {"outcome": "F-Acc", "case_id": f"c{k}", "library": "dolfinx", "artifacts": f"/out/c{k}"} for k in range(7)
    ]
    verdicts.append({"outcome": "PASS", "case_id": "ok", "library": "dolfinx", "artifacts": "/out/ok"})
    lines = failed_folders(verdicts)
    assert lines[0] == f"audit folders of the failed items ({FIRST_FAILED} of 7; -v lists all):"
    assert lines[1] == "  F-Acc c0 [dolfinx]: /out/c0" and len(lines) == 1 + FIRST_FAILED
    assert len(failed_folders(verdicts, every=True)) == 1 + 7 and not any("/out/ok" in line for line in lines)
    assert failed_folders(verdicts[-1:]) == []


def test_a_track_the_folder_has_no_solver_for_is_not_run(tmp_path):
    solver_folder(tmp_path, "firedrake")  # asked for DOLFINx, has Firedrake solvers only
    done = pytest_in(tmp_path, "--pde-submissions=solvers", "--pde-library=dolfinx", "-k", CASE)
    assert done.returncode == 1, done.stdout[-3000:]  # nothing judged: CI must not go green
    assert "not run: 1 item, left out of the pass rates (the run exits with status 1" in done.stdout
    assert "1 on dolfinx: no solver for dolfinx in solvers" in done.stdout


def test_a_case_whose_own_data_file_is_missing_is_not_run_not_the_solvers_failure(tmp_path):
    """A case file copied without its references/ folder: the harness cannot judge it, and
    says so, before any run; it is never the solver's F-Exec."""
    lines = (REPO / "cases" / "suite.jsonl").read_text().splitlines()
    numerical = next(json.loads(line) for line in lines if '"reference_numerical"' in line and '"dolfinx"' in line)
    (tmp_path / "cases.jsonl").write_text(json.dumps(numerical) + "\n")  # references/ left behind
    done = pytest_in(tmp_path, "--pde-submissions=oracle", "--pde-library=dolfinx", "--pde-cases=cases.jsonl",
                     "--json-report", "--json-report-file=r.json")  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:]
    assert f"1 on dolfinx: not run: case {numerical['id']}: its data file" in done.stdout, done.stdout[-3000:]
    assert "is missing (the case's, not the solver's" in done.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert [t for t in report["tests"] if t.get("metadata", {}).get("pde")] == []  # no verdict, no F-Exec
    assert [i["case_id"] for i in report["pde"]["not_run"]] == [numerical["id"]]


def test_a_selection_that_matches_nothing_says_what_items_are_called_and_where_the_case_is(tmp_path):
    lines = (REPO / "cases" / "suite.jsonl").read_text().splitlines()
    elsewhere = next(json.loads(line)["id"] for line in lines if '"dealii"' not in line)
    done = pytest_in(tmp_path, "--pde-submissions=oracle", "--pde-library=dealii", "-k", elsewhere)
    assert done.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, done.stdout[-3000:]
    assert f"pdebench: -k '{elsewhere}' selected no item; an item is case_id[library]" in done.stdout
    assert f"the cases it names are not on the dealii track: {elsewhere} (dolfinx, firedrake)" in done.stdout
    done = pytest_in(tmp_path, "--pde-submissions=oracle", "--pde-library=dolfinx", "-m", "no_such_marker")
    assert "pdebench: -m 'no_such_marker' selected no item" in done.stdout and "not on the" not in done.stdout
    assert "no item has the marker no_such_marker: the markers are poisson, helmholtz" in done.stdout
