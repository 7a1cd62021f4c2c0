"""Red team: submissions that try to pass without solving, through the real plugin and
sandbox on every provisioned track; each must get the honest verdict. The probes and their
checks are ``pytest_pdebench.testing.redteam``'s (a backend another plugin adds runs them the
same way); here they run on bubblewrap (warm and cold runner), containers and a Dask cluster,
beside the parts that need no sandbox.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

from pytest_pdebench import kernel_cache
from pytest_pdebench.gates import GateFailure, read_solution_file
from pytest_pdebench.grid import EvalGrid
from pytest_pdebench.libraries.dolfinx import DolfinxTrack
from pytest_pdebench.run_files import UnsafeOutput, read_run_file
from pytest_pdebench.testing import NUMPY_PRELUDE, docker_machine, run_track, toy_cases
from pytest_pdebench.testing.probes import E_BASE, NX, NY, PROBE_PRELUDE, T_BASE
from pytest_pdebench.testing.redteam import cpp_probe_problems, exploit_problems, python_probe_problems


@pytest.mark.fem
@pytest.mark.parametrize("track", ["dolfinx", "dolfinx-cold", "firedrake", "dolfinx-docker", "dolfinx-cluster"])
def test_python_probes_get_the_honest_verdict(track, request, tmp_path):
    """dolfinx: the warm runner (the default); dolfinx-cold: a fresh interpreter per run;
    dolfinx-cluster: on the two workers of a Dask cluster instead of two xdist workers."""
    library, _, sandbox = track.partition("-")
    machine, backend = None, ["-n", "2"]
    if sandbox == "cold":
        backend += ["--pde-runner=cold"]
    if sandbox == "cluster":
        backend = [f"--pde-cluster={request.getfixturevalue('dask_cluster').address}"]
    if sandbox == "docker":  # the same probes in containers, through a real engine
        machine, backend = docker_machine(request.getfixturevalue("dolfinx_image")), ["-n", "2", "--pde-sandbox=docker"]
    else:
        request.getfixturevalue(f"{library}_available")
    assert not python_probe_problems(tmp_path, library, backend, machine, copies_out=sandbox == "docker")


@pytest.mark.fem
@pytest.mark.parametrize("sandbox", ["bubblewrap", "docker"])
def test_cpp_probes_get_the_honest_verdict(sandbox, request, tmp_path):
    machine, backend = None, []
    if sandbox == "docker":
        machine, backend = docker_machine(request.getfixturevalue("dealii_image")), ["--pde-sandbox=docker"]
    else:
        request.getfixturevalue("dealii_available")
    assert not cpp_probe_problems(tmp_path, backend, machine, copies_out=sandbox == "docker")


# --- the parts on their own: no sandbox needed ---

def test_run_files_are_read_only_as_regular_files_of_the_folder(tmp_path):
    (tmp_path / "good").write_bytes(b"12345")
    (tmp_path / "big").write_bytes(b"x" * 100)
    (tmp_path / "outside").write_bytes(b"answer")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(tmp_path / "outside", run / "absolute")
    os.symlink("../outside", run / "relative")
    os.mkfifo(run / "fifo")
    os.link(tmp_path / "good", run / "hard")  # a hard link is a regular file in the folder: fine
    assert read_run_file(tmp_path, "good", 10) == b"12345"
    assert read_run_file(tmp_path, "missing", 10) is None
    assert read_run_file(run, "hard", 10) == b"12345"
    for name, words in (("absolute", "symbolic link"), ("relative", "symbolic link"), ("fifo", "a FIFO")):
        with pytest.raises(UnsafeOutput, match=words):
            read_run_file(run, name, 10)
    with pytest.raises(UnsafeOutput, match="100 bytes, over the 10-byte cap"):
        read_run_file(tmp_path, "big", 10)
    with pytest.raises(ValueError):
        read_run_file(tmp_path, "../good", 10)


def test_binary_outputs_are_read_without_following_links(tmp_path):
    grid = EvalGrid.from_spec({"nx": 4, "ny": 3, "bbox": [0, 1, 0, 1]})
    np.ones(grid.shape).tofile(tmp_path / "answer.bin")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(tmp_path / "answer.bin", run / "solution_grid.bin")
    with pytest.raises(GateFailure, match="solution_grid.bin is a symbolic link"):
        read_solution_file(run, ["u"], grid, binary_outputs=True)


def _shared_object(tmp_path: Path) -> bytes:
    """A real shared library, as a form compiler leaves one."""
    import subprocess

    source = tmp_path / "k.c"
    source.write_text("double kernel(double x) { return 2 * x; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", tmp_path / "k.so", source], check=True)
    return (tmp_path / "k.so").read_bytes()


def test_kernel_store_keeps_compiled_kernels_only(tmp_path):
    library = _shared_object(tmp_path)
    cache = kernel_cache.KernelCache(tmp_path / "store", DolfinxTrack.kernel_rules)
    run = tmp_path / "run1"
    cache.prepare(run, str(tmp_path / "store"))
    module = "fenics/libffcx_forms_" + "0a" * 20
    (run / "fenics").mkdir()
    (run / f"{module}.cpython-312-x86_64-linux-gnu.so").write_bytes(library)
    (run / f"{module}.c").write_text("/* generated code */ static double answer[] = {1, 2, 3};")
    (run / f"{module}.c.cached").write_text("build log")
    planted = {
        "memo.npy": b"\x93NUMPY",  # not a kernel's name
        "fenics/libffcx_forms_" + "1b" * 20 + ".cpython-312-x86_64-linux-gnu.so": b"\x7fELF" + bytes(200),
        "fenics/libffcx_forms_" + "2c" * 20 + ".cpython-312-x86_64-linux-gnu.so": library + b"appended answer",
    }
    for name, content in planted.items():
        (run / name).write_bytes(content)
    os.symlink(tmp_path / "outside.so", run / "fenics" / ("libffcx_forms_" + "3d" * 20 + ".cpython-312-x86_64-linux-gnu.so"))
    os.mkfifo(run / "fenics" / ("libffcx_forms_" + "4e" * 20 + ".c"))
    harvest = cache.harvest(run)
    stored = sorted(p.relative_to(tmp_path / "store").as_posix() for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert stored == sorted([f"{module}.c", f"{module}.c.cached", f"{module}.cpython-312-x86_64-linux-gnu.so"])
    assert harvest.kept == 3 and sorted(harvest.dropped) == sorted(
        list(planted) + ["fenics/libffcx_forms_" + "4e" * 20 + ".c"])
    assert (tmp_path / "store" / f"{module}.c").read_bytes() == b""  # the source's content is not kept
    assert (tmp_path / "store" / f"{module}.cpython-312-x86_64-linux-gnu.so").read_bytes() == library
    # the next run sees the kernels as links into the read-only store, and nothing else
    cache.prepare(tmp_path / "run2", "/sandbox/kernels")
    links = {p.relative_to(tmp_path / "run2").as_posix(): os.readlink(p) for p in (tmp_path / "run2").rglob("*")
             if p.is_symlink()}
    assert links == {name: f"/sandbox/kernels/{name}" for name in stored}


def test_a_run_adds_whole_modules_within_its_caps(tmp_path):
    """A module's library and markers are kept together or not at all, within the files a
    run may add; a marker whose module has no library is dropped."""
    library = _shared_object(tmp_path)
    cache = kernel_cache.KernelCache(tmp_path / "store", DolfinxTrack.kernel_rules, max_files=4)
    run = tmp_path / "run"
    (run / "fenics").mkdir(parents=True)
    for digit in "12":  # two modules of three files each: only the first fits in four
        module = "fenics/libffcx_forms_" + digit * 40
        (run / f"{module}.cpython-312-x86_64-linux-gnu.so").write_bytes(library)
        (run / f"{module}.c").write_text("")
        (run / f"{module}.c.cached").write_text("")
    (run / ("fenics/libffcx_forms_" + "3" * 40 + ".c")).write_text("")  # a name, and nothing beside it
    harvest = cache.harvest(run)
    stored = sorted(p.name for p in (tmp_path / "store" / "fenics").iterdir())
    assert stored == sorted(f"libffcx_forms_{'1' * 40}{suffix}"
                            for suffix in (".c", ".c.cached", ".cpython-312-x86_64-linux-gnu.so"))
    assert harvest.kept == 3 and len(harvest.dropped) == 4
    assert sum("over the 4 files" in reason for reason in harvest.dropped) == 3


def test_a_form_kernel_and_its_imitations(tmp_path):
    library = _shared_object(tmp_path)
    assert kernel_cache.is_shared_object(library)
    for imitation in (b"\x7fELF" + bytes(60), library + b"data", b"data" + library, library[:-8]):
        assert not kernel_cache.is_shared_object(imitation)
    object_file = tmp_path / "k.o"
    import subprocess

    subprocess.run(["cc", "-c", "-o", object_file, tmp_path / "k.c"], check=True)
    assert not kernel_cache.is_shared_object(object_file.read_bytes())  # relocatable, not shared


def test_an_npz_is_read_from_its_bytes(tmp_path):
    from pytest_pdebench.gates import read_solution

    buffer = io.BytesIO()
    x, y = np.linspace(0, 1, 4), np.linspace(0, 1, 3)
    np.savez(buffer, u=np.ones((3, 4)), x=x, y=y)
    solution = read_solution(buffer.getvalue(), ["u"], ("x", "y"), (3, 4), np.ones((3, 4), bool))
    assert solution.shape == (3, 4, 1)


# --- runs that try to tell which run they are, to carry data between runs, or to leave
# the results (issue 37). Each gets the honest verdict: F-Time for the slow honest work
# the time gate was meant to see, F-Acc where a timed run did less, F-Exec where the
# outputs break a reader.

@pytest.mark.fem
@pytest.mark.parametrize("track", ["dolfinx", "dolfinx-cold", "dolfinx-docker"])
def test_exploits_of_the_harness_get_the_honest_verdict(track, request, tmp_path):
    """Runs that tell which run they are, carry data between runs or break a reader, from a
    harness that holds a session keyring, on two pinned workers (three timed runs: each
    judged); the CPU accounting is measured in bubblewrap only."""
    library, _, sandbox = track.partition("-")
    machine, backend = None, ["-n", "2"]
    if sandbox == "cold":
        backend += ["--pde-runner=cold"]
    if sandbox == "docker":
        machine, backend = docker_machine(request.getfixturevalue("dolfinx_image")), ["-n", "2", "--pde-sandbox=docker"]
    else:
        request.getfixturevalue("dolfinx_available")
    problems = exploit_problems(tmp_path, library, backend, machine, copies_out=sandbox == "docker",
                                cores=sandbox != "docker")
    assert not problems, problems


VIEW_SOLVER = NUMPY_PRELUDE + textwrap.dedent('''
    import os
    import sys

    PROVIDED = ("/sandbox/work", "/sandbox/cache", "/sandbox/kernels", "/sandbox/harness", "/tmp")

    def without_counters(mountinfo):
        """The mount table less the mount ids and the numbers of anonymous devices (0:N):
        system-wide counters of the kernel, which depend on what else the machine mounts
        at that moment, as inode numbers do."""
        lines = []
        for line in mountinfo.splitlines():
            fields = line.split()
            fields[0] = fields[1] = "#"
            fields[2] = "0:#" if fields[2].startswith("0:") else fields[2]
            lines.append(" ".join(fields))
        return "\\n".join(lines)

    def view():
        """What this run can see of itself and of what the harness gave it. Not compared:
        st_ino and st_ctime (the kernel's counter and clock, set by no one) and st_atime
        (the run's own reads set it)."""
        stats = {}
        for top in PROVIDED:
            for folder, subfolders, files in os.walk(top):
                for path in [folder] + [os.path.join(folder, name) for name in sorted(files + subfolders)]:
                    info = os.lstat(path)
                    stats[path] = [info.st_mode, info.st_nlink, info.st_uid, info.st_gid, info.st_size,
                                   info.st_mtime_ns, info.st_dev]
        status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
        return {"mountinfo": without_counters(open("/proc/self/mountinfo").read()),
                "environ": open("/proc/self/environ").read(),
                "cwd": os.getcwd(), "argv": sys.argv, "pid": os.getpid(), "ppid": os.getppid(),
                "cpus": status["Cpus_allowed_list"].strip(), "stats": stats}

    def solve(case_spec):
        seen = view()  # before this run writes anything
        x, y, u = grid(case_spec)
        np.savez("solution.npz", u=u, x=x, y=y)
        json.dump({"wall_time_sec": 0.01, "status": "success", "solver_info": {"view": seen}}, open("meta.json", "w"))
''')


@pytest.mark.fem
@pytest.mark.parametrize("runner", ["warm", "cold"])
def test_a_run_cannot_tell_which_run_it_is(runner, dolfinx_available, tmp_path):
    """The gated run and two timed runs of one item see the same mount table, environment,
    working folder, and files and folders the harness provides; none names the case, the
    item's folder or the submission."""
    from pytest_pdebench.execution import RunTask, execute
    from pytest_pdebench.sandbox import Limits
    from pytest_pdebench.sources import Submission

    case_id = f"view_probe_{uuid.uuid4().hex[:8]}"
    submission = Submission("view_solver.py", {"view_solver.py": VIEW_SOLVER.encode()}, origin="test")
    spec = {"case_spec": {"eval_grid": {"nx": NX, "ny": NY, "bbox": [0, 1, 0, 1]}}}
    task = RunTask("dolfinx", case_id, spec, ("u",), submission, Limits(timeout_sec=120, memory_mb=4096), runs=2,
                   sandbox="bubblewrap", runner=runner)
    audit = tmp_path / "out" / "dolfinx" / case_id
    audit.mkdir(parents=True)
    done = execute(task, audit)
    assert done.ran and done.timed_failure is None and len(done.timed_outputs) == 2, (done.stderr, done.timed_failure)
    views = [json.loads(meta)["solver_info"]["view"] for meta in [done.meta] + [o.meta for o in done.timed_outputs]]
    for number, timed in enumerate(views[1:], 1):
        differing = {key: (views[0][key], timed[key]) for key in views[0] if views[0][key] != timed[key]}
        if "mountinfo" in differing:
            gated, later = (text.splitlines() for text in differing.pop("mountinfo"))
            differing["mountinfo"] = [(a, b) for a, b in zip(gated, later) if a != b]
        if "stats" in differing:
            gated, later = differing.pop("stats")
            differing["stats"] = {path: (gated.get(path), later.get(path)) for path in {*gated, *later}
                                  if gated.get(path) != later.get(path)}
        assert not differing, (number, differing)
    seen = json.dumps(views[0])
    for secret in (case_id, str(tmp_path), submission.fingerprint, "/.work/"):
        assert secret not in seen, secret
    assert views[0]["cwd"] == "/sandbox/work" and "case_spec.json" in "".join(views[0]["stats"])
    assert not list(Path("/dev/shm").glob("pytest-pdebench-scratch-*/*/view_solver.py"))  # nothing of the item's left behind


@pytest.mark.fem
def test_a_run_that_floods_its_folders_fails(dolfinx_available, tmp_path):
    """Issue 46: a run's folders live in memory (/dev/shm); what it leaves there counts
    against its memory limit, and is freed before any other run starts."""
    body = textwrap.dedent("""\
        for index in range(6):  # 6 x 100 MB, each file under the file-size limit
            with open(f"/tmp/flood-{index}", "wb") as out:
                out.write(bytes(100 << 20))
        x, y, u = grid(case_spec)
        write(u, x, y)""")
    solvers = {"flood": PROBE_PRELUDE + "\ndef solve(case_spec):\n" + textwrap.indent(body, "    ") + "\n"}
    cases, submissions = toy_cases(tmp_path, "dolfinx", solvers, E_BASE, T_BASE, NX, NY)
    done, outcomes = run_track(tmp_path, "dolfinx", cases, submissions, f"--pde-calibrations={tmp_path / 'calibrations'}",
                               "--pde-memory-mb=512")
    verdict = outcomes["flood"]
    assert verdict["outcome"] == "F-Exec" and "MB in its folders, over its memory limit of 512 MB" in verdict["reason"], (
        verdict["reason"], done.stdout[-2000:])


# --- code agents: what the harness writes where an agent wrote, what an agent's command names

AGENT_PROBE_MODELS = ("agent-plant", "agent-named-folder")


@pytest.fixture(scope="module")
def scripted_server():
    from pytest_pdebench.testing.llm_server import ScriptedServer

    with ScriptedServer() as running:
        yield running


@pytest.fixture
def places():
    from pytest_pdebench.testing import llm_server

    yield llm_server.PLACES
    llm_server.PLACES.clear()


def _agent(kind: str, *named: str) -> str:
    if kind == "mini-swe-agent":
        from pytest_pdebench.testing import missing

        if importlib.util.find_spec("minisweagent") is None:
            missing("mini-swe-agent: pip install 'pytest-pdebench[agents]' (make setup does)")
        return kind
    from pytest_pdebench.testing.agent_runs import command_agent

    return command_agent(8, *named)


@pytest.mark.fem
@pytest.mark.parametrize("plant", ["link", "fifo", "folder"])
@pytest.mark.parametrize("kind", ["command", "mini-swe-agent"])
def test_the_harness_never_writes_through_what_an_agent_left(kind, plant, dolfinx_available, scripted_server, places,
                                                             tmp_path):
    """Attempt 1 leaves a link to a host file, a FIFO or a folder where the harness writes the
    next task, and a solver that fails with a chosen line (the feedback quotes it): the host
    file stays untouched, the harness neither hangs nor fails, and attempt 2 gets its task."""
    from pytest_pdebench.testing.agent_runs import agent_bench, run_agent

    victim = tmp_path / "site-packages" / "pdebench-probe.pth"
    victim.parent.mkdir()
    places.update(plant=plant, victim=str(victim))
    bench = agent_bench(tmp_path / "bench", scripted_server.url, AGENT_PROBE_MODELS)
    verdict, folder = run_agent(bench, "agent-plant", _agent(kind), "--pde-attempts=2", "--pde-baseline=stored")
    assert not victim.exists() and not victim.is_symlink(), "the harness wrote through the agent's link"
    assert verdict["outcome"] == "F-Exec", verdict
    assert [a["outcome"] for a in verdict["llm"]["attempts"]] == ["F-Exec", "F-Exec"], verdict["llm"]
    task = folder / "workspace" / "TASK-2.md"
    assert task.is_file() and not task.is_symlink() and "THE EVALUATOR'S VERDICT" in task.read_text()
    assert "os.system" in (folder / "attempt-2" / "task.md").read_text()  # the line did reach the task


@pytest.mark.fem
@pytest.mark.parametrize("named", ["output", "checkout"])
def test_a_folder_an_agent_command_names_stays_out_of_its_sight(named, dolfinx_available, scripted_server, places,
                                                                tmp_path, monkeypatch):
    """A command agent whose command line names the session's output folder (where the
    baseline pass left the oracle's solution of its very case) or another checkout of the
    project (with the case's answer) reads nothing there: the solver it leaves, which would
    write the stolen field, has nothing to write."""
    from pytest_pdebench.testing.agent_runs import agent_bench, run_agent

    monkeypatch.setenv("PDEBENCH_BASELINES", str(tmp_path / "kept"))  # the pass times toy_a in this session
    bench = agent_bench(tmp_path / "bench", scripted_server.url, AGENT_PROBE_MODELS)
    if named == "output":
        folder, answer = bench / "out", "baselines/dolfinx/toy_a/solution.npz"
    else:  # another checkout, its references holding the case's exact field
        folder, answer = tmp_path / "other-checkout", "cases/references/toy_a.npz"
        (folder / "cases" / "references").mkdir(parents=True)
        namespace: dict = {}
        exec(NUMPY_PRELUDE, namespace)
        x, y, u = namespace["grid"]({"eval_grid": {"nx": NX, "ny": NY, "bbox": [0, 1, 0, 1]}})
        np.savez(folder / answer, u=u, x=x, y=y)
    places.update(named=str(folder), answer=answer)
    verdict, item = run_agent(bench, "agent-named-folder", _agent("command", "--look", str(folder)))
    trail = (item / "attempt-1" / "agent-stdout.txt").read_text()
    assert "copied=1" in trail, trail[-2000:]  # cp found nothing to copy
    assert verdict["outcome"] != "PASS", verdict


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("untouched")
    return victim


def _untouched(victim: Path) -> bool:
    return sorted(p.name for p in victim.iterdir()) == ["keep.txt"] and (victim / "keep.txt").read_text() == "untouched"


@pytest.mark.fem
@pytest.mark.parametrize("sandbox", ["bubblewrap", "docker"])
def test_what_a_model_written_solver_leaves_in_its_folders_is_removed_never_followed(
    sandbox, request, places, tmp_path
):
    """A model's correct solver leaves, in its working, cache and /tmp folders, links to a host
    folder (named as files the harness handles), a FIFO and folders it made unreadable: the
    item PASSes, every run's folders are removed, and the host folder is untouched."""
    import subprocess
    import sys

    from pytest_pdebench.testing import (REPO, docker_machine, outcomes_from_report, record_dict, write_calibration,
                                         write_jsonl)
    from pytest_pdebench.testing.llm_server import ScriptedServer

    machine = None
    if sandbox == "docker":
        machine = docker_machine(request.getfixturevalue("dolfinx_image"))
    else:
        request.getfixturevalue("dolfinx_available")
    victim = _victim(tmp_path)
    places.update(victim=str(victim))
    records = [record_dict(new_id="toy_a", nx=20, ny=20)]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", "dolfinx", records, 1e-4, 5.0, machine)
    report = tmp_path / "report.json"
    with ScriptedServer() as server:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx",
             f"--pde-cases={tmp_path / 'cases.jsonl'}", "--pde-model=scripted-plant", f"--pde-base-url={server.url}",
             "--pde-api-key-env=PDEBENCH_TEST_KEY", f"--pde-calibrations={tmp_path / 'calibrations'}",
             "--pde-baseline=stored", "--pde-runs=2", f"--pde-sandbox={sandbox}", f"--pde-output={tmp_path / 'out'}",
             f"--pde-llm-cache={tmp_path / 'cache'}", "--json-report", f"--json-report-file={report}"],
            cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, "PDEBENCH_TEST_KEY": "k"})
    verdict = outcomes_from_report(report)["toy_a"] if report.exists() else {}
    assert verdict.get("outcome") == "PASS", done.stdout[-3000:] + done.stderr[-1000:]
    planted = (tmp_path / "out" / "dolfinx" / "toy_a" / "attempt-1" / "stdout.txt").read_text()
    assert planted.count("planted in") == 3 and "not planted" not in planted, planted  # the probe did its part
    assert _untouched(victim)
    assert not list(Path("/dev/shm").glob("pytest-pdebench-scratch-*/work/locked")), "a run's folder was left"


@pytest.mark.fem
@pytest.mark.parametrize("plant", ["link", "fifo", "folder"])
def test_mini_swe_agent_in_containers_leaves_nothing_the_harness_writes_through(plant, dolfinx_image, scripted_server,
                                                                                places, tmp_path):
    """The same plants under --pde-sandbox=docker: each command's files come back as regular
    files and folders only, and the next task is written where the planted name was."""
    from pytest_pdebench.testing import docker_machine
    from pytest_pdebench.testing.agent_runs import agent_bench, run_agent

    victim = tmp_path / "site-packages" / "pdebench-probe.pth"
    victim.parent.mkdir()
    places.update(plant=plant, victim=str(victim))
    bench = agent_bench(tmp_path / "bench", scripted_server.url, AGENT_PROBE_MODELS, docker_machine(dolfinx_image))
    verdict, folder = run_agent(bench, "agent-plant", _agent("mini-swe-agent"), "--pde-attempts=2",
                                "--pde-baseline=stored", "--pde-sandbox=docker")  # fmt: skip
    assert not victim.exists() and not victim.is_symlink()
    assert [a["outcome"] for a in verdict["llm"]["attempts"]] == ["F-Exec", "F-Exec"], verdict["llm"]
    task = folder / "workspace" / "TASK-2.md"
    assert task.is_file() and not task.is_symlink() and "THE EVALUATOR'S VERDICT" in task.read_text()
