"""Ctrl-C in the middle of a run: finished items keep their verdicts, the JSON report is
written, the running solver is killed, and --pde-resume picks up where it stopped."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from pytest_pdebench.testing import NUMPY_PRELUDE, record_dict, write_calibration, write_jsonl

pytestmark = pytest.mark.usefixtures("dolfinx_available")


def _running(marker: str) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    return True
            except OSError:
                pass
    return False


def _orphaned_zygotes() -> list[str]:
    """Warm-runner zygotes whose harness is gone (they die with it: PR_SET_PDEATHSIG)."""
    orphans = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"zygote.py" in (entry / "cmdline").read_bytes():
                parent = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("PPid:"))
                if parent.split()[1] == "1":
                    orphans.append(entry.name)
        except OSError:
            pass
    return orphans


def _interrupted_run(tmp_path: Path, signum: int, *extra: str):
    """A run of a quick and a slow solver, sent ``signum`` (only its main process) once the
    slow one runs; returns the command, the solvers folder and the run's output."""
    marker = f"pdebench-slow-{uuid.uuid4().hex}"
    solvers = tmp_path / "solvers" / "dolfinx"
    solvers.mkdir(parents=True)
    (solvers / "quick.py").write_text(NUMPY_PRELUDE + "\ndef solve(case_spec):\n    x, y, u = grid(case_spec)\n"
                                      "    write(u, x, y)\n")
    (solvers / "slow.py").write_text(f"import subprocess\n\ndef solve(case_spec):\n"
                                     f"    subprocess.run(['sh', '-c', 'sleep 600; echo {marker}'])\n")
    records = [record_dict(new_id=name, nx=20, ny=20) for name in ("quick", "slow")]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", "dolfinx", records, 1e-4, 5.0)
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx",
               f"--pde-cases={tmp_path / 'cases.jsonl'}", f"--pde-submissions={tmp_path / 'solvers'}",
               f"--pde-calibrations={tmp_path / 'calibrations'}", f"--pde-output={tmp_path / 'out'}",
               "--json-report", f"--json-report-file={report}"]
    # SIGINT back to its default in the child: a test run started as a background job
    # (`cmd &` in a script) inherits SIGINT ignored, and Python then never sees Ctrl-C
    # with xdist or a cluster the quick item finishes while the slow one runs: -v shows when
    # its verdict reached the controller's report
    elsewhere = "-n" in extra or any(arg.startswith("--pde-cluster") for arg in extra)
    process = subprocess.Popen(command + list(extra) + (["-v"] if elsewhere else []), cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"},  # its progress as it comes
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    chunks: list[bytes] = []  # read as it comes: with -v an item's status word comes before its line ends

    def read():
        while chunk := os.read(process.stdout.fileno(), 65536):
            chunks.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.time() + 120
    while not _running(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert _running(marker), "the slow solver never started"
    if elsewhere:  # "PASS cases.jsonl::quick" from xdist, "cases.jsonl::quick PASS" without
        while not re.search(rb"PASS \S+::quick|::quick\S* PASS", b"".join(chunks)) and time.time() < deadline:
            time.sleep(0.1)
    process.send_signal(signum)
    process.wait(timeout=60)
    reader.join(timeout=10)
    output = b"".join(chunks).decode(errors="replace")
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output[-2000:]
    deadline = time.time() + 10
    while _running(marker) and time.time() < deadline:
        time.sleep(0.2)
    assert not _running(marker), "the interrupted solver is still running"
    # the kernel delivers the death signals (PR_SET_PDEATHSIG) as each parent exits: a
    # zygote or joiner may still be on its way out for a moment on a loaded machine
    while _orphaned_zygotes() and time.time() < deadline:
        time.sleep(0.2)
    assert _orphaned_zygotes() == []
    verdict = json.loads((tmp_path / "out" / "dolfinx" / "quick" / "verdict.json").read_text())
    assert verdict["outcome"] == "PASS"
    tests = json.loads(report.read_text())["tests"]
    assert [t["metadata"]["pde"]["case_id"] for t in tests if "pde" in t.get("metadata", {})] == ["quick"]
    # the run says it was cut short: the terminal, the JSON report, and a report made from it
    assert "pdebench: interrupted: 1 of 2 items judged" in output and "--pde-resume" in output, output[-2000:]
    document = json.loads(report.read_text())
    slow = [t for t in document["tests"] if t["nodeid"].endswith("::slow[dolfinx]")]
    # the item the interrupt stopped is not "passed" (json-report's word once its setup passed)
    assert [t["outcome"] for t in slow] == ["interrupted"], slow
    assert document["pde"]["interrupted"] == {"judged": 1, "selected": 2, "running": [t["nodeid"] for t in slow]}
    assert "passed" not in [t["outcome"] for t in document["tests"] if "pde" not in t.get("metadata", {})]
    made = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "report", str(report), "--out",
                           str(tmp_path / "made"), "--no-figures"], capture_output=True, text=True, timeout=120)
    assert "report was interrupted: 1 of 2 items judged" in made.stderr, (made.stdout, made.stderr)
    return command, solvers, output


def test_sigterm_to_a_parallel_run_ends_it_like_ctrl_c(tmp_path):
    """Slurm at the time limit, `timeout` and `kill` send SIGTERM to the main process only:
    the workers and their solvers must go too, and finished work stays."""
    _interrupted_run(tmp_path, signal.SIGTERM, "-n", "2")


def _resumes(tmp_path: Path, command: list[str], solvers: Path, *extra: str) -> None:
    """--pde-resume after the interruption: the finished item is reused, not run again."""
    (solvers / "slow.py").write_text(NUMPY_PRELUDE + "\ndef solve(case_spec):\n    x, y, u = grid(case_spec)\n"
                                     "    write(u, x, y)\n")
    before = (tmp_path / "out" / "dolfinx" / "quick" / "verdict.json").stat().st_mtime
    done = subprocess.run(command + [*extra, "--pde-resume", "-q"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert "2 passed" in done.stdout, done.stdout[-2000:]
    assert (tmp_path / "out" / "dolfinx" / "quick" / "verdict.json").stat().st_mtime == before
    assert "resumed: 1 of 2 verdicts read back from earlier runs" in done.stdout, done.stdout[-2000:]  # and said


def test_interrupt_keeps_finished_work_and_kills_the_solver(tmp_path):
    command, solvers, _ = _interrupted_run(tmp_path, signal.SIGINT)
    _resumes(tmp_path, command, solvers)


def test_ctrl_c_on_a_cluster_run_then_resume_on_the_cluster(tmp_path, dask_cluster):
    """Issue 19: a cluster run interrupted keeps its finished verdicts (written by the
    controller), kills the run on the worker, and --pde-resume through the cluster runs
    only what did not finish."""
    cluster = f"--pde-cluster={dask_cluster.address}"
    command, solvers, _ = _interrupted_run(tmp_path, signal.SIGINT, cluster)
    _resumes(tmp_path, command, solvers, cluster)
    slow = json.loads((tmp_path / "out" / "dolfinx" / "slow" / "verdict.json").read_text())
    assert slow["outcome"] == "PASS" and slow["worker"].startswith("tcp://"), slow  # timed on a Dask worker


def test_a_verdict_due_after_the_interrupt_is_not_written_unreported(tmp_path):
    """With -n 2, SIGINT to the main process only, while a solver has 3 s left: its worker
    must not write a verdict that the JSON report does not hold (--pde-resume would keep an
    unreported verdict). Either the verdict is missing or the report carries it."""
    marker = f"pdebench-late-{uuid.uuid4().hex}"
    solvers = tmp_path / "solvers" / "dolfinx"
    solvers.mkdir(parents=True)
    (solvers / "late.py").write_text(NUMPY_PRELUDE + "\nimport subprocess\n\ndef solve(case_spec):\n"
                                     f"    subprocess.run(['sh', '-c', 'sleep 4; echo {marker}'])\n"
                                     "    x, y, u = grid(case_spec)\n    write(u, x, y)\n")
    records = [record_dict(new_id="late", nx=20, ny=20)]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", "dolfinx", records, 1e-4, 50.0)
    report = tmp_path / "report.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--pde-library=dolfinx",
         f"--pde-cases={tmp_path / 'cases.jsonl'}", f"--pde-submissions={tmp_path / 'solvers'}",
         f"--pde-calibrations={tmp_path / 'calibrations'}", "--pde-baseline=stored", "--pde-runs=1",
         f"--pde-output={tmp_path / 'out'}", "--json-report", f"--json-report-file={report}"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    deadline = time.time() + 120
    while not _running(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert _running(marker), "the late solver never started"
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    time.sleep(8)  # past the solver's end: a worker left running would have judged it by now
    written = (tmp_path / "out" / "dolfinx" / "late" / "verdict.json").is_file()
    reported = [t for t in json.loads(report.read_text())["tests"] if "pde" in t.get("metadata", {})]
    assert process.returncode == pytest.ExitCode.INTERRUPTED
    assert written == bool(reported), (written, reported)
