"""--pde-cluster against real Dask processes on loopback: a scheduler and two one-thread
workers (`dask scheduler`, `dask worker`), workers killed in the middle of a run, the
controller interrupted. The gate suite through a cluster is in test_gates.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_pdebench.testing import (DOLFINX_CASES, NUMPY_PRELUDE, ORACLE, REPO, dask_installed, outcomes_from_report,
                                     processes_with, run_track, toy_cases)
from pytest_pdebench.testing.loopback import LoopbackCluster

STOP_SEC = 60  # an interrupted controller stops in 1-16 s here (both cores busy, load average 7)


def sleeping_solver(marker_seconds: str) -> str:
    """An exact solver that first waits on a child whose command line is the marker (so a
    test can find the run, and the worker running it, from outside)."""
    return NUMPY_PRELUDE + (
        "\nimport subprocess\n"
        "def solve(case_spec):\n"
        f"    subprocess.run(['sleep', '{marker_seconds}'])\n"
        "    x, y, u = grid(case_spec)\n"
        "    write(u, x, y)\n")


def interruptible() -> None:
    """SIGINT back to its default in a child: a test run started as a background job
    (`make test &` in a script) has SIGINT ignored, Python keeps it so in every child it
    starts, and a controller would never see its Ctrl-C (issue 37: it ran on past 120 s)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_on_cluster(tmp_path: Path, cluster: LoopbackCluster, solvers: dict[str, str], *extra: str,
                   wait: bool = True, env: dict | None = None):
    cases, submissions = toy_cases(tmp_path, "dolfinx", solvers)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx", f"--pde-cases={cases}",
            f"--pde-submissions={submissions}", f"--pde-calibrations={tmp_path / 'calibrations'}",
            f"--pde-output={tmp_path / 'out'}", "--pde-runs=1", f"--pde-cluster={cluster.address}", "--json-report",
            f"--json-report-file={tmp_path / 'report.json'}", "-rA", *extra]
    if not wait:  # a controller to interrupt: SIGINT at its default (see interruptible), stacks on SIGABRT
        return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})}, preexec_fn=interruptible)
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    report = tmp_path / "report.json"
    return done, (outcomes_from_report(report) if report.exists() else {})


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def worker_running(marker: str) -> int | None:
    """The pid of the Dask worker process (the nanny's child) under which ``marker`` runs."""
    for pid in processes_with(marker):
        try:
            while pid > 1:
                parent = _parent(pid)
                if b"dask_worker" in _cmdline(parent):  # the nanny: pid is its worker
                    return pid
                pid = parent
        except OSError:
            continue
    return None


class WorkerKiller(threading.Thread):
    """SIGKILLs the worker running ``marker`` each time one shows up, ``times`` times."""

    def __init__(self, marker: str, times: int, deadline_sec: float = 240):
        super().__init__(daemon=True)
        self.marker, self.times, self.deadline = marker, times, time.monotonic() + deadline_sec
        self.killed: list[int] = []

    def run(self):
        while len(self.killed) < self.times and time.monotonic() < self.deadline:
            pid = worker_running(self.marker)
            if pid is not None and pid not in self.killed:
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)
            time.sleep(0.2)


@pytest.fixture
def own_cluster(tmp_path, dolfinx_available):
    """Two workers of a test's own (its workers get killed), each fault allowed once."""
    dask_installed()
    cluster = LoopbackCluster(tmp_path / "dask", env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"})
    yield cluster
    cluster.stop()


def test_a_worker_killed_mid_run_costs_a_rerun_elsewhere_not_a_verdict(tmp_path, own_cluster):
    killer = WorkerKiller("3.1415", times=1)
    killer.start()
    done, outcomes = run_on_cluster(tmp_path, own_cluster, {"steady": sleeping_solver("3.1415")})
    killer.join()
    assert len(killer.killed) == 1, "the run was never seen on a worker"
    assert list(outcomes) == ["steady"], done.stdout[-3000:]
    verdict = outcomes["steady"]
    assert verdict["outcome"] == "PASS", verdict["reason"]
    assert verdict["t_first_run"] > 3 and len(verdict["timed_runs"]) == 1  # the rerun ran whole
    assert "1 passed" in done.stdout
    assert not processes_with("3.1415")


def test_a_run_that_ends_every_worker_is_f_exec_after_bounded_tries(tmp_path, own_cluster):
    killer = WorkerKiller("2.7182", times=2)  # the first try and the one retry allowed
    killer.start()
    started = time.monotonic()
    done, outcomes = run_on_cluster(tmp_path, own_cluster, {"doomed": sleeping_solver("2.7182")})
    killer.join()
    verdict = outcomes["doomed"]
    assert verdict["outcome"] == "F-Exec"
    assert "ended every Dask worker that tried it" in verdict["reason"]
    assert time.monotonic() - started < 200
    assert not processes_with("2.7182")


def stopped(controller: subprocess.Popen, marker: str) -> str:
    """The output of an interrupted controller, once it stopped; a failure showing where each
    of its threads waits if it still runs STOP_SEC later."""
    try:
        return controller.communicate(timeout=STOP_SEC)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        controller.send_signal(signal.SIGABRT)
        output = controller.communicate()[0].decode(errors="replace")
        for pid in processes_with(marker):  # the run would hold a worker of the session's cluster
            os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the controller still ran {STOP_SEC} s after its interrupt; its threads:\n{output[-6000:]}")


def assert_no_run_left(marker: str) -> None:
    deadline = time.monotonic() + 15
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes_with(marker), "a run outlived its controller's Ctrl-C"


def test_ctrl_c_on_the_controller_kills_the_runs_on_the_workers(tmp_path, dask_cluster):
    marker = f"97.{os.getpid()}"  # this session's run, not one of another on the machine
    controller = run_on_cluster(tmp_path, dask_cluster, {"long": sleeping_solver(marker)}, wait=False)
    deadline = time.monotonic() + 120
    while not processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker), "the run never started"
    controller.send_signal(signal.SIGINT)
    output = stopped(controller, marker)
    assert controller.returncode == 2, output[-2000:]  # interrupted
    assert_no_run_left(marker)


LOSES_ITS_CTRL_C = """
import os, signal, time
from pathlib import Path

class Finalized:
    def __del__(self):  # the Ctrl-C comes while the main thread runs a finalizer
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            Path(os.environ["LOST_MARK"]).touch()
            raise  # printed as "Exception ignored" and lost

def pytest_runtest_setup(item):
    Finalized()
"""


def test_a_ctrl_c_lost_in_a_finalizer_still_stops_the_controller(tmp_path, dask_cluster):
    """Issue 37: a KeyboardInterrupt raised in a finalizer is lost; the controller still stops
    at its next wait for a run rather than waiting the run out."""
    marker = f"96.{os.getpid()}"
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "loses_its_ctrl_c.py").write_text(LOSES_ITS_CTRL_C)
    controller = run_on_cluster(tmp_path, dask_cluster, {"long": sleeping_solver(marker)}, "-p", "loses_its_ctrl_c",
                                wait=False, env={"PYTHONPATH": str(tmp_path / "plugins"),
                                                 "LOST_MARK": str(tmp_path / "lost")})
    output = stopped(controller, marker)
    assert (tmp_path / "lost").exists(), output[-2000:]  # the KeyboardInterrupt did come, in the finalizer
    assert controller.returncode == 2, output[-2000:]
    assert_no_run_left(marker)


def test_a_run_starting_as_its_owners_abort_comes_is_refused():
    """Issue 37: a task that began on a worker just before the abort of its interrupted
    controller, but whose run registers after it, must not run on for its whole length."""
    from pytest_pdebench.cluster.worker import abort_runs
    from pytest_pdebench.sandbox import SandboxError, live_run, owned_by

    owner, killed = f"controller-{os.getpid()}-{time.monotonic_ns()}", []
    with owned_by(owner), live_run(lambda: killed.append("live")):
        assert abort_runs(owner) == 1
    assert killed == ["live"]
    with owned_by(owner), pytest.raises(SandboxError, match="aborted"), live_run(lambda: killed.append("late")):
        pass
    with owned_by(f"another-{owner}"), live_run(lambda: killed.append("another")):
        pass
    assert killed == ["live"]


def test_cluster_with_xdist_is_refused(tmp_path, dask_cluster):
    done, _ = run_on_cluster(tmp_path, dask_cluster, {"exact": sleeping_solver("0.01")}, "-n", "2")
    assert done.returncode == 4
    assert "--pde-cluster spreads the items over the cluster's workers: leave out -n" in done.stderr


def test_no_scheduler_at_the_address_is_a_clear_error(tmp_path, dolfinx_available):
    import socket

    dask_installed()
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cases, submissions = toy_cases(tmp_path, "dolfinx", {"exact": sleeping_solver("0.01")})
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx", f"--pde-cases={cases}",
         f"--pde-submissions={submissions}", f"--pde-cluster=tcp://127.0.0.1:{port}"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 4
    assert f"--pde-cluster tcp://127.0.0.1:{port}: no Dask scheduler answers there" in done.stderr


def test_the_oracle_measures_the_same_on_the_cluster_as_here(tmp_path, dask_cluster):
    """The DOLFINx oracle on one case per family, calibrating (so no timing decides a
    verdict): the same outcomes, errors and meshes through the cluster as with xdist here,
    and the baselines filed under the machine of the workers that timed them."""
    from pytest_pdebench.machine import machine_key

    selection = ("-k", " or ".join(DOLFINX_CASES), "--pde-calibrate")
    outcomes = {}
    for site, extra in (("here", ("-n", "2")), ("cluster", (f"--pde-cluster={dask_cluster.address}",))):
        folder = tmp_path / site
        folder.mkdir()
        done, outcomes[site] = run_track(folder, "dolfinx", REPO / "cases", ORACLE, *selection, *extra,
                                         f"--pde-calibrations={folder / 'calibrations'}")
        assert sorted(outcomes[site]) == sorted(DOLFINX_CASES), done.stdout[-3000:]
    for case_id in DOLFINX_CASES:
        here, there = outcomes["here"][case_id], outcomes["cluster"][case_id]
        assert (here["outcome"], there["outcome"]) == ("PASS", "PASS"), (case_id, here["reason"], there["reason"])
        assert there["error"] == pytest.approx(here["error"], rel=1e-9), case_id
        assert there["solver_info"].get("num_dofs") == here["solver_info"].get("num_dofs"), case_id
        assert there["machine"] == machine_key() and len(there["timed_runs"]) == 1
    stored = json.loads((tmp_path / "cluster" / "calibrations" / "dolfinx" / f"{machine_key()}.json").read_text())
    assert sorted(stored["cases"]) == sorted(DOLFINX_CASES)
    assert stored["conditions"]["workers"] == 2 and stored["conditions"]["runner"] == "warm"


@pytest.fixture
def slurm_node(tmp_path, dolfinx_available):
    """A one-node Slurm cluster (testing/slurm_node.py); skips, saying why, where it cannot start."""
    from pytest_pdebench.testing.slurm_node import SlurmNode

    dask_installed()
    problem = SlurmNode.problem()
    if problem:
        pytest.skip(f"Slurm test not run: {problem}")
    node = SlurmNode()
    try:
        node.start()
    except RuntimeError as exc:
        node.stop()
        pytest.skip(f"Slurm test not run: the one-node cluster did not start: {exc}")
    yield node
    node.stop()


def test_a_dolfinx_sample_runs_on_dask_workers_that_are_slurm_jobs(tmp_path, slurm_node, monkeypatch):
    """dask-jobqueue submits two one-core workers as Slurm jobs; the oracle's runs of three
    cases happen in those jobs and pass."""
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    for key, value in slurm_node.env.items():  # sbatch, squeue and scancel find this cluster
        monkeypatch.setenv(key, value)
    cases = DOLFINX_CASES[:3]
    with SLURMCluster(cores=1, processes=1, memory="4GB", queue="pdebench", walltime="00:30:00",
                      python=sys.executable, scheduler_options={"host": "127.0.0.1"},
                      worker_extra_args=["--host", "127.0.0.1"], local_directory=str(tmp_path / "workers"),
                      log_directory=str(tmp_path / "jobs")) as cluster, Client(cluster) as client:
        cluster.scale(jobs=2)
        client.wait_for_workers(2, timeout=180)
        jobs = client.run(lambda: os.environ.get("SLURM_JOB_ID"))
        assert all(jobs.values()) and len(set(jobs.values())) == 2, jobs
        done, outcomes = run_track(tmp_path, "dolfinx", REPO / "cases", ORACLE, "--pde-calibrate",
                                   f"--pde-cluster={cluster.scheduler_address}", "-k", " or ".join(cases),
                                   f"--pde-calibrations={tmp_path / 'calibrations'}")
    assert sorted(outcomes) == sorted(cases), done.stdout[-3000:]
    for case_id, verdict in outcomes.items():
        assert verdict["outcome"] == "PASS", (case_id, verdict["reason"])
        assert verdict["worker"] in jobs, (case_id, verdict["worker"], jobs)  # ran in a Slurm job


@pytest.fixture
def two_machine_classes(tmp_path, dolfinx_available):
    """One worker claiming each of two kinds of machine (PDEBENCH_MACHINE)."""
    dask_installed()
    cluster = LoopbackCluster(tmp_path / "dask", machines=["class-a", "class-b"])
    yield cluster
    cluster.stop()


EXACT = NUMPY_PRELUDE + "\ndef solve(case_spec):\n    x, y, u = grid(case_spec)\n    write(u, x, y)\n"


def test_each_machine_class_is_calibrated_on_its_own_workers_and_judged_by_its_own_baselines(
        tmp_path, two_machine_classes):
    cases, submissions = toy_cases(tmp_path, "dolfinx", {"first": EXACT, "second": EXACT})
    calibrations = tmp_path / "fresh-calibrations"
    cluster = f"--pde-cluster={two_machine_classes.address}"
    # `pdebench calibrate --cluster`: one item per class, each run on that class's workers,
    # each class its own file
    done = subprocess.run([str(Path(sys.executable).with_name("pdebench")), "calibrate", "--library", "dolfinx",
                           "--cases", str(cases), "--oracle", str(submissions), "--calibrations", str(calibrations),
                           "--cluster", two_machine_classes.address, "--", f"--pde-output={tmp_path / 'out'}", "-rA"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert "first[dolfinx@class-a]" in done.stdout and "second[dolfinx@class-b]" in done.stdout, done.stdout[-2000:]
    stored = {machine: json.loads((calibrations / "dolfinx" / f"{machine}.json").read_text())
              for machine in ("class-a", "class-b")}
    assert all(sorted(entry["cases"]) == ["first", "second"] for entry in stored.values()), stored
    assert (tmp_path / "out" / "dolfinx" / "class-b" / "second" / "verdict.json").is_file()
    # evaluating with class-a's baselines gone: every item runs on class-b's worker (the routing is
    # asserted, not the timing: a 10 ms toy's first run is loaded by the parallel tests beside it)
    (calibrations / "dolfinx" / "class-a.json").unlink()
    done, outcomes = run_track(tmp_path, "dolfinx", cases, submissions, cluster, f"--pde-calibrations={calibrations}",
                               "--pde-alpha-time=1000")
    assert {case_id: (v["outcome"], v["machine"]) for case_id, v in outcomes.items()} == {
        "first": ("PASS", "class-b"), "second": ("PASS", "class-b")}, done.stdout[-2000:]
    # with no class calibrated: a clear failure before anything runs
    (calibrations / "dolfinx" / "class-b.json").unlink()
    done, outcomes = run_track(tmp_path, "dolfinx", cases, submissions, cluster, f"--pde-calibrations={calibrations}",
                               "-k", "first")
    assert "no calibration for case 'first' on dolfinx for the machines of the cluster's workers" in done.stdout
    assert "class-a" in done.stdout and "class-b" in done.stdout and not outcomes


def test_variants_with_paired_baselines_run_on_the_cluster(tmp_path, dask_cluster):
    """--pde-variants through the cluster: the run-ahead queue sends each item's variant with
    its paired oracle; the worker runs both and the controller judges them."""
    cases = [case for case in DOLFINX_CASES if "noexact" not in case][:2]  # numerical references have no variant
    done, outcomes = run_track(tmp_path, "dolfinx", REPO / "cases", ORACLE, "-k", " or ".join(cases),
                               "--pde-variants=3", f"--pde-cluster={dask_cluster.address}")
    assert sorted(outcomes) == sorted(cases), done.stdout[-3000:]
    for case_id, verdict in outcomes.items():
        assert verdict["outcome"] == "PASS", (case_id, verdict["reason"])
        assert verdict["variant_seed"] == 3 and verdict["calibration"] == "paired oracle"
        assert len(verdict["baseline"]["timed_runs"]) == len(verdict["timed_runs"]) == 1
        assert verdict["worker"], case_id  # it ran on a Dask worker
