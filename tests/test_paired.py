"""Issue 39 in runs: paired baselines (the oracle timed beside the submission), items on
their live variants, the sibling check, and resuming such runs."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from pytest_pdebench.analysis.runs import Run, json_report_verdicts, row_of
from pytest_pdebench.analysis.tables import live_table
from pytest_pdebench.cases import load_cases
from pytest_pdebench.execution import ItemRun, RunTask, execute
from pytest_pdebench.grid import EvalGrid
from pytest_pdebench.reference import reference_fields
from pytest_pdebench.sandbox import Limits
from pytest_pdebench.sources import Submission
from pytest_pdebench.testing import NUMPY_PRELUDE, ORACLE, REPO, run_track, toy_cases, verdict

CASE = "poisson_smooth_kappa_annulus_000"  # a steady manufactured case, about 2 s a run

# writes the toy exact solution and, in solver_info, the names in its working folder
LISTING_SOLVER = (
    NUMPY_PRELUDE
    + """
import os

def solve(case_spec):
    files = sorted(os.listdir("."))
    x, y, u = grid(case_spec)
    np.savez("solution.npz", u=u, x=x, y=y)
    json.dump({"wall_time_sec": 0.01, "status": "success", "solver_info": {"files": files}}, open("meta.json", "w"))
"""
)


def lookup_solver(case_id: str) -> str:
    """A solver that passes by lookup: it writes the published record's answer on its grid
    (what a model trained on the suite, or an agent that read its evaluator's files, could
    embed): the exact solution with its solve-only part, as the evaluator compares it."""
    path, _, record = next(entry for entry in load_cases(REPO / "cases") if entry[2].id == case_id)
    grid = EvalGrid.from_spec(record.case_spec.eval_grid.model_dump(exclude_none=True))
    answer = np.nan_to_num(reference_fields(record, grid, path.parent)[..., 0]).tolist()
    return f"""import json
import numpy

ANSWER = {answer!r}

def solve(case_spec):
    g = case_spec["eval_grid"]
    x = numpy.linspace(g["bbox"][0], g["bbox"][1], g["nx"])
    y = numpy.linspace(g["bbox"][2], g["bbox"][3], g["ny"])
    numpy.savez("solution.npz", u=numpy.array(ANSWER), x=x, y=y)
    json.dump({{"wall_time_sec": 0.01, "status": "success", "solver_info": {{}}}}, open("meta.json", "w"))
"""


@pytest.mark.fem
def test_paired_runs_alternate_in_the_same_sandbox(dolfinx_available, tmp_path, monkeypatch):
    """The oracle's gated run comes first, then the submission's; the timed runs alternate,
    the submission first in odd rounds; only the oracle's folder has the calibration setting."""
    order = []
    real_run = ItemRun.run

    def recording(self, harvest_kernels=False):
        order.append(self.task.submission.origin + (" gated" if harvest_kernels else ""))
        return real_run(self, harvest_kernels)

    monkeypatch.setattr(ItemRun, "run", recording)
    spec = {"case_spec": {"eval_grid": {"nx": 9, "ny": 9, "bbox": [0, 1, 0, 1]}}}
    limits = Limits(timeout_sec=120, memory_mb=4096)

    def task(origin: str, **extra) -> RunTask:
        submission = Submission("solver.py", {"solver.py": LISTING_SOLVER.encode()}, origin=origin)
        return RunTask("dolfinx", "toy", spec, ("u",), submission, limits, 3, "bubblewrap", "warm", **extra)

    oracle = task("oracle", calibration_setting={"mesh_resolution": 8})
    done = execute(task("submission", baseline=oracle), tmp_path)
    assert done.baseline is not None and done.baseline.ran, (done.baseline.stderr[-500:], done.baseline.output_failure)
    rounds = ["submission", "oracle", "oracle", "submission", "submission", "oracle"]
    assert order == ["oracle gated", "submission gated", *rounds]
    assert len(done.timed_runs) == 3 and done.baseline is not None and len(done.baseline.timed_runs) == 3
    files = {side: json.loads(d.meta)["solver_info"]["files"] for side, d in (("s", done), ("o", done.baseline))}
    assert "calibration_config.json" in files["o"] and "calibration_config.json" not in files["s"]


@pytest.mark.fem
def test_a_paired_item_takes_its_thresholds_from_the_oracle_beside_it(dolfinx_available, tmp_path):
    done, outcomes = run_track(tmp_path, "dolfinx", REPO / "cases", ORACLE, "--pde-baseline=paired", "--pde-runs=2",
                               "-k", CASE)
    v = outcomes[CASE]
    assert v["outcome"] == "PASS", done.stdout[-2000:]
    base = v["baseline"]
    assert v["calibration"] == "paired oracle" and base["submission"].endswith("oracle/dolfinx/poisson.py")
    assert v["e_base"] == base["error"] and v["tau_acc"] == pytest.approx(10 * base["error"])
    assert len(base["timed_runs"]) == 2 and v["t_base"] == pytest.approx(statistics.fmean(base["timed_runs"]))
    assert v["tau_time"] == pytest.approx(3 * v["t_base"])
    assert v["variant_seed"] is None and v["sibling"] is None
    # the weaker calibration setting, not the oracle's own: the published baseline's error again
    record = next(r for _, _, r in load_cases(REPO / "cases") if r.id == CASE)
    setting = record.evaluation_metadata.calibration_config.settings["dolfinx"]
    assert base["solver_info"]["element_degree"] == setting.element_degree != v["solver_info"]["element_degree"]


@pytest.mark.fem
def test_variants_defeat_a_lookup_solver_and_the_sibling_check_catches_it(dolfinx_available, tmp_path):
    """A solver that writes the published exact solution passes the published case, fails
    its variant, and fails the sibling check on the published case; the oracle passes
    all three; a resumed variant run reuses its verdicts."""
    folder = tmp_path / "lookup" / "dolfinx"
    folder.mkdir(parents=True)
    (folder / f"{CASE}.py").write_text(lookup_solver(CASE))
    common = ("--pde-runs=1", "-k", CASE)
    done, published = run_track(tmp_path / "a", "dolfinx", REPO / "cases", folder.parent, "--pde-baseline=paired",
                                "--pde-sibling", *common)
    v = published[CASE]
    assert v["outcome"] == "PASS" and v["error"] < 1e-6, done.stdout[-2000:]
    assert v["sibling"]["outcome"] == "F-Acc" and v["sibling"]["seed"] == 1_000_000, v["sibling"]

    done, varied = run_track(tmp_path / "b", "dolfinx", REPO / "cases", folder.parent, "--pde-variants=1", *common)
    v = varied[CASE]
    assert v["outcome"] == "F-Acc" and v["variant_seed"] == 1 and v["calibration"] == "paired oracle", v["reason"]

    for attempt in ("first", "resumed"):
        done, oracle = run_track(tmp_path / "c", "dolfinx", REPO / "cases", ORACLE, "--pde-variants=1",
                                 "--pde-sibling", "--pde-resume", *common)
        v = oracle[CASE]
        assert v["outcome"] == "PASS" and v["sibling"]["outcome"] == "PASS", (attempt, v["reason"], v["sibling"])
        assert v["variant_seed"] == 1 and v["sibling"]["seed"] == 1_000_001
        written = (tmp_path / "c" / "out" / "dolfinx" / CASE / "verdict.json").stat().st_mtime_ns
        if attempt == "first":
            first = (v["case_fingerprint"], v["fingerprint"], written)
    assert (v["case_fingerprint"], v["fingerprint"], written) == first  # the same variant, not run again
    assert v["case_fingerprint"] == varied[CASE]["case_fingerprint"]  # two runs drew the same variant
    assert v["case_fingerprint"] != published[CASE]["case_fingerprint"]


@pytest.mark.fem
def test_a_failed_paired_oracle_leaves_the_item_without_a_verdict(dolfinx_available, tmp_path):
    cases, solvers = toy_cases(tmp_path, "dolfinx", {"poisson_one": LISTING_SOLVER})
    broken = tmp_path / "broken_oracle"
    broken.mkdir()
    (broken / "solver.py").write_text("def solve(case_spec):\n    raise SystemExit('the oracle is broken')\n")
    done, outcomes = run_track(tmp_path, "dolfinx", cases, solvers, "--pde-baseline=paired",
                               f"--pde-oracle={broken}")
    assert outcomes == {} and done.returncode == 1, done.stdout[-2000:]
    assert "the paired oracle's gated run failed" in done.stdout and "the oracle is broken" in done.stdout
    assert "During handling of the above exception" not in done.stdout  # one message, not a chained pair
    # the stand-in (F-Exec, no verdict) keeps the item's family: in the terminal's table and the JSON report
    family = next(record.family for _, _, record in load_cases(cases))
    assert any(line.split()[:3] == [family, "0", "1"] for line in done.stdout.splitlines()), done.stdout[-2000:]
    report = json.loads((tmp_path / "report-dolfinx.json").read_text())
    stand_ins = json_report_verdicts(report)  # what pdebench table and report read
    assert [(v["family"], v["outcome"], v["no_verdict"]) for v in stand_ins] == [(family, "F-Exec", True)], stand_ins


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--pde-variants=1", "--pde-baseline=stored"], "a variant has no stored calibration"),
        (["--pde-variants=1", "--pde-calibrate"], "do not go with --pde-calibrate"),
        (["--pde-variants=1000000"], "the seed must be in 0..999999"),
        (["--pde-baseline=paired", "--pde-oracle=/nowhere"], "--pde-oracle: no directory at /nowhere"),
    ],
)
def test_live_options_that_do_not_fit_are_refused(tmp_path, options, message):
    done, _ = run_track(tmp_path, "dolfinx", REPO / "cases", ORACLE, *options)
    assert done.returncode == 4 and message in done.stderr, done.stderr[-2000:]


def test_the_report_puts_published_and_variant_scores_side_by_side():
    run = Run(REPO, "r", "m-2cpu", "bubblewrap")
    published = [verdict(f"c{k}", "PASS", sibling={"outcome": "PASS" if k < 2 else "F-Acc"}) for k in range(8)]
    published += [verdict(f"c{k}", "F-Acc") for k in (8, 9)]  # a sibling runs only for an item that passed
    variants = [verdict(f"c{k}", "PASS" if k < 3 else "F-Acc", variant_seed=1, calibration="paired oracle")
                for k in range(6)]  # four published records have no variant
    rows = [row_of(v, run, None) for v in published + variants]
    table = live_table(rows)
    assert table is not None
    by_cases = {row[2]: row for row in table.rows}
    assert by_cases["published"][3] == "stored" and by_cases["published"][4].startswith("80.0 [")
    assert by_cases["published"][6] == "2/8"  # of the eight that passed, two passed a sibling
    varied = by_cases["variants, seed 1"]
    assert varied[3] == "paired" and varied[4].startswith("50.0 [") and varied[4].endswith("n=6")
    assert varied[5].startswith("100.0 [") and varied[5].endswith("n=6")  # the same six records, published
    assert live_table([row_of(v, run, None) for v in (verdict("c", "PASS"),)]) is None  # nothing live: no table
