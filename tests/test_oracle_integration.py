"""The DOLFINx oracle through pytest on real cases: a real FEM solve in the sandbox,
judged against the committed calibration of this machine (or the one in the records)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_pdebench.testing import ORACLE, REPO, STARTER, outcomes_from_report

pytestmark = [pytest.mark.fem, pytest.mark.usefixtures("dolfinx_available")]


def test_oracle_passes_poisson_and_heat_cases(tmp_path):
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx",
         f"--pde-cases={STARTER}", f"--pde-submissions={ORACLE}", f"--pde-output={tmp_path / 'out'}",
         "-k", "poisson_l_shape_variable_kappa or (heat_circle and not variable)", "--json-report", f"--json-report-file={report}"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    outcomes = outcomes_from_report(report)
    assert set(outcomes) == {"poisson_l_shape_variable_kappa", "heat_circle"}, done.stdout[-3000:]
    for case_id, verdict in outcomes.items():
        assert verdict["outcome"] == "PASS", (case_id, verdict["reason"], done.stdout[-3000:])
        assert verdict["error"] <= verdict["tau_acc"]
        assert verdict["solver_info"]["converged"] is True
        assert verdict["runtime_version"].startswith("0.11")
    assert outcomes["heat_circle"]["solver_info"]["num_time_steps"] >= 10
