"""Issue 48: this machine's baselines, timed before a session's submissions run and kept
between sessions (``--pde-baseline=local``, the default: baseline_pass.py, kept_baselines.py)."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time

import pytest

from pytest_pdebench.baseline_pass import MIN_CORE_SHARE, Coordination, Wanted, progress, starved_because
from pytest_pdebench.calibration import baseline_figures
from pytest_pdebench.oracle_settings import warmup_setting
from pytest_pdebench.cases import load_cases
from pytest_pdebench.execution import RunTask, execute
from pytest_pdebench.kept_baselines import KEPT_TOLERANCE, BaselineKey, KeptBaselines, conditions_key
from pytest_pdebench.machine_lock import LOCK_FOLDER, others_running, submissions_running, timing_alone
from pytest_pdebench.sandbox import Limits
from pytest_pdebench.sources import Submission
from pytest_pdebench.testing import HOSTILE_NEIGHBOUR, NUMPY_PRELUDE, ORACLE, REPO, run_track, track_command

CONDITIONS = conditions_key({"workers": 1, "runs": 3, "sandbox": "bubblewrap", "runner": "warm", "kernel_store": 1})
KEY = BaselineKey("poisson_a_000", "f" * 16, "o" * 16, CONDITIONS)
FIGURES = {"e_base": 1e-4, "t_base": 2.0, "timed_runs": [2.0, 2.0, 2.0], "t_first_run": 3.0, "compile_sec": None}
CASE = "poisson_smooth_kappa_annulus_000"  # a steady manufactured case, about 2 s a run
LOCAL = "--pde-baseline=local"  # the default; run_track's is stored, where timing is not the point
HOLD = (
    "import time\nfrom pytest_pdebench.machine_lock import submissions_running\n"
    "with submissions_running():\n    print('holding', flush=True)\n    time.sleep(600)"
)


# the exact toy solution, its calibration setting's cells in solver_info; it fails below 8 cells
SETTING_SOLVER = (
    NUMPY_PRELUDE
    + """
def solve(case_spec):
    cells = json.load(open("calibration_config.json"))["cells_per_side"]
    if cells < 8:
        raise RuntimeError("too coarse")
    x, y, u = grid(case_spec)
    np.savez("solution.npz", u=u, x=x, y=y)
    json.dump({"wall_time_sec": 0.01, "status": "success", "solver_info": {"cells": cells}}, open("meta.json", "w"))
"""
)


# compiles a form with DOLFINx's JIT, and a second one only at 100 cells or more (the calibration's)
FORM_SOLVER = (
    NUMPY_PRELUDE
    + """
import ufl
from dolfinx import fem, mesh
from mpi4py import MPI

def solve(case_spec):
    cells = json.load(open("calibration_config.json"))["cells_per_side"]
    V = fem.functionspace(mesh.create_unit_square(MPI.COMM_WORLD, 4, 4), ("Lagrange", 1))
    u, v = ufl.TrialFunction(V), ufl.TestFunction(V)
    fem.form(u * v * ufl.dx)
    if cells >= 100:
        fem.form(ufl.inner(ufl.grad(u), ufl.grad(v)) * ufl.dx)
    write(grid(case_spec)[2], *grid(case_spec)[:2])
"""
)


def pass_task(solver: str, cells: int) -> RunTask:
    """A toy DOLFINx item's runs as the baseline pass asks for them: one timed run, the
    calibration setting of ``cells`` per side, and its warm-up."""
    setting = {"element_degree": 1, "cells_per_side": cells}
    spec = {"case_spec": {"eval_grid": {"nx": 9, "ny": 9, "bbox": [0, 1, 0, 1]}}}
    submission = Submission("solver.py", {"solver.py": solver.encode()}, origin="toy")
    return RunTask("dolfinx", "toy", spec, ("u",), submission, Limits(timeout_sec=120, memory_mb=4096), 1,
                   "bubblewrap", "warm", calibration_setting=setting, warmup_setting=warmup_setting(setting))


def store(tmp_path) -> KeptBaselines:
    return KeptBaselines(tmp_path, lambda library: "this-machine")


def test_a_kept_timing_judges_later_sessions_while_the_machine_runs_at_its_speed(tmp_path):
    kept = store(tmp_path)
    assert kept.find("dolfinx", KEY, 0.1) is None
    assert kept.keep("dolfinx", KEY, FIGURES, probe_sec=0.1) == "kept for the next sessions"
    assert kept.find("dolfinx", KEY, 0.1)["t_base"] == 2.0
    assert kept.find("dolfinx", KEY, 0.1 * (1 + KEPT_TOLERANCE * 0.9)) is not None
    entry, why = kept.lookup("dolfinx", KEY, 0.1 * (1 + KEPT_TOLERANCE * 1.1))  # slower today: timed again
    assert entry is None and why.startswith("the kept baseline was timed at another speed")
    assert kept.find("dolfinx", KEY, 0.1 * (1 - KEPT_TOLERANCE * 1.1)) is None  # faster: the same
    for other in (
        BaselineKey(KEY.case_id, "e" * 16, KEY.oracle, KEY.conditions),  # the case changed
        BaselineKey(KEY.case_id, KEY.case_fingerprint, "p" * 16, KEY.conditions),  # another oracle
        BaselineKey(KEY.case_id, KEY.case_fingerprint, KEY.oracle, CONDITIONS.replace('"workers":1', '"workers":2')),
    ):
        assert kept.find("dolfinx", other, 0.1) is None
    assert store(tmp_path).find("firedrake", KEY, 0.1) is None  # per library
    assert json.loads(kept.path("dolfinx").read_text())["entries"]  # one file per library and machine
    # timed again at another speed: the new timing replaces the old one
    assert kept.keep("dolfinx", KEY, {**FIGURES, "t_base": 3.0}, probe_sec=0.2) == "kept for the next sessions"
    assert kept.find("dolfinx", KEY, 0.2)["t_base"] == 3.0 and kept.find("dolfinx", KEY, 0.1) is None


def test_the_warm_up_keeps_the_forms_and_makes_the_mesh_coarse():
    steady = {"element_degree": 2, "cells_per_side": 144, "solver": "direct"}
    assert warmup_setting(steady) == {"element_degree": 2, "cells_per_side": 18, "solver": "direct"}
    transient = {"element_degree": 1, "cells_per_side": 24, "dt": 0.01, "solver": "direct"}
    assert warmup_setting(transient) == {"element_degree": 1, "cells_per_side": 4, "dt": 0.01, "solver": "direct"}
    assert warmup_setting({"element_degree": 1, "cells_per_side": 3})["cells_per_side"] == 3  # never finer


def test_a_warmed_pass_keeps_the_gated_run_plus_what_compiling_added():
    verdict = {"e_base": 1e-4, "t_base": 2.0, "timed_runs": [2.0], "t_first_run": 2.0, "warmup_runs": [0.9, 0.2]}
    assert baseline_figures(verdict)["t_first_run"] == pytest.approx(2.7)
    assert baseline_figures(verdict)["warmup_runs"] == [0.9, 0.2]  # kept with it: how it was derived
    cold = baseline_figures({**verdict, "warmup_runs": []})  # no warm-up: the gated run, as measured
    assert cold["t_first_run"] == 2.0 and "warmup_runs" not in cold


@pytest.mark.fem
@pytest.mark.parametrize("cells, warmed", [(144, True), (40, False)])
def test_the_pass_warms_up_on_a_coarse_mesh_and_times_its_gated_run(dolfinx_available, tmp_path, cells, warmed):
    """The gated run at the calibration setting after two coarse runs is timed run 1 (it
    compiled nothing: a numpy solver); a warm-up that fails (under 8 cells here) leaves a
    cold gated run and a timed run of its own, as without a warm-up."""
    done = execute(pass_task(SETTING_SOLVER, cells), tmp_path)
    assert done.ran and json.loads(done.meta)["solver_info"] == {"cells": cells}  # the gated run: the calibration's
    if warmed:
        assert len(done.warmup_runs) == 2 and done.gated_compiled == 0
        assert done.timed_runs == [done.t_first_run]
    else:
        assert done.warmup_runs == [] and done.gated_compiled is None
        assert len(done.timed_runs) == 1 and done.timed_runs != [done.t_first_run]


@pytest.mark.fem
def test_a_run_that_compiles_after_the_warm_up_is_not_timed(dolfinx_available, tmp_path):
    """A kernel only the calibration setting compiles: the gated run keeps it (gated_compiled
    1 or more) and a timed run of its own follows, with the store complete."""
    done = execute(pass_task(FORM_SOLVER, 144), tmp_path)
    assert done.ran and len(done.warmup_runs) == 2, (done.run_failure, done.stderr[-2000:])
    assert done.warmup_runs[0] > done.warmup_runs[1]  # the first coarse run compiled, the second found it
    assert done.gated_compiled and done.gated_compiled > 0
    assert len(done.timed_runs) == 1 and done.timed_runs != [done.t_first_run]


def test_a_damaged_file_loses_its_entries_not_the_run(tmp_path):
    kept = store(tmp_path)
    kept.path("dolfinx").parent.mkdir(parents=True)
    kept.path("dolfinx").write_text("{not json")
    assert kept.find("dolfinx", KEY, 0.1) is None
    assert kept.keep("dolfinx", KEY, FIGURES, probe_sec=0.1) == "kept for the next sessions"


@pytest.mark.alone
def test_a_session_running_submissions_is_seen_by_every_other(tmp_path, monkeypatch):
    assert not others_running()
    # another HOME, another cache root: the lock is the machine's, in one fixed place
    env = {**os.environ, "HOME": str(tmp_path / "other-home"), "PDEBENCH_CACHE": str(tmp_path / "other-cache")}
    env.pop("PDEBENCH_BASELINES", None)
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "holding"
        assert others_running()
        with timing_alone() as alone:
            assert not alone
        with submissions_running():  # sessions running submissions share it
            assert others_running()
    finally:
        holder.kill()
        holder.wait()
    assert not others_running()  # a killed session lets go
    with timing_alone() as alone:
        assert alone


@pytest.mark.alone
def test_no_submission_starts_while_a_kept_timing_runs(tmp_path):
    """A session that starts its items while another's timing runs waits for it to end."""
    with timing_alone() as alone:
        assert alone
        holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(1.0)
            assert not select.select([holder.stdout], [], [], 0)[0]  # it waits: nothing printed yet
            assert others_running()  # but it said it is about to run: no other timing begins now
        except BaseException:
            holder.kill()
            raise
    try:
        assert holder.stdout.readline().strip() == "holding"  # the timing ended: it starts
        assert others_running()
    finally:
        holder.kill()
        holder.wait()


def test_the_machine_lock_refuses_what_is_planted_in_its_place(tmp_path, monkeypatch):
    """A link or FIFO where a lock file should be: no timing is kept (never followed, never hangs)."""
    from pytest_pdebench import machine_lock

    monkeypatch.setattr(machine_lock, "LOCK_FOLDER", tmp_path)
    (tmp_path / machine_lock.SUBMISSIONS).symlink_to(tmp_path / "elsewhere")
    os.mkfifo(tmp_path / machine_lock.TIMINGS)
    assert others_running()  # cannot tell: counts as busy
    with timing_alone() as alone:
        assert not alone
    with submissions_running(lambda line: None):  # said, and passed over
        pass
    assert not (tmp_path / "elsewhere").exists()
    assert str(LOCK_FOLDER) in ("/run/lock", "/var/lock", "/tmp")


def test_a_timing_that_did_not_get_its_core_is_not_kept():
    assert starved_because(None) is None and starved_because(0.97) is None
    assert "0.31 of a core" in starved_because(0.31)
    assert MIN_CORE_SHARE == 0.9


def test_workers_share_out_the_timings_and_wait_for_each_other(tmp_path):
    record = next(r for _, _, r in load_cases(REPO / "cases") if r.id == CASE)
    items = [Wanted(record, library, tmp_path, None) for library in ("dolfinx", "firedrake", "dealii")]
    order: list[str] = []

    def worker(name: str, pause: float) -> None:
        coordination = Coordination(tmp_path, name, 2)
        coordination.begin(len(items))
        for item in items:
            if coordination.claim(item):
                time.sleep(pause)
                coordination.record(item, "kept for the next sessions")
                order.append(f"{name} timed {item.name}")
        coordination.finish()
        order.append(f"{name} done")

    threads = [threading.Thread(target=worker, args=("gw0", 0.05)), threading.Thread(target=worker, args=("gw1", 0.4))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    timed = sorted(line.split(" timed ")[1] for line in order if " timed " in line)
    assert timed == sorted(item.name for item in items)  # each item once
    assert sorted(order[-2:]) == ["gw0 done", "gw1 done"]  # nobody goes on before every worker is done
    assert progress(tmp_path) == (3, 3, 3)


def test_the_summary_says_whose_timing_t_base_is():
    from pytest_pdebench.report import t_base_origins

    verdicts = [{"t_base_from": "kept"}, {"t_base_from": "kept"}, {"t_base_from": "stored elsewhere"},
                {"t_base_from": "paired"}]  # fmt: skip
    assert t_base_origins(verdicts) == (
        "t_base: 2 kept (this machine's timing of the oracle), 1 stored (measured on another machine), 1 paired now"
    )
    assert t_base_origins([{"outcome": "F-Exec"}]) is None


def test_local_baselines_do_not_go_with_calibration(pytester):
    result = pytester.runpytest("-p", "no:cacheprovider", "--pde-calibrate", "--pde-baseline=local")
    result.stderr.fnmatch_lines(["*--pde-baseline=local times the oracle beside a submission: not for calibration*"])


def case_file(tmp_path, *case_ids: str):
    records = [r for _, _, r in load_cases(REPO / "cases") if r.id in case_ids]
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(r.model_dump(mode="json", exclude_none=True)) + "\n" for r in records))
    if not (tmp_path / "references").exists():  # the records' data files (solve-only parts)
        (tmp_path / "references").symlink_to(REPO / "cases" / "references")
    return path


def pass_said(session_dir, case_id: str) -> str:
    """What the baseline pass of a session did with its timing of case_id (its audit file)."""
    return (session_dir / "out" / "baselines" / "dolfinx" / case_id / "kept.txt").read_text().strip()


@pytest.mark.fem
@pytest.mark.alone
def test_the_first_session_times_the_oracle_first_and_the_next_one_reuses(dolfinx_available, tmp_path, monkeypatch):
    monkeypatch.setenv("PDEBENCH_BASELINES", str(tmp_path / "kept"))
    cases = case_file(tmp_path, CASE)
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir(), second_dir.mkdir()
    done, first = run_track(first_dir, "dolfinx", cases, ORACLE, LOCAL, "--pde-runs=2")
    assert first[CASE]["outcome"] == "PASS", done.stdout[-2000:]
    assert "items without one are timed first, the oracle alone" in done.stdout  # the header says so
    assert "the oracle timed on 1 of 1 items (1 kept for the next sessions)" in done.stdout
    assert pass_said(first_dir, CASE) == "kept for the next sessions"
    [kept_file] = (tmp_path / "kept" / "dolfinx").glob("*.json")
    [entry] = json.loads(kept_file.read_text())["entries"].values()
    # the pass: two coarse runs, then the gated run at the calibration setting, found warm and timed
    timed = json.loads((first_dir / "out" / "baselines" / "dolfinx" / CASE / "verdict.json").read_text())
    assert len(timed["warmup_runs"]) == 2 and timed["gated_compiled"] == 0, timed
    assert timed["timed_runs"] == [timed["t_first_run"]] == [entry["t_base"]]
    assert entry["t_first_run"] == pytest.approx(entry["t_base"] + timed["warmup_runs"][0] - timed["warmup_runs"][1])
    if first[CASE]["t_base_from"] == "kept":
        assert first[CASE]["t_base"] == pytest.approx(entry["t_base"])
        assert first[CASE]["calibration"].startswith("kept baseline (timed on ")
    else:  # a load appeared after the pass: paired, and the verdict says why
        assert first[CASE]["baseline"]["paired_because"].startswith("the machine is loaded now")
    done, second = run_track(second_dir, "dolfinx", cases, ORACLE, LOCAL, "--pde-runs=2")
    assert second[CASE]["outcome"] == "PASS", done.stdout[-2000:]
    if (second_dir / "out" / "baselines").exists():  # the machine's speed moved past KEPT_TOLERANCE meanwhile
        assert "the oracle timed on 1 of 1 items" in done.stdout
    else:  # nothing timed: the kept timing judges
        assert "this machine's baselines" not in done.stdout
        if second[CASE]["t_base_from"] == "kept":
            assert second[CASE]["t_base"] == pytest.approx(entry["t_base"])
    # the first session again, resumed (as after an interruption): its verdict is read back
    done, resumed = run_track(first_dir, "dolfinx", cases, ORACLE, LOCAL, "--pde-runs=2", "--pde-resume")
    assert resumed[CASE]["resumed"] and resumed[CASE]["t_agent"] == first[CASE]["t_agent"], done.stdout[-2000:]


@pytest.mark.fem
@pytest.mark.slow
@pytest.mark.alone
def test_no_submission_runs_while_the_oracle_is_timed(dolfinx_available, tmp_path, monkeypatch):
    """A hostile neighbour on one worker, the oracle's copy on the other item: every kept timing
    ended before any submission's run began; and a session whose pass runs while another
    session's submissions run keeps nothing (its items are paired)."""
    monkeypatch.setenv("PDEBENCH_BASELINES", str(tmp_path / "kept"))
    hostile = "stokes_nu001_annulus_013"
    cases = case_file(tmp_path, CASE, hostile)
    folder = tmp_path / "mixed"  # the oracle's solvers, but one
    shutil.copytree(ORACLE, folder)
    (folder / "dolfinx" / f"{hostile}.py").write_text(HOSTILE_NEIGHBOUR)
    first = tmp_path / "first"
    first.mkdir()
    done, verdicts = run_track(first, "dolfinx", cases, folder, LOCAL, "-n", "2", "--pde-runs=1",
                               "--pde-timeout=20")  # fmt: skip
    assert verdicts[CASE]["outcome"] == "PASS", done.stdout[-3000:]
    assert verdicts[hostile]["outcome"] in ("F-Exec", "F-Time"), done.stdout[-3000:]
    assert [pass_said(first, case) for case in (CASE, hostile)] == ["kept for the next sessions"] * 2
    pass_ended = max((first / "out" / "baselines" / "dolfinx" / c / "kept.txt").stat().st_mtime for c in (CASE, hostile))
    runs_began = min((first / "out" / "dolfinx" / c / "case_spec.json").stat().st_mtime for c in (CASE, hostile))
    assert pass_ended <= runs_began
    # another session's submissions run meanwhile: nothing of this pass is kept
    shutil.rmtree(tmp_path / "kept")
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        second = tmp_path / "second"
        second.mkdir()
        done, verdicts = run_track(second, "dolfinx", case_file(second, CASE), ORACLE, LOCAL, "--pde-runs=1")
    finally:
        holder.kill()
        holder.wait()
    assert "another session runs submissions on this machine: no baseline can be timed alone now" in done.stdout
    assert not (second / "out" / "baselines").exists()  # nothing timed: the item is paired
    assert verdicts[CASE]["t_base_from"] == "paired" and verdicts[CASE]["outcome"] == "PASS", done.stdout[-2000:]
    assert not any((tmp_path / "kept").rglob("*.json"))


SPIN = """
def solve(case_spec):
    while True:
        pass
"""


@pytest.mark.fem
@pytest.mark.alone
def test_a_timing_beside_a_session_of_another_home_is_not_kept(dolfinx_available, tmp_path, monkeypatch):
    """A session under another HOME and another cache root runs a solver that spins on a core
    while this session's first timing would run: nothing is kept, the item is paired and
    says why. Then the same beside a plain CPU hog on every core (no lock held): the timing
    shows its starved share and is not kept either."""
    monkeypatch.setenv("PDEBENCH_BASELINES", str(tmp_path / "kept"))
    cases = case_file(tmp_path, CASE)
    hog_dir = tmp_path / "hog"
    (hog_dir / "solvers" / "dolfinx").mkdir(parents=True)
    (hog_dir / "solvers" / "dolfinx" / f"{CASE}.py").write_text(SPIN)
    command, _ = track_command(hog_dir, "dolfinx", cases, hog_dir / "solvers", "--pde-timeout=300", "--pde-runs=1")
    env = {**os.environ, "HOME": str(tmp_path / "hog-home"), "PDEBENCH_CACHE": str(tmp_path / "hog-cache")}
    env.pop("PDEBENCH_BASELINES")
    hog = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not others_running() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert others_running(), "the hog session never started its items"
        first = tmp_path / "first"
        first.mkdir()
        done, verdicts = run_track(first, "dolfinx", cases, ORACLE, LOCAL, "--pde-runs=1")
    finally:
        hog.kill()
        hog.wait()
    assert "another session runs submissions on this machine" in done.stdout, done.stdout[-2000:]
    assert verdicts[CASE]["t_base_from"] == "paired" and verdicts[CASE]["outcome"] == "PASS", done.stdout[-2000:]
    assert not any((tmp_path / "kept").rglob("*.json"))
    # a hog that is no session of ours: two spinning processes per core, each in a session of its
    # own (the scheduler shares a core between sessions, as between the runs of other sessions)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
                for _ in range(2 * (os.cpu_count() or 2))]  # fmt: skip
    try:
        second = tmp_path / "second"
        second.mkdir()
        done, verdicts = run_track(second, "dolfinx", cases, ORACLE, LOCAL, "--pde-runs=1")
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    said = pass_said(second, CASE)
    assert said.startswith("not kept: the oracle got") and "of a core while timed" in said, said
    assert verdicts[CASE]["t_base_from"] == "paired", done.stdout[-2000:]
    assert not any((tmp_path / "kept").rglob("*.json"))
