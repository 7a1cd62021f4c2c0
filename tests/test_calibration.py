"""Thresholds, calibration files and calibration mode (the oracle's baselines)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_pdebench.thresholds import Alphas, ResolvedThresholds, check_baseline
from pytest_pdebench.calibration import CalibrationStore
from pytest_pdebench.fingerprints import case_fingerprint
from pytest_pdebench.machine import machine_key
from pytest_pdebench.cases import CaseRecord
from pytest_pdebench.testing import NUMPY_PRELUDE, REPO, record_dict, write_jsonl


def record(**changes) -> CaseRecord:
    data = record_dict()
    data["evaluation_config"].update(changes)
    return CaseRecord.model_validate(data)


def test_thresholds_follow_equation_2():
    resolved = ResolvedThresholds.from_baseline(2e-4, 1.5, 10, 3, 1e-6, 8e-3, "x")
    assert resolved.tau_acc == pytest.approx(2e-3)
    assert resolved.tau_time == pytest.approx(4.5)
    assert ResolvedThresholds.from_baseline(1e-9, 1.0, 10, 3, 1e-6, 8e-3, "x").tau_acc == 1e-6  # the floor
    assert ResolvedThresholds.from_baseline(4e-2, 1.0, 10, 3, 1e-6, 8e-3, "x").tau_acc == 8e-3  # the cap


def test_option_alphas_override_the_case():
    assert Alphas().resolve(record(alpha_acc=20)) == (20, 3, 1e-6, 8e-3)
    assert Alphas(alpha_acc=5, tau_min=1e-3, tau_max=1).resolve(record(alpha_acc=20)) == (5, 3, 1e-3, 1)


@pytest.mark.parametrize("e_base, t_base, info, norm, problem", [
    (1e-4, 1.0, {"converged": True}, 10.0, None),
    (float("nan"), 1.0, {}, 10.0, "not finite"),
    (1e-4, 1.0, {"converged": False, "converged_reason": -3}, 10.0, "did not converge (-3)"),
    (0.2, 1.0, {}, 10.0, "an all-zero field would pass"),
    (1e-4, 1.0, {}, 1e-12, "reference field is ~0"),
    (1e-4, 150.0, {}, 10.0, "exceeds the case timeout"),
])
def test_baselines_that_cannot_define_thresholds_are_rejected(e_base, t_base, info, norm, problem):
    found = check_baseline(
        record(), "dolfinx", e_base=e_base, t_base=t_base, solver_info=info, reference_norm=norm, alphas=Alphas()
    )
    assert (found is None) if problem is None else (problem in found)


def test_a_baseline_that_ignored_its_calibration_setting_is_rejected():
    data = record_dict()
    data["evaluation_metadata"]["calibration_config"] = {
        "source": "drawn", "settings": {"dolfinx": {"element_degree": 1, "cells_per_side": 120}}}
    item = CaseRecord.model_validate(data)

    def check(e_base, info):
        return check_baseline(item, "dolfinx", e_base=e_base, t_base=1.0, solver_info=info, reference_norm=10.0,
                              alphas=Alphas())  # fmt: skip

    assert "ran degree 2, not its calibration setting's 1" in check(3e-6, {"element_degree": 2})
    assert check(3e-4, {"element_degree": 1}) is None
    assert check(3e-4, {}) is None  # flows report no degree


def test_store_merges_entries_and_ignores_stale_fingerprints(tmp_path):
    store = CalibrationStore(tmp_path, machine="test-machine")
    fresh = record()
    store.write("dolfinx", {fresh.id: {"e_base": 1e-4, "t_base": 2.0, "fingerprint": case_fingerprint(fresh, "dolfinx")}})
    store.write("dolfinx", {"other": {"e_base": 1.0, "t_base": 1.0, "fingerprint": "x"}})
    saved = json.loads((tmp_path / "dolfinx" / "test-machine.json").read_text())
    assert set(saved["cases"]) == {fresh.id, "other"} and saved["machine"] == "test-machine"
    assert store.thresholds(fresh, "dolfinx", Alphas()).tau_time == pytest.approx(6.0)

    edited = record_dict()
    edited["case_spec"]["eval_grid"]["nx"] = 51
    assert store.thresholds(CaseRecord.model_validate(edited), "dolfinx", Alphas()) is None



def test_a_partial_recalibration_under_other_conditions_keeps_the_file_conditions_of_most(tmp_path):
    store = CalibrationStore(tmp_path, machine="test-machine")
    one_run, three_runs = {"workers": 2, "runs": 1}, {"workers": 2, "runs": 3}
    store.write("dolfinx", {f"c{i}": {"e_base": 1e-4, "t_base": 1.0, "fingerprint": "x"} for i in range(3)}, one_run)
    store.write("dolfinx", {"c0": {"e_base": 1e-4, "t_base": 1.1, "fingerprint": "x"}}, three_runs)
    saved = json.loads((tmp_path / "dolfinx" / "test-machine.json").read_text())
    assert store.conditions("dolfinx") == one_run  # two of three baselines
    assert saved["cases"]["c0"]["conditions"] == three_runs and saved["cases"]["c1"]["conditions"] == one_run

def test_record_thresholds_are_the_fallback_with_their_machine(tmp_path):
    data = record_dict()
    data["evaluation_metadata"]["thresholds"] = {"dolfinx": {"e_base": 1e-5, "t_base": 0.5, "tau_acc": 1e-4,
                                                             "tau_time": 1.5, "machine": "elsewhere"}}
    resolved = CalibrationStore(tmp_path, machine="here").thresholds(CaseRecord.model_validate(data), "dolfinx",
                                                                     Alphas())
    assert resolved.foreign_machine and "elsewhere" in resolved.source
    assert resolved.tau_acc == pytest.approx(1e-4)


def test_a_baseline_of_one_runtime_never_judges_another(tmp_path):
    data = record_dict()
    data["evaluation_metadata"]["thresholds"] = {"dolfinx": {"e_base": 1e-5, "t_base": 0.5, "tau_acc": 1e-4,
                                                             "tau_time": 1.5, "machine": "here"}}
    host_measured = CaseRecord.model_validate(data)
    in_container = CalibrationStore(tmp_path, machine="here", runtime_tag=lambda library: "docker-0123abcd")
    assert in_container.path("dolfinx").name == "here+docker-0123abcd.json"
    assert in_container.thresholds(host_measured, "dolfinx", Alphas()) is None
    data["evaluation_metadata"]["thresholds"]["dolfinx"]["machine"] = "here+docker-0123abcd"
    container_measured = CaseRecord.model_validate(data)
    assert not in_container.thresholds(container_measured, "dolfinx", Alphas()).foreign_machine
    assert CalibrationStore(tmp_path, machine="here").thresholds(container_measured, "dolfinx", Alphas()) is None


def test_machine_key_is_stable_and_overridable(monkeypatch):
    assert machine_key() == machine_key()
    monkeypatch.setenv("PDEBENCH_MACHINE", "lab-node-7")
    assert machine_key() == "lab-node-7"


SOLVER = NUMPY_PRELUDE + """
def solve(case_spec):
    x, y, u = grid(case_spec)
    EXTRA
    write(u * (1 + SCALE * np.cos(7 * x)), x, y)
"""


@pytest.mark.usefixtures("dolfinx_available")
def test_calibration_mode_writes_good_baselines_and_rejects_bad_ones(tmp_path):
    solvers = tmp_path / "oracle" / "dolfinx"
    solvers.mkdir(parents=True)
    cases = {"good": ("1e-3", ""), "too_rough": ("0.5", ""), "slowish": ("1e-3", "import time; time.sleep(0.3)")}
    for name, (scale, extra) in cases.items():
        (solvers / f"{name}.py").write_text(SOLVER.replace("SCALE", scale).replace("EXTRA", extra))
    write_jsonl(tmp_path / "cases.jsonl", [record_dict(new_id=name, nx=20, ny=20) for name in cases])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-calibrate", "--pde-library=dolfinx",
         f"--pde-cases={tmp_path / 'cases.jsonl'}", f"--pde-submissions={tmp_path / 'oracle'}", "--pde-runs=2",
         f"--pde-calibrations={tmp_path / 'calibrations'}", f"--pde-output={tmp_path / 'out'}", "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "1 failed, 2 passed" in done.stdout, done.stdout[-2000:]
    assert "baseline rejected: tau_acc" in done.stdout
    written = json.loads((tmp_path / "calibrations" / "dolfinx" / f"{machine_key()}.json").read_text())["cases"]
    assert set(written) == {"good", "slowish"}
    assert 1e-4 < written["good"]["e_base"] < 1e-2
    assert len(written["slowish"]["timed_runs"]) == 2
    assert written["slowish"]["t_base"] >= 0.3 > written["good"]["t_base"]
    assert written["good"]["speed_probe_sec"] == written["slowish"]["speed_probe_sec"] > 0  # one probe a session


@pytest.mark.usefixtures("dolfinx_available")
def test_timeout_option_kills_a_slow_run_as_f_exec(tmp_path):
    solvers = tmp_path / "s" / "dolfinx"
    solvers.mkdir(parents=True)
    (solvers / "solver.py").write_text("import time\n\ndef solve(case_spec):\n    time.sleep(30)\n")
    data = record_dict(nx=20, ny=20)
    data["evaluation_metadata"]["thresholds"] = {"dolfinx": {"e_base": 1e-4, "t_base": 5, "tau_acc": 1e-3,
                                                             "tau_time": 15, "machine": machine_key()}}
    write_jsonl(tmp_path / "cases.jsonl", [data])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx", "--pde-timeout=2",
         f"--pde-cases={tmp_path / 'cases.jsonl'}", f"--pde-submissions={tmp_path / 's'}",
         f"--pde-calibrations={tmp_path / 'none'}", f"--pde-output={tmp_path / 'out'}", "-q",
         "--pde-baseline=stored"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "F-Exec: timed out after 2." in done.stdout, done.stdout[-2000:]


def test_update_cases_materializes_thresholds_into_records(tmp_path):
    from pytest_pdebench.calibration import materialize_case_files
    from pytest_pdebench.cases import load_cases

    data = record_dict()
    write_jsonl(tmp_path / "cases.jsonl", [data, record_dict(new_id="uncalibrated")])
    store = CalibrationStore(tmp_path / "calibrations")
    fingerprint = case_fingerprint(CaseRecord.model_validate(data), "dolfinx")
    entry = {"e_base": 2e-5, "t_base": 0.4, "calibrated_at": "2026-01-01", "t_first_run": 0.9, "fingerprint": fingerprint}
    store.write("dolfinx", {"poisson_basic": entry})  # a first run timed with a kept store: no base
    record = CaseRecord.model_validate(data)
    assert store.thresholds(record, "dolfinx", Alphas()).tau_first is None
    store = CalibrationStore(tmp_path / "calibrations")
    store.write("dolfinx", {"poisson_basic": entry}, conditions={"kernel_store": "per-item"})
    assert store.thresholds(record, "dolfinx", Alphas()).tau_first == pytest.approx(2.7)  # the first-run gate's
    materialize_case_files(tmp_path / "cases.jsonl", "dolfinx", tmp_path / "calibrations")
    records = {r.id: r for _, _, r in load_cases(tmp_path / "cases.jsonl")}
    stored = records["poisson_basic"].evaluation_metadata.thresholds["dolfinx"]
    assert (stored.tau_acc, stored.tau_time, stored.machine) == (pytest.approx(2e-4), pytest.approx(1.2), machine_key())
    assert stored.t_first_base == 0.9  # another machine judges its first run by it
    assert records["uncalibrated"].evaluation_metadata.thresholds == {}
    other = CalibrationStore(tmp_path / "elsewhere", machine="another-machine")
    foreign = other.thresholds(records["poisson_basic"], "dolfinx", Alphas())
    assert foreign.foreign_machine and foreign.tau_first == pytest.approx(2.7)


@pytest.mark.usefixtures("dolfinx_available")
def test_only_calibration_runs_get_the_calibration_settings(tmp_path):
    """The oracle calibrates with the record's setting (P1 on 16 cells here) and
    evaluates with its own strong one; the setting never reaches an evaluation run."""
    data = record_dict(nx=20, ny=20)
    data["evaluation_metadata"]["calibration_config"] = {
        "source": "test", "settings": {"dolfinx": {"element_degree": 1, "cells_per_side": 16}}}
    write_jsonl(tmp_path / "cases.jsonl", [data])
    common = ["-p", "no:cacheprovider", "--pde-library=dolfinx", f"--pde-cases={tmp_path / 'cases.jsonl'}",
              f"--pde-submissions={REPO / 'submissions' / 'oracle'}", "--pde-runs=1",
              f"--pde-calibrations={tmp_path / 'calibrations'}", "-q"]
    verdicts = {}
    for mode in ("calibration", "evaluation"):
        # the strong oracle outlasts a P1/16 baseline's 3 x t_base: time is not what this test is about
        extra = ["--pde-calibrate"] if mode == "calibration" else ["--pde-alpha-time=1000"]
        done = subprocess.run([sys.executable, "-m", "pytest", *common, *extra, f"--pde-output={tmp_path / mode}"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert "1 passed" in done.stdout, done.stdout[-2000:]
        verdicts[mode] = json.loads((tmp_path / mode / "dolfinx" / "poisson_basic" / "verdict.json").read_text())
    calibration, evaluation = verdicts["calibration"], verdicts["evaluation"]
    assert calibration["solver_info"]["element_degree"] == 1 and calibration["solver_info"]["mesh_resolution"] == 16
    assert evaluation["solver_info"]["element_degree"] == 2 and evaluation["solver_info"]["mesh_resolution"] == 48
    assert evaluation["error"] < calibration["error"] / 100  # the strong oracle is the always-PASS anchor
    assert evaluation["e_base"] == pytest.approx(calibration["error"])


def test_a_setting_changed_for_one_library_keeps_the_other_libraries_baselines():
    data = record_dict()
    data["evaluation_metadata"]["calibration_config"] = {
        "source": "test", "settings": {lib: {"element_degree": 1, "cells_per_side": 64, "solver": "direct"}
                                       for lib in ("dolfinx", "dealii")}}
    before = CaseRecord.model_validate(data)
    data["evaluation_metadata"]["calibration_config"]["settings"]["dealii"]["cells_per_side"] = 32
    after = CaseRecord.model_validate(data)
    assert case_fingerprint(after, "dolfinx") == case_fingerprint(before, "dolfinx")
    assert case_fingerprint(after, "dealii") != case_fingerprint(before, "dealii")


def test_strong_oracle_errors_survive_a_new_calibration_and_go_stale_with_the_case(tmp_path):
    store = CalibrationStore(tmp_path, machine="test-machine")
    fresh = record()
    store.write_strong_oracle("dolfinx", {fresh.id: {"e_strong": 3e-6, "fingerprint": case_fingerprint(fresh, "dolfinx"),
                                                     "oracle": "code-v1"}})
    store.write("dolfinx", {fresh.id: {"e_base": 1e-4, "t_base": 2.0, "fingerprint": case_fingerprint(fresh, "dolfinx")}})
    assert CalibrationStore(tmp_path, machine="test-machine").strong_oracle(fresh, "dolfinx")["e_strong"] == 3e-6
    assert store.strong_oracle(fresh, "dolfinx", "code-v1")["e_strong"] == 3e-6
    assert store.strong_oracle(fresh, "dolfinx", "code-v2") is None  # measured with other oracle code
    edited = record_dict()
    edited["case_spec"]["eval_grid"]["nx"] = 51
    assert store.strong_oracle(CaseRecord.model_validate(edited), "dolfinx") is None


def test_the_oracle_fingerprint_follows_its_code():
    from pytest_pdebench.sources.folder import oracle_fingerprint

    case = record()
    assert oracle_fingerprint(case, "dolfinx") != oracle_fingerprint(case, "dealii")
    assert oracle_fingerprint(case, "dolfinx") == oracle_fingerprint(record(), "dolfinx")


def test_summary_flags_a_strong_oracle_far_from_the_reference():
    from pytest_pdebench.report import _reference_agreement

    rows = [{"id": f"c{i}", "method": "reference_numerical", "tau_acc": 1e-3, "e_strong": e}
            for i, e in enumerate([1e-5, 5e-5])]
    assert _reference_agreement(rows).startswith("ok ")
    rows.append({"id": "far", "method": "reference_numerical", "tau_acc": 1e-3, "e_strong": 4e-4})
    line = _reference_agreement(rows)
    assert line.startswith("OFF") and "far: 0.40 x tau_acc" in line
    rows.append({"id": "unmeasured", "method": "reference_numerical", "tau_acc": 1e-3, "e_strong": None})
    assert "1 not measured" in _reference_agreement(rows[:2] + rows[3:])
    # the reference build's own level 1 against level 2 bounds the reference's error: it is
    # the figure wherever the track built the reference, whatever its (leaner) anchor measured
    rows[-1]["e_strong_build"] = 2e-4
    line = _reference_agreement(rows[:2] + rows[3:])
    assert line.startswith("OFF") and "0 not measured; 1 from the reference build" in line
    assert "unmeasured: 0.20 x tau_acc" in line
    rows[-1]["e_strong"] = 4e-4
    assert "unmeasured: 0.20 x tau_acc" in _reference_agreement(rows[:2] + rows[3:])


def test_summary_flags_records_the_strong_oracle_does_not_pass_with_room():
    from pytest_pdebench.report import _anchor

    rows = [{"id": f"c{i}", "tau_acc": 1e-3, "e_strong": e, "outcome_strong": "PASS"} for i, e in enumerate([1e-5, 4e-4])]
    assert _anchor(rows).startswith("ok ")
    rows.append({"id": "tight", "tau_acc": 1e-3, "e_strong": 7e-4, "outcome_strong": "PASS"})
    line = _anchor(rows)
    assert line.startswith("OFF") and "tight: error 0.70 x tau_acc" in line and "within 0.5 x tau_acc on 2" in line
    slow = [*rows[:2], {"id": "slow", "tau_acc": 1e-3, "e_strong": 1e-5, "outcome_strong": "F-Time"}]
    assert _anchor(slow).startswith("OFF") and "PASSes 2 of 3" in _anchor(slow)
    assert "1 not measured" in _anchor([*rows[:2], {"id": "x", "tau_acc": 1e-3, "e_strong": None}])


def test_a_baseline_more_accurate_than_the_strong_oracle_gets_a_coarser_mesh():
    from pytest_pdebench.authoring.calibration_configs import COARSEN_CEILING, coarsened

    p2 = {"element_degree": 2, "cells_per_side": 240, "solver": "direct"}
    # aimed at the strong oracle's error with e ~ h^4 for P2: 3.5e-6 -> 3.5e-4 is 100x, h x 100^(1/4)
    assert coarsened(p2, 3.5e-6, 3.5e-4, 2) == {**p2, "cells_per_side": 75}
    # the aim is never where the next refinement pass (e_base >= 1e-3) would undo it
    assert coarsened(p2, 3.5e-6, 5e-2, 2) == coarsened(p2, 3.5e-6, COARSEN_CEILING, 2)
    # P1: e ~ h^2
    assert coarsened({**p2, "element_degree": 1}, 1e-5, 1e-4, 2)["cells_per_side"] == 75
    # a baseline at rounding level reproduced the reference's discretization: half the mesh
    assert coarsened(p2, 2e-8, 1e-3, 2)["cells_per_side"] == 120
    # not more accurate than the anchor, or already at the coarsest mesh: unchanged
    assert coarsened(p2, 5e-4, 3e-4, 2) is None
    assert coarsened({**p2, "cells_per_side": 8}, 1e-6, 1e-4, 2) is None


def test_calibration_configs_coarsen_uses_the_stored_strong_oracle_and_keeps_adjusted_settings(tmp_path):
    from pytest_pdebench.cases import iter_case_file

    data = record_dict()
    setting = {"element_degree": 2, "cells_per_side": 240, "solver": "direct"}
    data["evaluation_metadata"]["calibration_config"] = {
        "source": "test", "settings": {"dolfinx": dict(setting), "dealii": {**setting, "cells_per_side": 100}}}
    fine = CaseRecord.model_validate(data)
    cases = tmp_path / "cases.jsonl"
    write_jsonl(cases, [data])
    store = CalibrationStore(tmp_path / "calibrations")
    fingerprint = case_fingerprint(fine, "dolfinx")
    store.write("dolfinx", {fine.id: {"e_base": 3.5e-6, "t_base": 2.0, "fingerprint": fingerprint}})
    from pytest_pdebench.sources.folder import oracle_fingerprint

    store.write_strong_oracle("dolfinx", {fine.id: {"e_strong": 3.5e-4, "t_strong": 1.0, "outcome": "F-Acc",
                                                    "fingerprint": fingerprint,
                                                    "oracle": oracle_fingerprint(fine, "dolfinx")}})
    done = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "calibration-configs", str(cases),
                           "--coarsen", "dolfinx", "--calibrations", str(tmp_path / "calibrations")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [(_, after)] = list(iter_case_file(cases))
    config = after.evaluation_metadata.calibration_config
    # tau_acc = 10 x e_base = 3.5e-5 leaves the oracle's 3.5e-4 no room; it fits at 0.5 x tau_acc
    # once e_base = 7e-5: aimed 1.5x above, 1.05e-4 = 30 x e_base, so h x 30^(1/4): 240 -> 102
    assert config.settings["dolfinx"].cells_per_side == 102
    assert config.settings["dealii"].cells_per_side == 100  # deal.II's own setting differed: kept
    assert "coarsened from P2/240 to P2/102" in config.source


def test_regenerating_a_case_file_keeps_settings_refined_since_unless_the_case_changed(tmp_path):
    from pytest_pdebench.authoring.rebuilds import rewrite_case_file
    from pytest_pdebench.cases import iter_case_file

    built = record_dict()
    built["evaluation_metadata"]["calibration_config"] = {
        "source": "drawn; refined from P1/64 to P2/64", "settings": {"dolfinx": {"element_degree": 2, "cells_per_side": 64}}}
    path = write_jsonl(tmp_path / "cases.jsonl", [built])
    drawn = record_dict()
    drawn["evaluation_metadata"]["calibration_config"] = {
        "source": "drawn", "settings": {"dolfinx": {"element_degree": 1, "cells_per_side": 64}}}
    rewrite_case_file(path, [CaseRecord.model_validate(drawn)])
    [(_, kept)] = list(iter_case_file(path))
    assert kept.evaluation_metadata.calibration_config.source == "drawn; refined from P1/64 to P2/64"
    # the generator dealt the record more libraries: their drawn settings join, moved by the
    # steps the others took together where the draw is where those started (firedrake's)
    gained = record_dict()
    gained["evaluation_metadata"]["calibration_config"] = {"source": "drawn", "settings": {
        "dolfinx": {"element_degree": 1, "cells_per_side": 64}, "dealii": {"element_degree": 1, "cells_per_side": 48},
        "firedrake": {"element_degree": 1, "cells_per_side": 64}}}
    rewrite_case_file(path, [CaseRecord.model_validate(gained)])
    [(_, joined)] = list(iter_case_file(path))
    settings = joined.evaluation_metadata.calibration_config.settings
    assert settings["dolfinx"].element_degree == 2 and settings["dealii"].cells_per_side == 48
    assert (settings["firedrake"].element_degree, settings["firedrake"].cells_per_side) == (2, 64)
    assert settings["dealii"].element_degree == 1  # a draw elsewhere: the step did not start there
    assert joined.evaluation_metadata.calibration_config.source == "drawn; refined from P1/64 to P2/64"
    changed = record_dict(nx=51)
    changed["evaluation_metadata"]["calibration_config"] = drawn["evaluation_metadata"]["calibration_config"]
    rewrite_case_file(path, [CaseRecord.model_validate(changed)])
    [(_, redrawn)] = list(iter_case_file(path))
    assert redrawn.evaluation_metadata.calibration_config.source == "drawn"


def test_a_case_rebuilt_with_its_terms_printed_in_another_order_keeps_its_text_and_baselines(tmp_path):
    from pytest_pdebench.authoring.rebuilds import rewrite_case_file
    from pytest_pdebench.cases import iter_case_file

    built = record_dict()
    built["case_spec"]["pde"]["forcing"]["value"] = "x + 2*pi**2*sin(pi*x)*sin(pi*y)"
    built["evaluation_metadata"]["reference_config"] = {"method": "built once"}
    path = write_jsonl(tmp_path / "cases.jsonl", [built])
    reordered = record_dict()  # sympy printed the same sum the other way round
    reordered["case_spec"]["pde"]["forcing"]["value"] = "2*pi**2*sin(pi*x)*sin(pi*y) + x"
    rewrite_case_file(path, [CaseRecord.model_validate(reordered)])
    [(_, kept)] = list(iter_case_file(path))
    assert kept.case_spec.pde.forcing.value == "x + 2*pi**2*sin(pi*x)*sin(pi*y)"  # the fingerprints' text
    assert kept.evaluation_metadata.reference_config == {"method": "built once"}
    changed = record_dict()
    changed["case_spec"]["pde"]["forcing"]["value"] = "2*pi**2*sin(pi*x)*sin(pi*y) + y"
    rewrite_case_file(path, [CaseRecord.model_validate(changed)])
    [(_, rebuilt)] = list(iter_case_file(path))
    assert rebuilt.case_spec.pde.forcing.value.endswith("+ y") and rebuilt.evaluation_metadata.reference_config is None


def test_a_machine_whose_speed_changed_since_the_calibration_is_named_in_the_header(tmp_path):
    from pytest_pdebench.speed import SPEED_TOLERANCE, drift, drift_problem, probe_seconds

    now = probe_seconds()
    assert 0 < now < 5
    assert drift(now, []) is None and drift_problem("dolfinx", None) is None
    assert drift_problem("dolfinx", drift(now, [now * (1 + SPEED_TOLERANCE / 2)])) is None
    slower = drift_problem("dolfinx", drift(now, [now / 1.6, now / 1.6, now]))
    assert "1.60 x the time" in slower and "slower now" in slower and "pdebench calibrate --library dolfinx" in slower
    assert "faster now" in drift_problem("firedrake", drift(now, [now / 0.6]))


def test_the_calibration_summary_names_the_days_and_the_probe_spread_of_its_baselines():
    from pytest_pdebench.speed import baselines_line

    one_day = {"a": {"calibrated_at": "2026-11-25T04:20:00Z", "speed_probe_sec": 0.100},
               "b": {"calibrated_at": "2026-11-25T05:10:00Z", "speed_probe_sec": 0.104}}
    line = baselines_line(one_day)
    assert "baselines: 2, measured 2026-11-25;" in line and "with 2 of them" in line and "(within 15%" in line
    mixed = {**one_day, "c": {"calibrated_at": "2026-11-23T10:00:00Z", "speed_probe_sec": 0.160}, "d": {}}
    line = baselines_line(mixed)
    assert "measured 2026-11-23 to 2026-11-25" in line and "with 3 of them" in line and "NOT within 15%" in line
    assert "1 timed before the probe existed" in line and "before the probe" not in baselines_line(one_day)
    assert "none carries a speed probe" in baselines_line({"old": {"calibrated_at": "2026-11-23T10:00:00Z"}})


def test_the_calibration_summary_of_thresholds_stored_in_the_records_alone(tmp_path):
    # no calibration file on this machine: every row's thresholds are the records' own
    done = subprocess.run(
        [sys.executable, "-m", "pytest_pdebench.cli", "calibration-summary", "--library", "dolfinx",
         "--calibrations", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "runtime baselines: 0, no dates" in done.stdout
    assert "from the records' stored thresholds, measured elsewhere" in done.stdout


def test_the_report_header_warns_when_the_baselines_were_timed_on_a_faster_machine(tmp_path):
    (tmp_path / "solvers" / "dolfinx").mkdir(parents=True)
    # a track with a solver: a folder with none for dolfinx has its items not run, and no warning
    (tmp_path / "solvers" / "dolfinx" / "poisson_basic.py").write_text("def solve(case_spec):\n    pass\n")
    write_jsonl(tmp_path / "cases.jsonl", [record_dict()])
    store = CalibrationStore(tmp_path / "calibrations")
    fresh = record()
    store.write("dolfinx", {fresh.id: {"e_base": 1e-4, "t_base": 2.0, "fingerprint": case_fingerprint(fresh, "dolfinx"),
                                       "speed_probe_sec": 1e-4}})  # a probe no machine runs that fast
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "--pde-library=dolfinx",
         f"--pde-cases={tmp_path / 'cases.jsonl'}", f"--pde-submissions={tmp_path / 'solvers'}",
         f"--pde-calibrations={tmp_path / 'calibrations'}", "--pde-baseline=stored"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "pdebench WARNING: dolfinx: this machine runs the speed probe in" in done.stdout, done.stdout[-2000:]
    assert "slower now" in done.stdout
