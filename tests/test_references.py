"""Numerical references: the oracle at three levels, coarse-to-fine checks, storage."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import ORACLE, record_dict
from pytest_pdebench.build.references import build_reference
from pytest_pdebench.cases import CaseRecord

pytestmark = pytest.mark.usefixtures("dolfinx_available")


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


def test_a_case_the_oracle_cannot_solve_is_discarded(tmp_path):
    data = record_dict("poisson_gaussian_source_l_shape")
    data["case_spec"]["bc"] = {"periodic": {"directions": ["x"]}, "dirichlet": {"on": "boundary", "value": 0}}
    data["case_spec"]["domain"] = {"type": "periodic_square", "bounds": [[0, 1], [0, 1]]}
    data["case_spec"]["eval_grid"]["bbox"] = [0, 1, 0, 1]
    record = CaseRecord.model_validate(data)
    outcome = build_reference(record, tmp_path, ORACLE / "dolfinx")
    assert not outcome.kept
    assert "oracle failed: NotImplementedError" in outcome.reason and "periodic" in outcome.reason
    assert not (tmp_path / "references").exists()
