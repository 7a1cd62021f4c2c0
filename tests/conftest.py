"""Fixtures shared by the plugin's tests: a small case factory and runtime guards.

Tests that need bubblewrap or DOLFINx skip where those are absent, except under CI
(CI=true, set by `.ci/run`) or PDEBENCH_REQUIRE_FEM=1 (set by `make test`), where a
missing runtime is a failure: the suite must never go green by skipping itself.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import shutil
import socket
import threading
from pathlib import Path

import pytest

from pytest_pdebench.calibration import case_fingerprint, machine_key

REPO = Path(__file__).resolve().parent.parent
# the public upstream data, read and never committed: CI clones the repository with shared/
# beside it; PDEBENCH_UPSTREAM points elsewhere
UPSTREAM = Path(os.environ.get("PDEBENCH_UPSTREAM", REPO.parent / "shared" / "upstream" / "benchmark_v2.jsonl"))
ORACLE = REPO / "submissions" / "oracle"
STARTER = REPO / "tests" / "cases"  # the 53-case smoke suite (the shipped suite is cases/)
# shared by the toy numpy solvers of the tests: the grid of a case, u = sin(pi x) sin(pi y)
NUMPY_PRELUDE = """
import json, time
import numpy as np

def grid(case_spec):
    g = case_spec["eval_grid"]
    x = np.linspace(g["bbox"][0], g["bbox"][1], g["nx"])
    y = np.linspace(g["bbox"][2], g["bbox"][3], g["ny"])
    X, Y = np.meshgrid(x, y)
    return x, y, np.sin(np.pi * X) * np.sin(np.pi * Y)

def write(u, x, y, meta=True):
    np.savez("solution.npz", u=u, x=x, y=y)
    if meta:
        json.dump({"wall_time_sec": 0.01, "status": "success", "solver_info": {"num_dofs": u.size}},
                  open("meta.json", "w"))
"""

# writes u = sin(pi x) sin(pi y) (the exact solution of poisson_basic) as solution_grid.bin;
# MPI is initialised on purpose: it must work in the network-less sandbox
EXACT_CPP = r"""
#include <deal.II/base/mpi.h>
#include <deal.II/base/point.h>
#include <nlohmann/json.hpp>
#include <cmath>
#include <fstream>
#include <vector>
// TOKEN
int main(int argc, char **argv)
{
  dealii::Utilities::MPI::MPI_InitFinalize mpi(argc, argv, 1);
  std::ifstream in(argv[1]);
  const auto spec = nlohmann::json::parse(in)["case_spec"];
  const auto &g = spec["eval_grid"];
  const int nx = g["nx"], ny = g["ny"];
  const auto b = g["bbox"].get<std::vector<double>>();
  std::vector<double> u;
  for (int j = 0; j < ny; ++j)
    for (int i = 0; i < nx; ++i)
      {
        const dealii::Point<2> p(b[0] + i * (b[1] - b[0]) / (nx - 1), b[2] + j * (b[3] - b[2]) / (ny - 1));
        u.push_back(std::sin(M_PI * p[0]) * std::sin(M_PI * p[1]));
      }
  DROP
  std::ofstream(std::string(argv[2]) + "/solution_grid.bin", std::ios::binary)
    .write(reinterpret_cast<const char *>(u.data()), std::streamsize(u.size() * sizeof(double)));
  std::ofstream(std::string(argv[2]) + "/meta.json") << R"({"wall_time_sec": 0.01, "status": "success"})";
  return 0;
}
"""


def exact_cpp_program(token: str, drop_last: bool = False) -> str:
    return EXACT_CPP.replace("TOKEN", token).replace("DROP", "u.pop_back();" if drop_last else "")



REQUIRE_RUNTIMES = os.environ.get("CI") == "true" or os.environ.get("PDEBENCH_REQUIRE_FEM") == "1"


# the container engine and images: required where the set-up provides them
REQUIRE_CONTAINERS = os.environ.get("PDEBENCH_REQUIRE_CONTAINERS") == "1"


def _missing(message: str, required: bool = REQUIRE_RUNTIMES):
    if required:
        pytest.fail(f"required runtime missing: {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def bwrap_available():
    if shutil.which("bwrap") is None:
        _missing("bubblewrap is not installed")


def _runtime(name: str, required: bool):
    from pytest_pdebench.libraries import RuntimeMissing, detect_runtime

    try:
        return detect_runtime(name)
    except RuntimeMissing as exc:
        if required:
            pytest.fail(f"required runtime missing: {exc}", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def dolfinx_available(bwrap_available):
    return _runtime("dolfinx", REQUIRE_RUNTIMES)


@pytest.fixture(scope="session")
def dealii_available(bwrap_available):
    """deal.II 9.4 with its compiler, CMake and gmsh (apt, installed by `make setup`)."""
    return _runtime("dealii", REQUIRE_RUNTIMES)


@pytest.fixture(scope="session")
def firedrake_available(bwrap_available):
    """The provisioned Firedrake runtime (scripts/provision_firedrake.sh, ~20 minutes once).
    Required only with PDEBENCH_REQUIRE_FIREDRAKE=1: `make test` does not provision it."""
    return _runtime("firedrake", os.environ.get("PDEBENCH_REQUIRE_FIREDRAKE") == "1")


@pytest.fixture(scope="session")
def container_engine(tmp_path_factory):
    """An engine for the docker backend: the DOCKER_HOST given, else podman's Docker API
    started here for the session (podman and runc from apt, installed by `make setup`)."""
    from pytest_pdebench.containers import ContainerError, start_podman_service

    if os.environ.get("DOCKER_HOST"):
        yield os.environ["DOCKER_HOST"]
        return
    try:
        service, host = start_podman_service(tmp_path_factory.mktemp("podman"))
    except ContainerError as exc:
        _missing(str(exc), REQUIRE_CONTAINERS)
    os.environ["DOCKER_HOST"] = host  # the pytest runs started by tests inherit it
    try:
        yield host
    finally:
        os.environ.pop("DOCKER_HOST", None)
        service.terminate()
        service.wait(timeout=60)


def _image(track: str) -> str:
    from pytest_pdebench.containers import ContainerError, build, image_for

    try:
        build(track, log=lambda line: None)  # a no-op once the recipe's tag exists
        return image_for(track)[0]
    except ContainerError as exc:
        _missing(str(exc), REQUIRE_CONTAINERS)


@pytest.fixture(scope="session")
def dolfinx_image(container_engine):
    """The DOLFINx track's image (built here on first use: a few minutes)."""
    return _image("dolfinx")


@pytest.fixture(scope="session")
def dealii_image(container_engine):
    return _image("dealii")


def docker_machine(image: str) -> str:
    """The calibration key of runs in this image on this machine."""
    return f"{machine_key()}+docker-{image.removeprefix('sha256:')[:12]}"


@functools.lru_cache(maxsize=1)
def _committed_records() -> dict[str, dict]:
    lines = (STARTER / "starter.jsonl").read_text().splitlines()
    return {data["id"]: data for data in map(json.loads, filter(None, lines))}


def record_dict(case_id: str = "poisson_basic", new_id: str | None = None, **grid) -> dict:
    """A starter record as plain JSON data, optionally renamed and with another grid size.

    Its materialized thresholds are dropped: tests give calibrations explicitly.
    """
    data = copy.deepcopy(_committed_records()[case_id])
    data["evaluation_metadata"].pop("thresholds", None)
    if new_id:
        data["id"] = new_id
    data["case_spec"]["eval_grid"].update(grid)
    return data


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def write_calibration(directory: Path, library: str, records: list[dict], e_base: float, t_base: float,
                      machine: str | None = None) -> Path:
    """A calibration file for this machine (or the given calibration key) covering the given records."""
    from pytest_pdebench.cases import CaseRecord

    entries = {}
    for data in records:
        record = CaseRecord.model_validate(data)
        entries[record.id] = {"e_base": e_base, "t_base": t_base, "fingerprint": case_fingerprint(record, library)}
    path = directory / library / f"{machine or machine_key()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cases": entries}))
    return directory


# one case per family the DOLFINx track supports, the quickest baseline of each (calibration
# mode: a baseline is measured, so nothing depends on a calibration of the runtime)
DOLFINX_CASES = ["poisson_constant_kappa_unit_square_noexact_008", "helmholtz_k2_star_037",
                 "biharmonic_plate_unit_square_035", "elasticity_nu045_unit_square_noexact_003",
                 "heat_short_unit_square_noexact_013", "cd_high_pe_unit_square_008", "rd_linear_t_junction_016",
                 "stokes_nu1_unit_square_002", "ns_re10_unit_square_noexact_000", "burgers_nu005_star_026",
                 "wave_c1_t_junction_027"]


def processes_with(marker: str) -> list[int]:
    """Processes whose command line holds the marker (to prove a timeout left none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def toy_cases(tmp_path: Path, library: str, solvers: dict[str, str], e_base: float = 1e-4, t_base: float = 5.0,
              nx: int = 20, ny: int = 20, machine: str | None = None) -> tuple[Path, Path]:
    """One poisson_basic copy per solver (its id is the solver's key), calibrated with the
    given baseline (under ``machine``'s key if given); returns (case file, submissions folder)."""
    records = [record_dict(new_id=case_id, nx=nx, ny=ny) for case_id in solvers]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", library, records, e_base, t_base, machine)
    folder = tmp_path / "solvers" / library
    folder.mkdir(parents=True)
    suffix = ".cpp" if library == "dealii" else ".py"
    for case_id, source in solvers.items():
        (folder / f"{case_id}{suffix}").write_text(source)
    return tmp_path / "cases.jsonl", folder.parent


def run_track(tmp_path: Path, library: str, cases: Path, submissions: Path, *extra: str, timeout: float = 900,
              launcher: tuple[str, ...] = ()):
    """pytest in a subprocess over a case file and a solver folder on one track, with a
    JSON report; returns (completed process, case_id -> verdict). ``launcher``: the
    command that starts Python instead of sys.executable (it gets ``-m pytest ...``)."""
    import subprocess
    import sys

    report = tmp_path / f"report-{library}.json"
    if not any(arg.startswith("--pde-runs") for arg in extra):
        extra = (*extra, "--pde-runs=1")  # one timed run is enough where timing is not the point
    done = subprocess.run([*(launcher or [sys.executable]), "-m", "pytest", "-p", "no:cacheprovider", f"--pde-library={library}",
                           f"--pde-cases={cases}", f"--pde-submissions={submissions}",
                           f"--pde-output={tmp_path / 'out'}", "--json-report", f"--json-report-file={report}",
                           *extra], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    return done, (outcomes_from_report(report) if report.exists() else {})


def assert_oracle_passes(tmp_path: Path, library: str, case_ids: list[str], max_error: float) -> None:
    """The bundled oracle on these suite cases (calibration mode): every one PASS, with a
    usable baseline below max_error and a converged solver."""
    done, outcomes = run_track(tmp_path, library, REPO / "cases", ORACLE, "--pde-calibrate", "--pde-runs=1",
                               f"--pde-calibrations={tmp_path / 'calibrations'}", "-k", " or ".join(case_ids))
    assert sorted(outcomes) == sorted(case_ids), done.stdout[-3000:]
    for case_id, verdict in outcomes.items():
        assert verdict["outcome"] == "PASS", (case_id, verdict["reason"])
        assert verdict["e_base"] < max_error and verdict["calibration_problem"] is None, case_id
        assert verdict["solver_info"].get("converged") is not False, case_id


@contextlib.contextmanager
def loopback_listener():
    """A TCP server on the host's 127.0.0.1: yields (port, accepted connections); a
    sandboxed solver must never show up in the list."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def accept():
        server.settimeout(60)
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        server.close()
        thread.join()


def outcomes_from_report(path: Path) -> dict[str, dict]:
    """case_id -> pde metadata of a pytest-json-report file."""
    report = json.loads(Path(path).read_text())
    return {t["metadata"]["pde"]["case_id"]: t["metadata"]["pde"] for t in report["tests"] if "metadata" in t}


def dask_installed() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        _missing("Dask is not installed (pip install 'pytest-pdebench[cluster]'; `make setup` does)")


@pytest.fixture(scope="session")
def dask_cluster(tmp_path_factory, dolfinx_available):
    """Two workers on loopback for the whole session (tests that kill workers start their own)."""
    dask_installed()
    from pytest_pdebench.cluster import LoopbackCluster

    cluster = LoopbackCluster(tmp_path_factory.mktemp("dask"))
    yield cluster
    cluster.stop()


# ---- Test tiers (issue 38) ----------------------------------------------------------------
# `make check` runs the quick tier, -m "not (docker or cluster or firedrake or slow)";
# `make test` runs everything. The tier markers (registered in pyproject.toml) are given
# here rather than in the test files, from what a test needs: the fixtures it asks for, the
# backend named in its parametrisation id (tests that ask for their runtime through
# request.getfixturevalue), its module, and the measured lists SLOW and PER_RECORD.

TIER_BY_FIXTURE = {"container_engine": "docker", "dolfinx_image": "docker", "dealii_image": "docker",
                   "dask_cluster": "cluster", "firedrake_available": "firedrake"}
TIER_BY_ID_PART = {"docker": "docker", "cluster": "cluster", "firedrake": "firedrake"}  # parts of "dolfinx-docker-cluster"
TIER_BY_MODULE = {"test_cluster.py": "cluster"}  # every test there needs Dask (one Slurm), some through local fixtures

# Over ~5 s each (whole FEM runs, deal.II compiles, pytest runs in subprocesses): the
# threshold that keeps `make check` under 3 minutes on 2 cores shared with other jobs.
# Measured with `pytest tests/FILE -m "not (docker or cluster or firedrake)" --durations=0
# -q -p no:cacheprovider`, one file at a time, on the development machine's 2 cores at a load
# average of 3.5-8 from other jobs, 2026-11-26; the seconds are those. An entry is a file, a
# test with all its parametrisations, or one parametrisation.
SLOW = (
    "tests/test_agents.py",  # all but one test drive an agent through a pytest run: 6-29 s
    "tests/test_calibration.py::test_calibration_mode_writes_good_baselines_and_rejects_bad_ones",  # 10 s
    "tests/test_calibration.py::test_only_calibration_runs_get_the_calibration_settings",  # 12 s
    "tests/test_calibration.py::test_timeout_option_kills_a_slow_run_as_f_exec",  # 7 s
    "tests/test_cases.py::test_committed_cases_are_the_generated_starter_suite",  # 28 s of sympy
    "tests/test_dealii.py",  # deal.II compiles: 16-60 s
    "tests/test_gates.py::test_regating_stored_numbers_equals_a_real_run_with_other_alphas",  # 24 s
    "tests/test_guides.py",  # 5-14 s
    "tests/test_interrupt.py",  # 11-16 s
    "tests/test_leaks.py::test_built_records_give_nothing_away[poisson_graded_kappa_star_004]",  # 6 s
    "tests/test_llm.py",  # all but one test run the plugin against a scripted model: 4-23 s
    "tests/test_oracle_integration.py",  # 17 s
    "tests/test_output_fuzz.py::test_hand_written_npy_members_are_read_or_fail_execution",  # 9 s
    "tests/test_output_fuzz.py::test_meta_json_is_read_or_fails_execution",  # 10 s
    "tests/test_output_fuzz.py::test_mutated_npz_files_are_read_or_fail_execution",  # 7 s
    "tests/test_redteam.py::test_cpp_probes_get_the_honest_verdict",  # 55 s
    "tests/test_redteam.py::test_exploits_of_the_harness_get_the_honest_verdict",  # 51-57 s
    "tests/test_redteam.py::test_python_probes_get_the_honest_verdict",  # 67-82 s
    "tests/test_references.py::test_reference_is_built_checked_and_stored",  # 5 s
    "tests/test_report_page.py::test_the_report_page_loads_cleanly_and_is_not_blank",  # 5 s
    "tests/test_sandbox.py::test_no_network_not_even_to_the_hosts_loopback",  # 60 s: the listener's accept timeout
    "tests/test_scaffolds.py::test_filled_scaffold_passes",  # 6-9 s
    "tests/test_shards.py::test_three_shards_merge_into_the_items_of_one_run",  # 21 s
    "tests/test_upstream.py::test_imported_records_run_through_the_plugin",  # 25 s
    "tests/test_validate.py::test_trial_run_calibrates_the_oracle",  # 14 s
    "tests/test_validity.py::test_dishonest_solvers_fail_through_the_plugin",  # 9-11 s
    "tests/test_validity.py::test_no_dishonest_rung_passes_any_bundled_case",  # 35 s
)
# Tests parametrised over every case record, the id being the case's: ~0.2 s an item, 4 min
# for the 645 records of cases/ together; the quick tier keeps the smoke suite's 53.
PER_RECORD = (
    "tests/test_cases.py::test_boundary_and_initial_data_match_the_exact_solution",
    "tests/test_cases.py::test_manufactured_solution_satisfies_the_stored_pde",
    "tests/test_cases.py::test_shipped_cases_pass_the_static_checks",
)


def _listed(nodeid: str, entries: tuple[str, ...]) -> bool:
    return any(nodeid == entry or nodeid.startswith((f"{entry}[", f"{entry}::")) for entry in entries)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if not isinstance(item, pytest.Function):  # the benchmark's own items, in runs the tests start
            continue
        tiers = {TIER_BY_FIXTURE[name] for name in item.fixturenames if name in TIER_BY_FIXTURE}
        if any(name.startswith("slurm") for name in item.fixturenames):
            tiers.add("cluster")
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            tiers |= {TIER_BY_ID_PART[part] for part in callspec.id.split("-") if part in TIER_BY_ID_PART}
        if item.path.name in TIER_BY_MODULE:
            tiers.add(TIER_BY_MODULE[item.path.name])
        if _listed(item.nodeid, SLOW) or (_listed(item.nodeid, PER_RECORD) and callspec.id not in _committed_records()):
            tiers.add("slow")
        for tier in sorted(tiers):
            item.add_marker(tier)
