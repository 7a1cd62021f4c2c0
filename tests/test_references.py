"""Numerical references: the oracle at three levels, coarse-to-fine checks, storage."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import ORACLE, record_dict
from pytest_pdebench.build.references import build_reference
from pytest_pdebench.cases import CaseRecord

dolfinx = pytest.mark.usefixtures("dolfinx_available")


@dolfinx
def test_reference_is_built_checked_and_stored(tmp_path):
    record = CaseRecord.model_validate(record_dict("poisson_gaussian_source_l_shape"))
    record.evaluation_metadata.reference_path = None
    outcome = build_reference(record, tmp_path, ORACLE / "dolfinx")
    assert outcome.kept, outcome.reason
    assert outcome.g12 < outcome.g01 and outcome.e_base_estimate < 0.05
    stored = tmp_path / record.evaluation_metadata.reference_path
    with np.load(stored) as data:
        assert data["u"].shape == (100, 100) and data["u"].dtype == np.float32
    assert record.evaluation_metadata.reference_config["g12"] == pytest.approx(outcome.g12)


@dolfinx
def test_a_case_the_oracle_cannot_solve_is_discarded(tmp_path):
    data = record_dict("poisson_gaussian_source_l_shape")
    data["case_spec"]["bc"] = {"dirichlet": {"on": ["edge_start", "edge_end"], "value": 0},
                               "neumann": {"on": "arc", "value": 1}}  # a tag the oracle cannot locate
    data["case_spec"]["domain"] = {"type": "sector", "bounds": [[0, 1], [0, 1]]}
    data["case_spec"]["eval_grid"]["bbox"] = [0, 1, 0, 1]
    record = CaseRecord.model_validate(data)
    outcome = build_reference(record, tmp_path, ORACLE / "dolfinx")
    assert not outcome.kept
    assert "oracle failed: NotImplementedError" in outcome.reason and "'arc'" in outcome.reason
    assert not (tmp_path / "references").exists()


@dolfinx
def test_a_flow_the_elements_resolve_exactly_is_kept(tmp_path):
    """Poiseuille flow is quadratic: P2 velocities reproduce it, so the level gaps are
    rounding noise and must not count as non-convergence."""
    data = record_dict("stokes_lid_driven_cavity", new_id="poiseuille_channel")
    data["case_spec"]["bc"]["dirichlet"] = [{"on": "x_min", "value": ["4*y*(1 - y)", "0"]},
                                           {"on": ["y_min", "y_max"], "value": ["0", "0"]}]
    record = CaseRecord.model_validate(data)
    record.evaluation_metadata.reference_path = None
    outcome = build_reference(record, tmp_path, ORACLE / "dolfinx")
    assert outcome.kept, outcome.reason
    assert outcome.e_base_estimate < 1e-10


def test_calibration_tables_follow_the_papers_layout():
    from pytest_pdebench.report import calibration_tables

    rows = [{"family": "poisson", "method": "manufactured_solution", "e_base": 1e-5, "t_base": 0.5, "tau_acc": 1e-4},
            {"family": "heat", "method": "reference_numerical", "e_base": 2e-4, "t_base": 1.5, "tau_acc": 2e-3}]
    per_family, distribution, targets = calibration_tables(rows)
    assert per_family.splitlines()[-1].split()[:4] == ["all", "2", "1", "1"]
    assert per_family.splitlines()[-1].split()[5:7] == ["2.3e-04", "0.46"]  # beside Table 6's 2.3e-4
    tau_row = next(line for line in distribution.splitlines() if line.startswith("tau_acc"))
    assert "1.0e-04" in tau_row and "2.0e-03" in tau_row
    assert "paper" in distribution
    # poisson 1e-5 is 8x below Table 6; heat 2e-4 within 3x; tau median 1.05e-3 in range
    assert "OFF poisson" in targets and "ok  heat" in targets and "ok  median tau_acc" in targets


@dolfinx
def test_levels_refine_three_dimensional_meshes_too():
    from pytest_pdebench.build.refinement import run_oracle

    record = CaseRecord.model_validate(record_dict("poisson_unit_cube"))
    spec, arrays = record.case_spec_dict(), record.case_spec.output.arrays
    dofs = [run_oracle(ORACLE / "dolfinx", "poisson", spec, arrays, level)[1]["num_dofs"] for level in (0.5, 1.0)]
    assert dofs[0] < dofs[1] / 4, dofs
