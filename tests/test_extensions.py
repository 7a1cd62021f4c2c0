"""The extension points (pytest_pdebench/hookspecs.py) implemented by a plugin outside this
repository: a sandbox backend, a source, machine info and a verdict's last word, through a
real pytest run of toy cases in the real sandbox."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytest_pdebench.testing import NUMPY_PRELUDE, run_track, toy_cases

EXACT = NUMPY_PRELUDE + "\ndef solve(case_spec):\n    x, y, u = grid(case_spec)\n    write(u, x, y)\n"

# a third party's plugin: a backend that is bubblewrap with a log of the runs it made, the
# machine's GPU, and a reviewer's name on every verdict
OTHER_PLUGIN = '''
from pathlib import Path

from pytest_pdebench.sandbox import BubblewrapBackend

LOG = Path(__file__).with_name("runs.log")


class Logged(BubblewrapBackend):
    def run(self, request):
        result = super().run(request)
        with open(LOG, "a") as handle:
            handle.write(f"{result.returncode}\\n")
        return result


def pytest_pdebench_add_backends(backends):
    backends["logged"] = Logged


def pytest_pdebench_machine_info(machine_info):
    machine_info["gpu"] = "none"


def pytest_pdebench_verdict(verdict, extra):
    extra["reviewed_by"] = "the other plugin"
    extra["outcome_seen"] = verdict["outcome"]
'''


def _with_plugin(tmp_path, name: str, text: str) -> tuple[str, ...]:
    (tmp_path / "plugins").mkdir(exist_ok=True)
    (tmp_path / "plugins" / f"{name}.py").write_text(textwrap.dedent(text))
    return "-p", name


def test_a_plugin_adds_a_backend_machine_info_and_a_verdicts_last_word(tmp_path, dolfinx_available, monkeypatch):
    cases, submissions = toy_cases(tmp_path, "dolfinx", {"exact": EXACT}, e_base=1e-6)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "plugins"))
    done, outcomes = run_track(tmp_path, "dolfinx", cases, submissions, "--pde-sandbox=logged",
                               f"--pde-calibrations={tmp_path / 'calibrations'}",
                               *_with_plugin(tmp_path, "other_plugin", OTHER_PLUGIN))  # fmt: skip
    assert outcomes["exact"]["outcome"] == "PASS", done.stdout[-3000:] + done.stderr[-2000:]
    assert outcomes["exact"]["extra"] == {"reviewed_by": "the other plugin", "outcome_seen": "PASS"}
    report = json.loads((tmp_path / "report-dolfinx.json").read_text())
    assert report["pde"]["machine_info"] == {"gpu": "none"} and report["pde"]["sandbox"] == "logged"
    runs = (tmp_path / "plugins" / "runs.log").read_text().split()
    assert runs and set(runs) == {"0"}, runs  # the item's gated and timed runs went through it


SOURCE_PLUGIN = f'''
from pytest_pdebench.sources import Draft, Submission

SOLVER = {EXACT!r}


class Pasted:
    label = "pasted"
    attempts = 1
    attempt_folders = False

    def draft(self, item, attempt, feedback):
        return Draft(Submission("solver.py", {{"solver.py": SOLVER.encode()}}, "pasted by a plugin"))

    def summary(self, history):
        return None


def pytest_pdebench_source(config):
    return Pasted()
'''


def test_a_plugins_source_runs_alone_and_goes_with_no_other_source(tmp_path, dolfinx_available, monkeypatch):
    cases, submissions = toy_cases(tmp_path, "dolfinx", {"exact": "raise SystemExit('never run')"}, e_base=1e-6)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "plugins"))
    plugin = _with_plugin(tmp_path, "source_plugin", SOURCE_PLUGIN)
    done, outcomes = run_track(tmp_path, "dolfinx", cases, submissions, *plugin)
    assert "a plugin's source (pasted)" in done.stderr and "--pde-submissions" in done.stderr, done.stderr[-2000:]
    assert not outcomes
    # the source alone: the cases are the run's, the solvers the plugin's
    command = ["-m", "pytest", "-p", "no:cacheprovider", f"--pde-cases={cases}", "--pde-library=dolfinx",
               "--pde-runs=1", "--pde-baseline=stored", f"--pde-calibrations={tmp_path / 'calibrations'}",
               f"--pde-output={tmp_path / 'out'}", *plugin, "-q"]  # fmt: skip
    import subprocess
    import sys

    from pytest_pdebench.testing import REPO

    alone = subprocess.run([sys.executable, *command], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert alone.returncode == 0 and "1 passed" in alone.stdout, alone.stdout[-3000:] + alone.stderr[-2000:]
    assert (tmp_path / "out" / "dolfinx" / "exact" / "verdict.json").is_file()


@pytest.mark.parametrize(
    ("hook", "says"),
    [
        ('def pytest_pdebench_add_backends(backends):\n    backends["docker"] = object\n',
         "a plugin adds a sandbox backend named docker: a built-in name"),
        ('def pytest_pdebench_add_tracks(tracks):\n    tracks["fenics"] = object()\n',
         "a plugin gives a track for fenics: the cases name only dolfinx, firedrake, dealii"),
    ],
)  # fmt: skip
def test_a_plugin_that_takes_a_built_in_name_or_an_unknown_library_is_refused(tmp_path, monkeypatch, hook, says):
    cases, submissions = toy_cases(tmp_path, "dolfinx", {"exact": EXACT})
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "plugins"))
    done, outcomes = run_track(tmp_path, "dolfinx", cases, submissions, *_with_plugin(tmp_path, "bad_plugin", hook))
    assert done.returncode == 4 and says in done.stderr, done.stderr[-2000:]


def test_an_unknown_sandbox_is_named_with_the_ones_there_are(tmp_path):
    cases, submissions = toy_cases(tmp_path, "dolfinx", {"exact": EXACT})
    done, _ = run_track(tmp_path, "dolfinx", cases, submissions, "--pde-sandbox=firejail")
    assert "--pde-sandbox: unknown sandbox 'firejail'; choose one of bubblewrap, docker, none" in done.stderr


WEAK_PLUGIN = '''
from pytest_pdebench.sandbox import UnsandboxedBackend


def pytest_pdebench_add_backends(backends):
    backends["unsandboxed"] = UnsandboxedBackend
'''


def test_the_red_team_probes_name_what_a_plugins_backend_lets_through(tmp_path, dolfinx_available, monkeypatch):
    """testing.redteam as a backend's author runs it: on a backend with no isolation at all,
    the memo probes that write the host's /dev/shm or above their run folder keep their
    answer between runs, and a child outlives its run: each is named; the probes the harness
    itself stops (a linked, oversize or bomb output) are not."""
    from pytest_pdebench.testing.redteam import python_probe_problems

    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "plugins"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the memo_tmpdir probe's file, if the runs see it
    backend = ["--pde-sandbox=unsandboxed", "--pde-runner=cold", *_with_plugin(tmp_path, "weak_plugin", WEAK_PLUGIN)]
    shm = Path("/dev/shm/memo.npy")  # where memo_shm leaves its answer on this host, unsandboxed
    try:
        problems = python_probe_problems(tmp_path / "probes", "dolfinx", backend)
    finally:  # what the unsandboxed probes left on the host: their memo, the verdict audit_write aims up
        for left in (shm, Path("/tmp/m.npy"), Path("/dev/shm/verdict.json")):
            if left.is_file() and (left.suffix == ".npy" or left.read_text() == '{"outcome": "PASS"}'):
                left.unlink()
    assert {"memo_shm", "memo_above_run_folder", "lingering_child"} <= set(problems), problems
    assert not {"link_absolute", "fifo_output", "oversize_output", "bomb_output"} & set(problems), problems
