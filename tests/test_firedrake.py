"""The Firedrake track through pytest: the provisioned runtime in the sandbox, the gates
on a toy solver, and the Firedrake oracle on real cases."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import NUMPY_PRELUDE, ORACLE, REPO, STARTER, outcomes_from_report, record_dict, write_calibration, \
    write_jsonl

pytestmark = [pytest.mark.fem, pytest.mark.usefixtures("firedrake_available")]


def run(tmp_path, cases, submissions, *extra):
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=firedrake",
                           f"--pde-cases={cases}", f"--pde-submissions={submissions}",
                           f"--pde-output={tmp_path / 'out'}", "--json-report", f"--json-report-file={report}",
                           *extra], cwd=REPO, capture_output=True, text=True, timeout=900)
    return done, outcomes_from_report(report)


def test_toy_solver_importing_firedrake_passes_in_the_sandbox(tmp_path):
    record = record_dict(new_id="toy_fd", nx=20, ny=20)
    write_jsonl(tmp_path / "cases.jsonl", [record])
    write_calibration(tmp_path / "calibrations", "firedrake", [record], 1e-4, 5.0)
    solvers = tmp_path / "solvers" / "firedrake"
    solvers.mkdir(parents=True)
    (solvers / "solver.py").write_text(NUMPY_PRELUDE + "\nimport firedrake\n\ndef solve(case_spec):\n"
                                       "    firedrake.UnitSquareMesh(4, 4)\n    x, y, u = grid(case_spec)\n"
                                       "    write(u, x, y)\n")
    done, outcomes = run(tmp_path, tmp_path / "cases.jsonl", solvers.parent,
                         f"--pde-calibrations={tmp_path / 'calibrations'}")
    verdict = outcomes["toy_fd"]
    assert verdict["outcome"] == "PASS", (verdict["reason"], done.stdout[-2000:])
    assert verdict["runtime_version"].startswith("2026.10") and verdict["sandbox"] == "bubblewrap"


def test_oracle_poisson_on_starter_cases(tmp_path):
    done, outcomes = run(tmp_path, STARTER, ORACLE, "--pde-calibrate", "-k", "poisson_basic or (poisson_annulus and not variable)",
                         f"--pde-calibrations={tmp_path / 'calibrations'}")
    assert set(outcomes) == {"poisson_basic", "poisson_annulus"}, done.stdout[-2000:]
    for case_id, verdict in outcomes.items():
        assert verdict["outcome"] == "PASS", (case_id, verdict["reason"])
        assert verdict["e_base"] < 1e-4 and verdict["solver_info"]["converged"] is True
