"""The docker backend against a real engine (podman's Docker API here, started by the
``container_engine`` fixture): nothing left behind, leftovers of dead runs swept, the
oracles of two tracks on real cases, an LLM-written solver and Ctrl-C in a container.
The gate suite and the sandbox contract run on this backend too (test_gates.py,
test_sandbox.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_pdebench.sandbox import Limits, RunRequest
from pytest_pdebench.sandbox.docker_backend import CASE_LABEL, LABEL, DockerBackend, labelled_containers
from pytest_pdebench.testing import (DOLFINX_CASES, NUMPY_PRELUDE, ORACLE, REPO, docker_machine, outcomes_from_report,
                                     processes_with,
                                     record_dict, run_track, write_calibration, write_jsonl)

# the last is meshed by the gmsh executable, which the image must hold as the host's runtime does
DEALII_CASES = ["poisson_graded_kappa_l_shape_050", "heat_short_unit_square_robin_021", "stokes_nu01_unit_square_010",
                "poisson_contrast_kappa_dumbbell_048"]


def pdebench_containers(engine, under=None) -> list[dict]:
    """This backend's containers; with ``under``, only those of items whose work folder is
    below it (the engine is shared: another run on this machine, a calibration say, has
    its own containers, which are none of this test's business)."""
    found = labelled_containers(engine)
    if under is None:
        return found
    return [c for c in found if (c.get("Labels") or {}).get(CASE_LABEL, "").startswith(str(under))]


@pytest.fixture(scope="module")
def engine(container_engine):
    import docker

    return docker.DockerClient(base_url=container_engine, timeout=120)


def python_request(tmp_path, image, body: str, timeout: float = 20) -> RunRequest:
    from pytest_pdebench.containers import RECIPES_BY_TRACK

    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir(parents=True)
    cache.mkdir(parents=True)
    (work / "case_spec.json").write_text(json.dumps({"case_spec": {}}))
    (work / "solver.py").write_text(body)
    return RunRequest([RECIPES_BY_TRACK["dolfinx"].python, "-I", "{harness}/runner.py", "solver.py", ""], work, cache,
                      {"PATH": "/usr/bin:/bin"}, [], Limits(timeout_sec=timeout, memory_mb=1024), image=image)


def test_no_container_outlives_its_run_even_a_timed_out_one(engine, dolfinx_image, tmp_path):
    backend = DockerBackend(engine)
    done = backend.run(python_request(tmp_path / "a", dolfinx_image, "def solve(c):\n    open('x', 'w').write('1')\n"))
    assert done.returncode == 0 and (tmp_path / "a" / "work" / "x").read_text() == "1"
    assert done.solve_sec is not None and 0 < done.solve_sec < done.wall_sec
    slow = backend.run(python_request(tmp_path / "b", dolfinx_image, "import time\ndef solve(c):\n"
                                      "    time.sleep(600)\n", timeout=2))
    assert slow.timed_out and slow.wall_sec < 30
    assert pdebench_containers(engine, under=tmp_path) == []


def test_a_run_sweeps_the_containers_of_dead_runs(engine, dolfinx_image):
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = engine.containers.create(dolfinx_image, ["true"], labels={LABEL: str(dead.pid)}, network_mode="none")
    assert DockerBackend(engine).sweep() >= 1
    assert leftover.id not in {c["Id"] for c in pdebench_containers(engine)}


def test_a_missing_image_is_a_sandbox_error_that_says_what_to_do(engine, tmp_path):
    from pytest_pdebench.sandbox import SandboxError

    with pytest.raises(SandboxError, match="pdebench containers build"):
        DockerBackend(engine).run(python_request(tmp_path, "pdebench-nothing:0", "x = 1\n"))


@pytest.mark.fem
def test_dolfinx_oracle_passes_one_case_per_family_in_its_image(dolfinx_image, tmp_path):
    done, outcomes = run_track(tmp_path, "dolfinx", REPO / "cases", ORACLE, "--pde-calibrate", "--pde-runs=1",
                               "--pde-sandbox=docker", f"--pde-calibrations={tmp_path / 'calibrations'}",
                               "-n", "2", "-k", " or ".join(DOLFINX_CASES))
    assert sorted(outcomes) == sorted(DOLFINX_CASES), done.stdout[-3000:]
    for case_id, verdict in outcomes.items():
        assert verdict["outcome"] == "PASS" and verdict["sandbox"] == "docker", (case_id, verdict["reason"])
        assert verdict["calibration_problem"] is None, case_id
    written = list((tmp_path / "calibrations" / "dolfinx").glob("*.json"))
    assert [path.name for path in written] == [f"{docker_machine(dolfinx_image)}.json"]


@pytest.mark.fem
def test_dealii_oracle_compiles_and_passes_in_its_image(dealii_image, tmp_path):
    done, outcomes = run_track(tmp_path, "dealii", REPO / "cases", ORACLE, "--pde-calibrate", "--pde-runs=1",
                               "--pde-sandbox=docker", f"--pde-calibrations={tmp_path / 'calibrations'}",
                               "-k", " or ".join(DEALII_CASES))
    assert sorted(outcomes) == sorted(DEALII_CASES), done.stdout[-3000:]
    for case_id, verdict in outcomes.items():
        assert verdict["outcome"] == "PASS", (case_id, verdict["reason"])
        assert verdict["runtime_version"] == "9.4.1"


# the quickest baseline of each of the Firedrake track's 8 families
FIREDRAKE_CASES = ["biharmonic_plate_dumbbell_025", "cd_rotating_t_junction_noexact_013",
                   "elasticity_stiff_unit_square_049", "heat_short_unit_square_noexact_013", "helmholtz_k20_unit_square_006",
                   "poisson_graded_kappa_sector_noexact_007", "rd_cubic_unit_square_noexact_003",
                   "stokes_nu1_unit_square_noexact_009"]


@pytest.mark.fem
def test_firedrake_oracle_passes_in_its_image_where_it_was_built(container_engine, tmp_path):
    """The Firedrake image takes 25-40 minutes to build (`pdebench containers build
    firedrake`), so no test builds it; where it exists, its oracle runs one case per family."""
    from pytest_pdebench.containers import ContainerError, image_for

    try:
        image_for("firedrake")
    except ContainerError as exc:
        pytest.skip(str(exc))
    done, outcomes = run_track(tmp_path, "firedrake", REPO / "cases", ORACLE, "--pde-calibrate", "--pde-runs=1",
                               "--pde-sandbox=docker", f"--pde-calibrations={tmp_path / 'calibrations'}",
                               "-n", "2", "-k", " or ".join(FIREDRAKE_CASES), timeout=1800)
    assert sorted(outcomes) == sorted(FIREDRAKE_CASES), done.stdout[-3000:]
    for case_id, verdict in outcomes.items():
        assert verdict["outcome"] == "PASS" and verdict["sandbox"] == "docker", (case_id, verdict["reason"])
        assert verdict["runtime_version"].startswith("2026.10"), verdict["runtime_version"]


def test_an_unusable_image_skips_its_items_and_says_why(container_engine, tmp_path):
    records = [record_dict(new_id="toy_a", nx=20, ny=20)]
    write_jsonl(tmp_path / "cases.jsonl", records)
    done, outcomes = run_track(tmp_path, "dolfinx", tmp_path / "cases.jsonl", ORACLE, "--pde-sandbox=docker",
                               "--pde-image=dolfinx=pdebench-no-such-image:0", "-rs",
                               f"--pde-calibrations={tmp_path / 'calibrations'}")
    assert "INTERNALERROR" not in done.stdout + done.stderr, done.stdout[-3000:]
    assert "pdebench-no-such-image:0 for the dolfinx track is not there" in done.stdout, done.stdout[-3000:]
    assert not outcomes, outcomes  # skipped, not failed: no verdict
    # selected and not judged: the run says so and exits 1, so a CI job cannot go green on it
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout[-3000:]
    assert "did not judge everything it selected" in done.stdout, done.stdout[-3000:]


def model_run_in_containers(image: str, tmp_path, model: str, *extra: str) -> dict:
    """One toy case, its solver written by the scripted server's ``model`` (directly or
    through an agent), every run in containers; the item's verdict."""
    from pytest_pdebench.testing.llm_server import ScriptedServer

    records = [record_dict(new_id="toy_a", nx=20, ny=20)]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", "dolfinx", records, 1e-4, 5.0, docker_machine(image))
    report = tmp_path / "report.json"
    with ScriptedServer() as server:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx",
             f"--pde-cases={tmp_path / 'cases.jsonl'}", f"--pde-model={model}", f"--pde-base-url={server.url}",
             "--pde-api-key-env=PDEBENCH_TEST_KEY", f"--pde-calibrations={tmp_path / 'calibrations'}",
             "--pde-baseline=stored",
             f"--pde-output={tmp_path / 'out'}", f"--pde-llm-cache={tmp_path / 'cache'}", "--pde-sandbox=docker",
             "--json-report", f"--json-report-file={report}", *extra],
            cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, "PDEBENCH_TEST_KEY": "k"})
    verdict = outcomes_from_report(report)["toy_a"]
    assert verdict["outcome"] == "PASS" and verdict["sandbox"] == "docker", done.stdout[-2000:]
    return verdict


def test_an_llm_written_solver_runs_in_a_container(dolfinx_image, tmp_path):
    model_run_in_containers(dolfinx_image, tmp_path, "scripted-correct")


def test_mini_swe_agent_acts_in_containers(engine, dolfinx_image, tmp_path):
    """Each command of the agent in a fresh container of the track's image; the solver it
    left, evaluated in another."""
    import importlib.util

    if importlib.util.find_spec("minisweagent") is None:
        pytest.skip("mini-swe-agent is not installed (pip install 'pytest-pdebench[agents]')")
    model_run_in_containers(dolfinx_image, tmp_path, "agent-correct", "--pde-agent=mini-swe-agent")
    trajectory = (tmp_path / "out" / "dolfinx" / "toy_a" / "attempt-1" / "trajectory.json").read_text()
    assert "solution.npz" in trajectory and json.loads(trajectory)["info"]["pdebench"]["actions"] == 3  # write, try, done
    assert pdebench_containers(engine, under=tmp_path) == []


def test_ctrl_c_leaves_no_container_and_keeps_finished_work(engine, dolfinx_image, tmp_path):
    solvers = tmp_path / "solvers" / "dolfinx"
    solvers.mkdir(parents=True)
    (solvers / "quick.py").write_text(NUMPY_PRELUDE + "\ndef solve(case_spec):\n    x, y, u = grid(case_spec)\n"
                                      "    write(u, x, y)\n")
    (solvers / "slow.py").write_text("import time\n\ndef solve(case_spec):\n    time.sleep(600)\n")
    records = [record_dict(new_id=name, nx=20, ny=20) for name in ("quick", "slow")]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", "dolfinx", records, 1e-4, 5.0, docker_machine(dolfinx_image))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx",
               f"--pde-cases={tmp_path / 'cases.jsonl'}", f"--pde-submissions={tmp_path / 'solvers'}",
               f"--pde-calibrations={tmp_path / 'calibrations'}", f"--pde-output={tmp_path / 'out'}",
               "--pde-sandbox=docker", "--pde-baseline=stored"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 180
    while not any("slow" in c["Labels"].get(CASE_LABEL, "") and c["State"] == "running"
                  for c in pdebench_containers(engine, under=tmp_path)) and time.time() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output[-2000:]
    assert pdebench_containers(engine, under=tmp_path) == []
    verdict = json.loads((tmp_path / "out" / "dolfinx" / "quick" / "verdict.json").read_text())
    assert verdict["outcome"] == "PASS"


class _HalfRemovedEngine:
    """What podman 4.3 answers while a container whose removal was cut short is still in
    its store (measured here after a run was killed mid-removal): every listing fails
    naming it until it is removed."""

    def __init__(self, stuck: str):
        import docker

        self.api, self.stuck, self.removed, self.error = self, stuck, [], docker.errors.APIError

    def containers(self, **_):
        if self.stuck not in self.removed:
            raise self.error("500 Server Error", explanation=f'getting container from store "{self.stuck}": '
                                                             "container not known")
        return [{"Id": "a" * 64, "Labels": {LABEL: "1"}}]

    def remove_container(self, container, force=False):
        assert force
        self.removed.append(container)


def test_a_half_removed_container_is_removed_and_the_listing_asked_again():
    stuck = "e50eba2b9497b2a9700fc374d544db7a082c223bddf4390c7d309f53ff2679e0"
    engine = _HalfRemovedEngine(stuck)
    assert [c["Id"] for c in labelled_containers(engine)] == ["a" * 64]
    assert engine.removed == [stuck]


@pytest.mark.parametrize("when", ["serving", "starting"])
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_the_engine_command_stops_its_service_on_a_signal(container_engine, tmp_path, number, when):
    """`pdebench containers engine` in the background of a script, a systemd unit or a CI
    job is stopped with TERM (a script's background jobs ignore INT), in a terminal with
    Ctrl-C: the podman service it started (in its own session, so the signal never reaches
    it) goes too, also when the signal comes while the service is still starting."""
    folder = tmp_path / "engine"
    marker = f"unix://{folder / 'podman.sock'}"
    command = subprocess.Popen([str(Path(sys.executable).with_name("pdebench")), "containers", "engine",
                                "--folder", str(folder)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        if when == "serving":
            assert "export DOCKER_HOST=" in "".join(command.stdout.readline() for _ in range(2))
        deadline = time.monotonic() + 60
        while not processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.02)  # starting: the service's process is there, its API not yet
        assert processes_with(marker), "the service is not running"
        command.send_signal(number)
        assert command.wait(timeout=60) == 0
        deadline = time.monotonic() + 30
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not processes_with(marker), "the podman service outlived the command"
    finally:
        command.kill()
