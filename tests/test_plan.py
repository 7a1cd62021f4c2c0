"""The item's path between its plan and its verdict (issue 47), at the seams and without
runs: the placement makes the plan, the attempt loop drafts from it and judges, a PASS is
judged on the sibling the plan names, and an item whose runs were sent ahead on a cluster
is planned once."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest

from pytest_pdebench.attempts import run_attempts
from pytest_pdebench.baselines import Calibrating, Paired, Stored
from pytest_pdebench.calibration import CalibrationStore
from pytest_pdebench.fingerprints import case_fingerprint
from pytest_pdebench.cases import CaseRecord
from pytest_pdebench.evaluation import VERDICT_FILE, Verdict, _fingerprint, evaluate
from pytest_pdebench.notices import PdeBenchWarning
from pytest_pdebench.placement import NoCalibration, Placement
from pytest_pdebench.plan import ItemPlan, NoSibling, SiblingCheck
from pytest_pdebench.scheduling import RunAhead
from pytest_pdebench.settings import Settings
from pytest_pdebench.sources import Draft, Submission
from pytest_pdebench.testing import record_dict, write_calibration

SOLVER = Submission("solver.py", {"solver.py": b"def solve(case_spec): pass\n"}, "here")


def record(case_id: str = "poisson_basic") -> CaseRecord:
    return CaseRecord.model_validate(record_dict(case_id))


def plan_of(tmp_path: Path, **fields) -> ItemPlan:
    item = record()
    baseline = fields.pop("baseline", Calibrating())
    return ItemPlan(item, "dolfinx", None, tmp_path / "item", case_fingerprint(item, "dolfinx"), baseline, **fields)


class ScriptedSource:
    """Drafts the scripted submissions in turn and remembers what it was given."""

    label, attempts, attempt_folders = "scripted", 3, True

    def __init__(self, drafts):
        self.drafts, self.seen = list(drafts), []

    def draft(self, item, attempt, feedback):
        self.seen.append((item, attempt, feedback))
        return self.drafts.pop(0)

    def summary(self, history):
        return {"attempts": history}


def test_the_attempt_loop_drafts_from_the_plan_and_writes_each_attempt_and_the_item(tmp_path):
    plan = plan_of(tmp_path)
    source = ScriptedSource([Draft(None, reason="no code", audit={"prompt.md": "p"}), Draft(SOLVER), Draft(SOLVER)])
    outcomes = iter(["F-Acc", "PASS"])

    def gates(submission, attempt_dir):
        verdict = Verdict.for_item(plan.record, plan.library, "scripted", Settings(tmp_path), outcome=next(outcomes),
                                   reason="r")
        verdict.write(attempt_dir)
        return verdict

    verdict = run_attempts(source, plan, Settings(tmp_path), gates)
    assert verdict.outcome == "PASS" and [attempt for _, attempt, _ in source.seen] == [1, 2, 3]
    assert all(item is plan for item, _, _ in source.seen)  # the plan itself, not its parts
    assert source.seen[1][2].facts["outcome"] == "F-Exec" and source.seen[2][2].code == "def solve(case_spec): pass\n"
    assert [h["outcome"] for h in verdict.llm["attempts"]] == ["F-Exec", "F-Acc", "PASS"]
    assert (plan.attempt_dir(1) / "prompt.md").read_text() == "p"
    assert json.loads((plan.attempt_dir(1) / VERDICT_FILE).read_text())["reason"] == "no code"
    assert json.loads((plan.item_dir / VERDICT_FILE).read_text())["outcome"] == "PASS"


def test_the_placement_plans_an_item_with_its_thresholds_or_says_why_not(tmp_path):
    data = record_dict()
    settings = Settings(tmp_path / "out")
    store = CalibrationStore(write_calibration(tmp_path / "calibrations", "dolfinx", [data], 1e-4, 0.5))
    plan = Placement(settings, store).plan(record(), "dolfinx", tmp_path)
    assert plan.item_dir == tmp_path / "out" / "dolfinx" / "poisson_basic" and plan.case_dir == tmp_path
    assert isinstance(plan.baseline, Stored) and plan.sibling is None
    assert plan.baseline.thresholds.e_base == 1e-4 and plan.baseline.thresholds.t_base == 0.5
    assert plan.case_fingerprint == case_fingerprint(record(), "dolfinx") and plan.notes == ()
    with pytest.raises(NoCalibration, match="pdebench calibrate --library dolfinx"):
        Placement(settings, CalibrationStore(tmp_path / "none")).plan(record(), "dolfinx", tmp_path)


def test_a_plan_made_quietly_keeps_its_warnings_for_the_items_turn(tmp_path):
    data = record_dict()  # thresholds materialized from another machine's calibration, none here
    data["evaluation_metadata"]["thresholds"] = {
        "dolfinx": {"e_base": 1e-4, "t_base": 0.5, "tau_acc": 1e-3, "tau_time": 1.5, "machine": "other-machine"}
    }
    item = CaseRecord.model_validate(data)
    placement = Placement(Settings(tmp_path / "out"), CalibrationStore(tmp_path / "none"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet = placement.plan(item, "dolfinx", tmp_path, quiet=True)
    assert not caught and len(quiet.notes) == 1 and "not from the machine that times it" in quiet.notes[0]
    with pytest.warns(PdeBenchWarning, match="not from the machine that times it"):
        loud = placement.plan(item, "dolfinx", tmp_path)
    assert loud.notes == ()


def test_a_pass_is_judged_on_the_sibling_the_plan_names(tmp_path):
    """A resumed PASS (no runs here) whose sibling cannot be planned: the verdict says why,
    and the item's verdict.json has it; without a PASS the sibling is not asked for."""
    asked = []

    def no_sibling(folder):
        asked.append(folder)
        raise NoSibling("not one of the suite's designs")

    settings = Settings(tmp_path / "out", resume=True, sibling=True)
    plan = plan_of(tmp_path, sibling=SiblingCheck(1_000_007, no_sibling))
    for outcome in ("F-Acc", "PASS"):
        stored = Verdict.for_item(plan.record, plan.library, "s", settings, outcome=outcome,
                                  fingerprint=_fingerprint(plan, SOLVER, settings))  # fmt: skip
        stored.write(plan.item_dir)
        verdict = evaluate(plan, SOLVER, "s", settings)
        assert verdict.outcome == outcome
    assert asked == [plan.item_dir / "sibling"]
    expected = {"seed": 1_000_007, "outcome": None, "reason": "not one of the suite's designs"}
    assert verdict.sibling == expected
    assert json.loads((plan.item_dir / VERDICT_FILE).read_text())["sibling"] == expected


class FakeCluster:
    ahead = 4

    def __init__(self):
        self.discarded = []

    def in_flight(self):
        return 0

    def discard(self, library, case_id):
        self.discarded.append((library, case_id))


class CountingPlacement:
    def __init__(self, settings, tmp_path):
        self.settings, self.tmp_path, self.calls = settings, tmp_path, 0

    def plan(self, record, library, case_dir, machine=None, quiet=False):
        self.calls += 1
        return dataclasses.replace(plan_of(self.tmp_path), notes=("kept for the turn",) if quiet else ())


class NothingToSend:
    prefetchable, label = True, "folder"

    def draft(self, item, attempt, feedback):
        assert isinstance(item, ItemPlan) and item.item_dir is not None  # a real plan, not parts of one
        return Draft(None, reason="no solver")


def test_an_item_sent_ahead_on_a_cluster_is_planned_once(tmp_path, monkeypatch):
    monkeypatch.setattr(Settings, "runtime", lambda self, library: None)
    placement = CountingPlacement(Settings(tmp_path / "out"), tmp_path)
    ahead = RunAhead(FakeCluster(), NothingToSend(), placement)  # type: ignore[arg-type]
    item = type("Item", (), {"record": record(), "library": "dolfinx", "machine": None, "path": tmp_path / "c.jsonl"})
    ahead.prefetch([item()])
    assert placement.calls == 1
    with pytest.warns(PdeBenchWarning, match="kept for the turn"):
        plan = ahead.plan_of("poisson_basic", "dolfinx", None)
    assert plan is not None and placement.calls == 1
    assert ahead.plan_of("poisson_basic", "dolfinx", None) is None  # taken once


def test_the_baseline_beside_an_item_runs_within_the_case_s_time_limit_not_the_user_s(tmp_path):
    """--pde-timeout bounds the submission's runs; the oracle timed beside them (paired, or
    first and kept) runs at its calibration setting within the case's own limit."""
    from pytest_pdebench.evaluation import baseline_settings, run_task

    settings = Settings(output_dir=tmp_path, timeout_sec=5)
    task = run_task(plan_of(tmp_path, baseline=Paired(oracle=SOLVER)), SOLVER, settings)
    case_limit = record().evaluation_config.timeout_sec
    assert case_limit != 5
    assert task.limits.timeout_sec == 5 and task.baseline.limits.timeout_sec == case_limit
    assert task.baseline.calibration_setting is not None
    assert baseline_settings(settings).timeout_sec is None and baseline_settings(settings).calibrate


def test_a_verdict_under_moved_thresholds_does_not_resume_under_the_papers(tmp_path):
    """Issue 62: the alphas and taus an option moved are part of what a resumed verdict was earned with."""
    plan = plan_of(tmp_path)
    papers = _fingerprint(plan, SOLVER, Settings(tmp_path))
    loosened = _fingerprint(plan, SOLVER, Settings(tmp_path, gate_options=(("tau_max", 1.0),)))
    assert papers != loosened
    assert _fingerprint(plan, SOLVER, Settings(tmp_path, gate_options=(("baseline", "stored"),))) == papers


def test_each_kind_of_baseline_resumes_the_verdicts_stored_before_it_was_an_object(tmp_path):
    """A verdict's fingerprint names its baseline (the thresholds, or the oracle whose timing
    it is): these are the fingerprints the plan's five optional fields gave before the
    baseline was one object (commit 988caa3), so the verdicts of earlier runs still resume.
    A change here re-runs every stored verdict: bump HARNESS_REVISION when that is meant."""
    from pytest_pdebench.baselines import Kept
    from pytest_pdebench.thresholds import ResolvedThresholds

    oracle = Submission("solver.py", {"solver.py": b"# the oracle\n"}, "oracle")
    stored = ResolvedThresholds.from_baseline(1e-4, 0.5, 10.0, 3.0, 1e-6, 1.0, "a calibration", t_first_base=0.7)
    kinds = {
        "741dbe5cccef662f": [Calibrating()],
        "a6aa7540b2084b1a": [Stored(stored)],
        "2c7d8e9fa8b14bf7": [Paired(oracle=oracle, beside=stored)],
        # under --pde-baseline=local each kind is this machine's timing of the oracle
        "ed67ae00b67094ee": [Stored(stored, oracle.fingerprint), Kept(stored, oracle.fingerprint, beside=stored),
                             Paired(oracle=oracle, local=True, paired_because="why")],
    }
    assert plan_of(tmp_path).case_fingerprint == "c2630056f27fa99b"  # else the record changed, not the baseline
    settings = Settings(Path("/out"))
    for expected, baselines in kinds.items():
        for baseline in baselines:
            assert _fingerprint(plan_of(tmp_path, baseline=baseline), SOLVER, settings) == expected, baseline
