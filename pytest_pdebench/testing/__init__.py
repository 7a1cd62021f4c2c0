"""What the project's own tests and ``benchmarks/`` share: the checkout's folders, toy
solvers, case records and calibrations made on the fly, pytest runs in a subprocess, and
the runtime guards.

It lives in the package, not in ``tests/conftest.py``, so that tests import it by name
rather than through pytest's ``sys.path`` insertion of ``tests/``, and benchmarks import
it without patching ``sys.path``. The package itself never imports it (the layers contract
in pyproject.toml keeps it on top); the fixtures stay in ``tests/conftest.py``. Beside it:
``loopback`` (a Dask cluster on 127.0.0.1), ``llm_server`` (a scripted OpenAI-compatible
server) and ``slurm_node`` (a one-node Slurm cluster).

Tests that need bubblewrap or DOLFINx skip where those are absent, except under CI
(CI=true, set by `.ci/run`) or PDEBENCH_REQUIRE_FEM=1 (set by `make test`), where a
missing runtime is a failure (``missing``): the suite must never go green by skipping itself.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ..bundled import SMOKE_CASES
from ..calibration import KERNEL_STORE
from ..fingerprints import case_fingerprint
from ..machine import machine_key

# the checkout the package is installed from in editable mode (`make setup`)
REPO = Path(__file__).resolve().parents[2]
# the public upstream data, read and never committed: CI clones the repository with shared/
# beside it; PDEBENCH_UPSTREAM points elsewhere
UPSTREAM = Path(os.environ.get("PDEBENCH_UPSTREAM", REPO.parent / "shared" / "upstream" / "benchmark_v2.jsonl"))
ORACLE = REPO / "submissions" / "oracle"
STARTER = SMOKE_CASES  # the 53-case smoke suite (the shipped suite is cases/)

# ---- Toy solvers ----

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


# ---- Runtime guards ----

REQUIRE_RUNTIMES = os.environ.get("CI") == "true" or os.environ.get("PDEBENCH_REQUIRE_FEM") == "1"

# the container engine and images: required where the set-up provides them
REQUIRE_CONTAINERS = os.environ.get("PDEBENCH_REQUIRE_CONTAINERS") == "1"


def missing(message: str, required: bool = REQUIRE_RUNTIMES):
    """Skip the test for want of a runtime, or fail it where the runtime is required."""
    if required:
        pytest.fail(f"required runtime missing: {message}", pytrace=False)
    pytest.skip(message)


def dask_installed() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        missing("Dask is not installed (pip install 'pytest-pdebench[cluster]'; `make setup` does)")


def docker_machine(image: str) -> str:
    """The calibration key of runs in this image on this machine."""
    return f"{machine_key()}+docker-{image.removeprefix('sha256:')[:12]}"


# ---- Case records and calibrations ----


@functools.lru_cache(maxsize=1)
def starter_records() -> dict[str, dict]:
    """The smoke suite's records as JSON data, by id (read once; copy before changing one)."""
    lines = (STARTER / "starter.jsonl").read_text().splitlines()
    return {data["id"]: data for data in map(json.loads, filter(None, lines))}


def record_dict(case_id: str = "poisson_basic", new_id: str | None = None, **grid) -> dict:
    """A starter record as plain JSON data, optionally renamed and with another grid size.

    Its materialized thresholds are dropped: tests give calibrations explicitly.
    """
    data = copy.deepcopy(starter_records()[case_id])
    data["evaluation_metadata"].pop("thresholds", None)
    # its solve-only part is a file beside the smoke suite: a toy record written elsewhere is
    # judged on its exact solution (which the tests' solvers write), so its forcing loses the
    # part's term again
    part = data["evaluation_metadata"].pop("solve_only", None)
    if part:
        from ..making.part_field import forcing_without_part

        forcing = data["case_spec"]["pde"]["forcing"]
        forcing["value"] = forcing_without_part(forcing["value"], part["forcing"])
    if new_id:
        data["id"] = new_id
    data["case_spec"]["eval_grid"].update(grid)
    return data


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def write_calibration(
    directory: Path,
    library: str,
    records: list[dict],
    e_base: float,
    t_base: float,
    machine: str | None = None,
    t_first: float | None = None,
) -> Path:
    """A calibration file for this machine (or the given calibration key) covering the given
    records; ``t_first``: the baseline's first run (None: no first-run gate)."""
    from ..cases import CaseRecord

    entries = {}
    for data in records:
        record = CaseRecord.model_validate(data)
        entries[record.id] = {"e_base": e_base, "t_base": t_base, "fingerprint": case_fingerprint(record, library)}
        if t_first is not None:  # timed with the item's store empty, as a gated run is now
            entries[record.id].update(t_first_run=t_first, conditions={"kernel_store": KERNEL_STORE})
    path = directory / library / f"{machine or machine_key()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cases": entries}))
    return directory


# one case per family the DOLFINx track supports, the quickest baseline of each (calibration
# mode: a baseline is measured, so nothing depends on a calibration of the runtime)
DOLFINX_CASES = [
    "poisson_graded_kappa_unit_square_010",
    "helmholtz_k2_star_037",
    "biharmonic_plate_unit_square_035",
    "elasticity_nu045_unit_square_noexact_003",
    "heat_short_unit_square_noexact_013",
    "cd_medium_pe_unit_square_084",
    "rd_linear_t_junction_016",
    "stokes_nu1_unit_square_002",
    "ns_re10_unit_square_noexact_000",
    "burgers_nu005_star_026",
    "wave_c1_t_junction_027",
]


def toy_cases(
    tmp_path: Path,
    library: str,
    solvers: dict[str, str],
    e_base: float = 1e-4,
    t_base: float = 5.0,
    nx: int = 20,
    ny: int = 20,
    machine: str | None = None,
    t_first: float | None = None,
) -> tuple[Path, Path]:
    """One poisson_basic copy per solver (its id is the solver's key), calibrated with the
    given baseline (under ``machine``'s key if given); returns (case file, submissions folder)."""
    records = [record_dict(new_id=case_id, nx=nx, ny=ny) for case_id in solvers]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", library, records, e_base, t_base, machine, t_first)
    folder = tmp_path / "solvers" / library
    folder.mkdir(parents=True)
    suffix = ".cpp" if library == "dealii" else ".py"
    for case_id, source in solvers.items():
        (folder / f"{case_id}{suffix}").write_text(source)
    return tmp_path / "cases.jsonl", folder.parent


# ---- pytest runs in a subprocess ----


def track_command(
    tmp_path: Path, library: str, cases: Path, submissions: Path, *extra: str, launcher: tuple[str, ...] = ()
) -> tuple[list[str], Path]:
    """The command line of ``run_track`` (and its JSON report's path), for a session started
    in the background."""
    report = tmp_path / f"report-{library}.json"
    if not any(arg.startswith("--pde-runs") for arg in extra):
        extra = (*extra, "--pde-runs=1")  # one timed run is enough where timing is not the point
    if not any(
        arg.startswith(("--pde-baseline", "--pde-variants", "--pde-calibrate", "--pde-validate")) for arg in extra
    ):
        extra = (*extra, "--pde-baseline=stored")  # nor the oracle timed first on this machine
    command = [
        *(launcher or [sys.executable]),
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        f"--pde-library={library}",
        f"--pde-cases={cases}",
        f"--pde-submissions={submissions}",
        f"--pde-output={tmp_path / 'out'}",
        "--json-report",
        f"--json-report-file={report}",
        *extra,
    ]
    return command, report


def run_track(
    tmp_path: Path,
    library: str,
    cases: Path,
    submissions: Path,
    *extra: str,
    timeout: float = 900,
    launcher: tuple[str, ...] = (),
):
    """pytest in a subprocess over a case file and a solver folder on one track, with a
    JSON report; returns (completed process, case_id -> verdict). ``launcher``: the
    command that starts Python instead of sys.executable (it gets ``-m pytest ...``)."""
    command, report = track_command(tmp_path, library, cases, submissions, *extra, launcher=launcher)
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    return done, (outcomes_from_report(report) if report.exists() else {})


def assert_oracle_passes(tmp_path: Path, library: str, case_ids: list[str], max_error: float) -> None:
    """The bundled oracle on these suite cases (calibration mode): every one PASS, with a
    usable baseline below max_error and a converged solver."""
    done, outcomes = run_track(
        tmp_path,
        library,
        REPO / "cases",
        ORACLE,
        "--pde-calibrate",
        "--pde-runs=1",
        f"--pde-calibrations={tmp_path / 'calibrations'}",
        "-k",
        " or ".join(case_ids),
    )
    assert sorted(outcomes) == sorted(case_ids), done.stdout[-3000:]
    for case_id, verdict in outcomes.items():
        assert verdict["outcome"] == "PASS", (case_id, verdict["reason"])
        assert verdict["e_base"] < max_error and verdict["calibration_problem"] is None, case_id
        assert verdict["solver_info"].get("converged") is not False, case_id


def outcomes_from_report(path: Path) -> dict[str, dict]:
    """case_id -> pde metadata of a pytest-json-report file."""
    report = json.loads(Path(path).read_text())
    verdicts = [t["metadata"]["pde"] for t in report["tests"] if "pde" in t.get("metadata", {})]
    return {verdict["case_id"]: verdict for verdict in verdicts}


# ---- Sockets and processes ----


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


@contextlib.contextmanager
def loopback_listener():
    """A TCP server on the host's 127.0.0.1: yields (port, accepted connections); a
    sandboxed solver must never show up in the list."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    accepted: list = []
    done = threading.Event()

    def accept():  # until the test is over (a closed socket would not wake a blocked accept)
        while not done.is_set():
            try:
                accepted.append(server.accept())
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        done.set()
        thread.join()
        server.close()


# stored runs for the report's tests: verdicts whose numbers can be checked by hand
# a hostile neighbour: fills its scratch space, then streams memory until its run is killed
# (tests/test_kept_baselines.py, benchmarks/hostile_pass.py)
HOSTILE_NEIGHBOUR = """
import numpy as np
def solve(case_spec):
    try:
        with open("filler.bin", "wb") as out:
            for _ in range(4096):
                out.write(b"0" * (1 << 20))
    except OSError:
        pass
    a = np.ones(16_000_000)
    b = np.empty_like(a)
    while True:
        np.copyto(b, a)
        np.copyto(a, b)
"""

ALPHAS = {"alpha_acc": 10.0, "alpha_time": 3.0, "tau_min": 1e-6, "tau_max": 8e-3}


def verdict(
    case_id,
    outcome,
    family="poisson",
    library="dolfinx",
    error=1e-4,
    t_agent=1.0,
    reason="",
    llm=None,
    source="submissions/plain",
    **extra,
):
    """A stored verdict with e_base 1e-4 (tau_acc 1e-3) and t_base 1 s (tau_time 3 s)."""
    return {
        "case_id": case_id,
        "library": library,
        "family": family,
        "math_type": ["elliptic"],
        "domain": "unit_square",
        "source": source,
        "outcome": outcome,
        "reason": reason,
        "error": error,
        "e_base": 1e-4,
        "tau_acc": 1e-3,
        "t_agent": t_agent,
        "t_base": 1.0,
        "tau_time": 3.0,
        "timed_runs": [t_agent] if t_agent else [],
        "alphas": ALPHAS,
        "artifacts": f"/tmp/out/{library}/{case_id}",
        "llm": llm,
        **extra,
    }


def json_report(path, verdicts, machine="m-2cpu", sandbox="bubblewrap"):
    tests = [
        {"nodeid": f"cases.jsonl::{v['case_id']} [{v['library']}]", "outcome": "passed", "metadata": {"pde": v}}
        for v in verdicts
    ]
    path.write_text(json.dumps({"tests": tests, "pde": {"machine": machine, "sandbox": sandbox, "mode": "evaluation"}}))
    return path


# ---- The ansatz-fit attacker: a fit to the data's functions that solves nothing ----


def ansatz_fit_error(record, case_dir: Path, library: str = "dolfinx") -> float:
    """The relative L2 error of the ansatz-fit attacker (data/attacker in the package: a
    least-squares fit in the span of the data's functions, no mesh) on the agent's view of
    RECORD, against the record's reference (making/attack.py, as `pdebench attack-audit`)."""
    from ..making.attack import attack, load_attacker

    result = attack(
        load_attacker(),
        record,
        case_dir,
        library,
        timeout=300,
    )
    assert result.error is not None, result.reason
    return result.error
