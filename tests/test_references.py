"""Numerical references: the oracle at three levels, coarse-to-fine checks, storage."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_pdebench.authoring.references import build_reference
from pytest_pdebench.cases import CaseRecord
from pytest_pdebench.testing import ORACLE, record_dict

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
    # the strong oracle (level 1) agrees with it well inside any threshold under the cap
    assert outcome.e_base_estimate <= 0.1 * record.evaluation_config.tau_max
    # a rebuilt reference with other values is another case for every baseline measured against it
    from pytest_pdebench.fingerprints import case_fingerprint
    before = case_fingerprint(record, "dolfinx")
    record.evaluation_metadata.reference_config["digest"] = "0" * 16
    assert case_fingerprint(record, "dolfinx") != before


@dolfinx
def test_a_reference_the_strong_oracle_cannot_reach_is_discarded(tmp_path):
    """The anchor must PASS every case: a strong oracle farther from its own reference
    than 0.1 x tau_max would fail accuracy (or disagree with the reference) whatever the
    baseline. A cap of 1e-6 puts this well-resolved case in that position."""
    record = CaseRecord.model_validate(record_dict("poisson_gaussian_source_l_shape"))
    record.evaluation_metadata.reference_path = None
    record.evaluation_config.tau_max = 1e-6
    outcome = build_reference(record, tmp_path, ORACLE / "dolfinx")
    assert not outcome.kept
    assert "no threshold could hold it to its own reference" in outcome.reason
    assert record.evaluation_metadata.reference_path is None and not (tmp_path / "references").exists()


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
    dofs = record.evaluation_metadata.reference_config["num_dofs"]
    assert dofs[0] < dofs[1] < dofs[2], dofs  # the levels reach the shared Taylor-Hood module


@dolfinx
def test_levels_that_leave_the_discretization_as_it_was_are_refused(tmp_path, monkeypatch):
    """Three runs at one resolution give equal fields, which would pass for a flow the
    elements resolve exactly: 26 flow and 3-D Helmholtz references were kept that way
    (a default argument bound at import held every level at the anchor's mesh)."""
    from pytest_pdebench.authoring import references
    from pytest_pdebench.making import refinement

    def levels_ignored(oracle_dir, family, case_spec, arrays, level=1.0):
        return refinement.run_oracle(oracle_dir, family, case_spec, arrays, 1.0)

    monkeypatch.setattr(references, "run_oracle", levels_ignored)
    record = CaseRecord.model_validate(record_dict("poisson_gaussian_source_l_shape"))
    record.evaluation_metadata.reference_path = None
    outcome = build_reference(record, tmp_path, ORACLE / "dolfinx")
    assert not outcome.kept and "did not refine the discretization" in outcome.reason, outcome.reason
    assert record.evaluation_metadata.reference_path is None


@dolfinx
def test_the_strong_oracle_curves_its_cells_and_grades_reentrant_corners(tmp_path, monkeypatch):
    """Strong runs: quadratic cells on curved boundaries, cells down to CORNER_SIZE x h at
    re-entrant corners. Calibration runs keep the straight, uniform meshes they were drawn on."""
    import sys

    for folder in (ORACLE, ORACLE / "dolfinx"):
        monkeypatch.syspath_prepend(str(folder))
    import mpi4py.MPI  # noqa: F401 (loads libmpi before dolfinx)

    common = __import__("_oracle_common")
    calibration = sys.modules["_calibration"]
    monkeypatch.chdir(tmp_path)
    h = 1 / 16

    def smallest_cell(msh):
        import dolfinx

        tdim = msh.topology.dim
        cells = np.arange(msh.topology.index_map(tdim).size_local, dtype=np.int32)
        return dolfinx.cpp.mesh.h(msh._cpp_object, tdim, cells).min()

    calibration.calibration_setting.cache_clear()
    assert common.build_mesh({"type": "circle"}, h).geometry.cmaps[0].degree == 2
    l_shape = common.build_mesh({"type": "l_shape"}, h)
    assert l_shape.geometry.cmaps[0].degree == 1 and smallest_cell(l_shape) < 3 * common.CORNER_SIZE * h

    (tmp_path / "calibration_config.json").write_text('{"element_degree": 1, "cells_per_side": 16}')
    calibration.calibration_setting.cache_clear()
    try:
        assert common.build_mesh({"type": "circle"}, h).geometry.cmaps[0].degree == 1
        assert smallest_cell(common.build_mesh({"type": "l_shape"}, h)) > 0.5 * h
    finally:
        calibration.calibration_setting.cache_clear()


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
    from pytest_pdebench.making.refinement import run_oracle

    record = CaseRecord.model_validate(record_dict("poisson_unit_cube"))
    spec, arrays = record.case_spec_dict(), record.case_spec.output.arrays
    dofs = [run_oracle(ORACLE / "dolfinx", "poisson", spec, arrays, level)[1]["num_dofs"] for level in (0.5, 1.0)]
    assert dofs[0] < dofs[1] / 4, dofs



@dolfinx
def test_levels_refine_a_wave_resolved_helmholtz_mesh_too():
    """At k = 5 on a unit cube the cells-per-wavelength floor (15, so 12 cells) binds at
    level 0.5 if it is not graded with the level: levels 0.5 and 1 were then one mesh with the
    anchor's grade, and the builder threw the case away (helmholtz_k5_unit_cube_noexact_009)."""
    from pytest_pdebench.making.refinement import run_oracle

    data = record_dict("poisson_unit_cube")
    data["case_spec"]["pde"] = {"type": "helmholtz", "params": {"k": 5.0}, "forcing": {"value": "1"}}
    data["pde_classification"]["equation_family"] = "helmholtz"
    data["case_spec"]["eval_grid"].update(nx=9, ny=9, nz=9)
    record = CaseRecord.model_validate(data)
    spec, arrays = record.case_spec_dict(), record.case_spec.output.arrays
    dofs = [run_oracle(ORACLE / "dolfinx", "helmholtz", spec, arrays, level)[1]["num_dofs"] for level in (0.5, 1.0)]
    assert dofs[0] < dofs[1] / 4, dofs

@dolfinx
def test_levels_are_taken_of_the_reference_grade_not_of_the_leaner_anchor():
    """The anchor (what an evaluation runs) may be coarser than the grade the references are
    built from; the builder's level 1 is the reference grade, and the anchor's own setting
    is back in place afterwards."""
    import importlib

    from pytest_pdebench.making.refinement import run_oracle

    record = CaseRecord.model_validate(record_dict("stokes_lid_driven_cavity"))
    spec, arrays = record.case_spec_dict(), record.case_spec.output.arrays
    run_oracle(ORACLE / "dolfinx", "stokes", spec, arrays, 0.5)  # puts the oracle's folders on sys.path
    flow = importlib.import_module("_flow")
    anchor = flow.CELLS_PER_LENGTH
    info = run_oracle(ORACLE / "dolfinx", "stokes", spec, arrays, 1.0)[1]
    assert info["mesh_resolution"] == flow.REFERENCE_CELLS_PER_LENGTH > anchor
    assert flow.CELLS_PER_LENGTH == anchor


@dolfinx
def test_a_slow_navier_stokes_flow_refines_with_the_level():
    """nu >= the oracle's SLOW_FLOW_NU runs on SLOW_FLOW_CELLS_PER_LENGTH: that constant is
    graded too (it was set but not scaled, so every level solved on one mesh)."""
    from pytest_pdebench.making.refinement import run_oracle

    record = CaseRecord.model_validate(record_dict("navier_stokes_square"))  # nu = 0.1
    spec, arrays = record.case_spec_dict(), record.case_spec.output.arrays
    cells = [run_oracle(ORACLE / "dolfinx", "navier_stokes", spec, arrays, level)[1]["mesh_resolution"]
             for level in (0.5, 1.0, 2.0)]  # fmt: skip
    assert cells[0] < cells[1] < cells[2] and cells[2] == 4 * cells[0], cells


@dolfinx
def test_a_load_whose_solution_the_data_span_is_refused(tmp_path):
    """A Dirichlet eigenfunction as the load on the unit square: the solution is a multiple of
    it, which the ansatz-fit attacker finds with no solve; the build refuses the record (a
    Gaussian load on the L-shape it keeps, with the attacker's margin recorded)."""
    from pytest_pdebench.making.attack import ATTACK_MARGIN, WITHIN, builds_attacker

    attacker = builds_attacker()
    record = CaseRecord.model_validate(record_dict("poisson_gaussian_source_l_shape"))
    record.evaluation_metadata.reference_path = None
    kept = build_reference(record, tmp_path / "kept", ORACLE / "dolfinx", attacker)
    assert kept.kept, kept.reason
    assert record.evaluation_metadata.reference_config["attack_margin"] >= ATTACK_MARGIN

    data = record_dict("poisson_gaussian_source_l_shape")
    data["case_spec"]["domain"] = {"type": "unit_square", "bounds": [[0.0, 1.0], [0.0, 1.0]]}
    data["case_spec"]["pde"]["forcing"] = {"type": "expression", "value": "sin(pi*x)*sin(pi*y)"}
    eigen = CaseRecord.model_validate(data)
    eigen.evaluation_metadata.reference_path = None
    outcome = build_reference(eigen, tmp_path / "refused", ORACLE / "dolfinx", attacker)
    assert not outcome.kept and outcome.reason.startswith(WITHIN), outcome.reason
    assert eigen.evaluation_metadata.reference_path is None
    assert not list((tmp_path / "refused").rglob("*.npz"))
