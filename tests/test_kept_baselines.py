"""Issue 48: baselines timed on this machine and kept between sessions
(``--pde-baseline=local``, kept_baselines.py)."""

from __future__ import annotations

import json

import pytest

from pytest_pdebench.cases import load_cases
from pytest_pdebench.kept_baselines import QUIET_SPREAD, SPEED_TOLERANCE, BaselineKey, KeptBaselines, conditions_key
from pytest_pdebench.testing import ORACLE, REPO, run_track

CONDITIONS = conditions_key({"workers": 1, "runs": 3, "sandbox": "bubblewrap", "runner": "warm", "kernel_store": 1})
KEY = BaselineKey("poisson_a_000", "f" * 16, "o" * 16, CONDITIONS)
FIGURES = {"e_base": 1e-4, "t_base": 2.0, "timed_runs": [2.0, 2.0, 2.0], "t_first_run": 3.0, "compile_sec": None}


def store(tmp_path) -> KeptBaselines:
    return KeptBaselines(tmp_path, lambda library: "this-machine")


def test_a_kept_timing_judges_later_items_while_the_machine_runs_at_its_speed(tmp_path):
    kept = store(tmp_path)
    assert kept.find("dolfinx", KEY, 0.1) is None
    assert kept.keep("dolfinx", KEY, FIGURES, probe_after=0.1, probe_quiet=0.1) == "kept for the next sessions"
    assert kept.find("dolfinx", KEY, 0.1)["t_base"] == 2.0
    assert kept.find("dolfinx", KEY, 0.1 * (1 + SPEED_TOLERANCE * 0.9)) is not None
    assert kept.find("dolfinx", KEY, 0.1 * (1 + SPEED_TOLERANCE * 1.1)) is None  # slower today: paired again
    assert kept.find("dolfinx", KEY, 0.1 / (1 + SPEED_TOLERANCE * 1.5)) is None  # faster: the same
    for other in (
        BaselineKey(KEY.case_id, "e" * 16, KEY.oracle, KEY.conditions),  # the case changed
        BaselineKey(KEY.case_id, KEY.case_fingerprint, "p" * 16, KEY.conditions),  # another oracle
        BaselineKey(KEY.case_id, KEY.case_fingerprint, KEY.oracle, CONDITIONS.replace('"workers":1', '"workers":2')),
    ):
        assert kept.find("dolfinx", other, 0.1) is None
    assert store(tmp_path).find("firedrake", KEY, 0.1) is None  # per library
    assert json.loads(kept.path("dolfinx").read_text())["entries"]  # one file per library and machine


def test_a_timing_taken_while_the_machine_was_loaded_is_not_kept(tmp_path):
    kept = store(tmp_path)
    loaded = 0.1 * (1 + QUIET_SPREAD * 2)
    said = kept.keep("dolfinx", KEY, FIGURES, probe_after=loaded, probe_quiet=0.1)
    assert said.startswith("not kept: the speed probe ran in 1.20 x") and kept.find("dolfinx", KEY, loaded) is None
    # the quietest probe is remembered: a later session that starts loaded does not keep either
    assert kept.quietest("dolfinx", CONDITIONS) == 0.1
    assert kept.keep("dolfinx", KEY, FIGURES, probe_after=loaded, probe_quiet=loaded).startswith("not kept")


def test_a_kept_timing_is_replaced_only_by_a_faster_one_at_the_same_speed(tmp_path):
    kept = store(tmp_path)
    kept.keep("dolfinx", KEY, FIGURES, probe_after=0.1, probe_quiet=0.1)
    slower = {**FIGURES, "t_base": 3.0}
    said = kept.keep("dolfinx", KEY, slower, probe_after=0.1, probe_quiet=0.1)
    assert said == "not kept: a faster timing is kept already"
    assert kept.find("dolfinx", KEY, 0.1)["t_base"] == 2.0
    faster = {**FIGURES, "t_base": 1.5}
    assert kept.keep("dolfinx", KEY, faster, probe_after=0.1, probe_quiet=0.1) == "kept for the next sessions"
    assert kept.find("dolfinx", KEY, 0.1)["t_base"] == 1.5


def test_a_damaged_file_loses_its_entries_not_the_run(tmp_path):
    kept = store(tmp_path)
    kept.path("dolfinx").parent.mkdir(parents=True)
    kept.path("dolfinx").write_text("{not json")
    assert kept.find("dolfinx", KEY, 0.1) is None
    assert kept.keep("dolfinx", KEY, FIGURES, probe_after=0.1, probe_quiet=0.1) == "kept for the next sessions"


def test_the_summary_says_whose_timing_t_base_is():
    from pytest_pdebench.report import t_base_origins

    verdicts = [{"t_base_from": "kept"}, {"t_base_from": "kept"}, {"t_base_from": "stored elsewhere"},
                {"t_base_from": "paired", "baseline": {"kept": "kept for the next sessions"}},
                {"t_base_from": "paired", "baseline": {"kept": "not kept: a faster one is kept"}}]  # fmt: skip
    assert t_base_origins(verdicts) == (
        "t_base: 2 kept from earlier sessions here, 2 paired now, 1 stored (measured on another machine); "
        "1 paired timings kept for the next sessions"
    )
    assert t_base_origins([{"outcome": "F-Exec"}]) is None


def test_local_baselines_do_not_go_with_calibration(pytester):
    result = pytester.runpytest("-p", "no:cacheprovider", "--pde-calibrate", "--pde-baseline=local")
    result.stderr.fnmatch_lines(["*--pde-baseline=local times the oracle beside a submission: not for calibration*"])


CASE = "poisson_smooth_kappa_annulus_000"  # a steady manufactured case, about 2 s a run


@pytest.mark.fem
def test_the_first_session_pairs_and_keeps_the_next_one_reuses(dolfinx_available, tmp_path, monkeypatch):
    monkeypatch.setenv("PDEBENCH_CACHE", str(tmp_path / "cache"))
    record = next(r for _, _, r in load_cases(REPO / "cases") if r.id == CASE)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(record.model_dump(mode="json", exclude_none=True)) + "\n")
    if (REPO / "cases" / "references").is_dir():
        (tmp_path / "references").symlink_to(REPO / "cases" / "references")
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir(), second_dir.mkdir()
    done, first = run_track(first_dir, "dolfinx", cases, ORACLE, "--pde-baseline=local", "--pde-runs=2")
    assert first[CASE]["outcome"] == "PASS", done.stdout[-2000:]
    assert first[CASE]["t_base_from"] == "paired" and first[CASE]["baseline"]["t_base"] > 0
    assert "t_base: 1 paired now" in done.stdout
    said = first[CASE]["baseline"]["kept"]
    kept = json.loads(next((tmp_path / "cache" / "baselines" / "dolfinx").glob("*.json")).read_text())
    done, second = run_track(second_dir, "dolfinx", cases, ORACLE, "--pde-baseline=local", "--pde-runs=2")
    assert second[CASE]["outcome"] == "PASS", done.stdout[-2000:]
    assert first[CASE]["baseline"]["paired_because"].startswith("no baseline of this machine")
    if said == "kept for the next sessions" and second[CASE]["t_base_from"] == "paired":
        # the probe drifted past SPEED_TOLERANCE between the sessions (a loaded machine)
        assert second[CASE]["baseline"]["paired_because"].startswith("the kept baseline was timed at another speed")
    elif said == "kept for the next sessions":
        [entry] = kept["entries"].values()
        assert second[CASE]["t_base_from"] == "kept" and second[CASE]["baseline"] is None
        assert second[CASE]["t_base"] == pytest.approx(entry["t_base"])
        assert entry["t_base"] == pytest.approx(first[CASE]["baseline"]["t_base"])
        assert second[CASE]["calibration"].startswith("kept baseline (paired on ")
    else:  # a loaded machine: nothing kept, so the next session pairs again
        assert said.startswith("not kept: the speed probe") and not kept["entries"]
        assert second[CASE]["t_base_from"] == "paired"
    # the first session again, resumed (as after an interruption): its verdict, paired then, is read
    # back whether its timing was kept meanwhile or not, not earned again against the kept figures
    done, resumed = run_track(first_dir, "dolfinx", cases, ORACLE, "--pde-baseline=local", "--pde-runs=2",
                              "--pde-resume")  # fmt: skip
    assert resumed[CASE]["resumed"] and resumed[CASE]["t_base_from"] == "paired", done.stdout[-2000:]
    assert resumed[CASE]["t_agent"] == first[CASE]["t_agent"]
