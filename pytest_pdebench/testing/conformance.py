"""The sandbox contract as checks any backend can be run through: the built-in backends pass
them (``tests/test_sandbox.py`` runs each on bubblewrap, the warm runner and docker), and a
backend another plugin adds (``hookspecs.pytest_pdebench_add_backends``) should too:

    from pytest_pdebench.testing.conformance import Harness, check_backend
    failures = check_backend(Harness(MyBackend, python="/usr/bin/python3"))

Each check runs a tiny Python solver (no FEM library) through the backend's ``run`` and
asserts what a hostile one must not manage (the network, the host's files and environment,
outliving its run, outrunning its limits) and what an honest one must get (its time, its
outputs, its error message, fresh entropy, child processes).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import textwrap
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..bundled import CHECKOUT
from ..libraries import thread_env
from ..sandbox import Backend, Limits, RunRequest, RunResult, WarmSpec
from . import loopback_listener, processes_with


@dataclass
class Harness:
    """How the checks run a solver in the backend under test."""

    backend: Callable[[], Backend]  # a backend's factory, as a plugin adds it
    python: str = sys.executable  # an interpreter the backend can run
    read_only: list[Path] = field(default_factory=lambda: [Path(sys.prefix), Path(sys.base_prefix)])
    image: str | None = None
    warm: bool = False  # forked from a zygote that imported json and numpy.random (sandbox/warm.py)
    own_root: bool = False  # a run sees an image's root file system, none of the host's (a container)
    # how late the host may stamp the start marker (its reader thread's wake-up; never the
    # solver's own clock): 3 ms once under bubblewrap beside two test workers (2026-12-02)
    marker_jitter: float = 0.01

    def run(self, workdir: Path, cache: Path, argv_tail: list[str], env: dict, limits: Limits) -> RunResult:
        request = RunRequest([self.python, "-I", "{harness}/runner.py", *argv_tail], workdir, cache,
                             {"PATH": f"{Path(self.python).parent}:/usr/bin", **env}, self.read_only, limits,
                             image=self.image)  # fmt: skip
        if self.warm:
            request.warm = WarmSpec(argv_tail[0], argv_tail[1], zygote_preload="json,numpy.random")
        return self.backend().run(request)


def run_solver(sandbox: Harness, tmp_path: Path, body: str, timeout: float = 20, env: dict | None = None,
               memory_mb: int = 2048) -> tuple[RunResult, Path]:  # fmt: skip
    """``body`` (a solver file) run in a fresh working folder under ``tmp_path``."""
    workdir, cache = tmp_path / "work", tmp_path / "cache"
    workdir.mkdir()
    cache.mkdir()
    (workdir / "case_spec.json").write_text(json.dumps({"case_spec": {}}))
    (workdir / "solver.py").write_text(textwrap.dedent(body))
    result = sandbox.run(workdir, cache, ["solver.py", ""], {"HOME": "{work}", **thread_env(), **(env or {})},
                         Limits(timeout_sec=timeout, memory_mb=memory_mb))  # fmt: skip
    return result, workdir


@contextlib.contextmanager
def _harness_env(name: str, value: str):
    """A variable in the harness's own environment while a check runs."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def a_clean_run_reports_its_solve_time(sandbox: Harness, tmp_path: Path) -> None:
    result, workdir = run_solver(
        sandbox,
        tmp_path,
        """
        import time
        def solve(case_spec):
            time.sleep(0.3)
            open("out.txt", "w").write("ok")
    """,
    )
    assert result.returncode == 0, result.stderr
    assert (workdir / "out.txt").read_text() == "ok"
    assert result.solve_sec is not None and 0.3 <= result.solve_sec < result.wall_sec


def import_time_work_of_the_submission_is_timed(sandbox: Harness, tmp_path: Path) -> None:
    result, _ = run_solver(
        sandbox,
        tmp_path,
        """
        import time
        time.sleep(0.4)  # a solver that does its work at import
        def solve(case_spec):
            pass
    """,
    )
    assert result.returncode == 0, result.stderr
    # the host stamps the start marker when its reader thread wakes, never the solver's own
    # clock (which it could forge): a thread's wake-up late by a fraction of a ms here, by a
    # few ms where docker's stream carries it
    assert result.solve_sec is not None and result.solve_sec >= 0.4 - sandbox.marker_jitter


def closing_its_output_does_not_stop_the_clock(sandbox: Harness, tmp_path: Path) -> None:
    # the docker backend learns that a run is over when the attached stream ends: a solver
    # that closes stdout and stderr and computes on must still be timed to its exit
    result, workdir = run_solver(
        sandbox,
        tmp_path,
        """
        import os, time
        def solve(case_spec):
            os.close(1)
            os.close(2)
            time.sleep(0.6)
            open("out.txt", "w").write("ok")
    """,
    )
    assert result.returncode == 0, result.stderr
    assert (workdir / "out.txt").read_text() == "ok"
    assert result.solve_sec is not None and result.solve_sec >= 0.6 - sandbox.marker_jitter


def no_network_not_even_to_the_hosts_loopback(sandbox: Harness, tmp_path: Path) -> None:
    with loopback_listener() as (port, accepted):
        result, workdir = run_solver(
            sandbox,
            tmp_path,
            f"""
            import socket
            def solve(case_spec):
                try:
                    socket.create_connection(("127.0.0.1", {port}), timeout=3)
                    outcome = "connected"
                except OSError as exc:
                    outcome = "refused: " + type(exc).__name__
                open("net.txt", "w").write(outcome)
        """,
        )
    assert result.returncode == 0, result.stderr
    assert (workdir / "net.txt").read_text().startswith("refused")
    assert not accepted, "the sandboxed solver reached a server on the host"


def files_next_to_the_working_directory_are_invisible(sandbox: Harness, tmp_path: Path) -> None:
    secret = tmp_path / "reference.npz"
    secret.write_text("evaluator only")
    result, workdir = run_solver(
        sandbox,
        tmp_path,
        f"""
        import os
        def solve(case_spec):
            found = []
            for path in ({str(secret)!r}, "../reference.npz", "/etc/passwd", {str(CHECKOUT / "cases")!r}):
                found.append(path + ":" + str(os.path.exists(path)))
            open("seen.txt", "w").write("\\n".join(found))
            open("root.txt", "w").write(" ".join(sorted(os.listdir("/"))))
    """,
    )
    assert result.returncode == 0, result.stderr
    assert all(
        line.endswith("False")
        for line in (workdir / "seen.txt").read_text().splitlines()
        if not line.startswith("/etc/passwd") or not sandbox.own_root
    )  # an image has its own
    if sandbox.own_root:
        return  # a container's root is its image's, none of the host's
    # only the system tree, the runtime's own prefix folders and the sandbox itself
    top_level = set((workdir / "root.txt").read_text().split())
    runtime_roots = {Path(p).parts[1] for p in (sys.prefix, sys.base_prefix)}
    assert (
        top_level
        <= {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "sys", "proc", "dev", "tmp", "sandbox"}
        | runtime_roots
    ), top_level


def writes_outside_the_working_directory_fail(sandbox: Harness, tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    result, workdir = run_solver(
        sandbox,
        tmp_path,
        f"""
        def solve(case_spec):
            results = []
            for path in ({str(target)!r}, "/usr/escaped.txt", "../escaped.txt"):
                try:
                    open(path, "w").write("x")
                    results.append("wrote " + path)
                except OSError:
                    results.append("denied " + path)
            open("writes.txt", "w").write("\\n".join(results))
    """,
    )
    assert result.returncode == 0, result.stderr
    assert not target.exists()
    writes = (workdir / "writes.txt").read_text().splitlines()
    assert all(line.startswith("denied") for line in writes), writes


def harness_environment_is_not_visible(sandbox: Harness, tmp_path: Path) -> None:
    with _harness_env("OPENAI_API_KEY", "sk-harness-secret"):
        result, workdir = run_solver(
            sandbox,
            tmp_path,
            """
        import os
        def solve(case_spec):
            open("env.txt", "w").write("\\n".join(f"{k}={v}" for k, v in os.environ.items()))
    """,
        )
    assert result.returncode == 0, result.stderr
    environment = (workdir / "env.txt").read_text()
    assert "sk-harness-secret" not in environment and "OPENAI_API_KEY" not in environment


def runs_as_an_unprivileged_user(sandbox: Harness, tmp_path: Path) -> None:
    result, workdir = run_solver(
        sandbox,
        tmp_path,
        """
        import os
        def solve(case_spec):
            status = open("/proc/self/status").read()
            caps = [l for l in status.splitlines() if l.startswith("CapEff")][0]
            open("who.txt", "w").write(f"{os.getuid()} {caps.split()[1]}")
    """,
    )
    assert result.returncode == 0, result.stderr
    uid, capabilities = (workdir / "who.txt").read_text().split()
    assert uid == "65534"
    assert int(capabilities, 16) == 0


def timeout_kills_every_process_including_detached_ones(sandbox: Harness, tmp_path: Path) -> None:
    marker = f"pdebench-{uuid.uuid4().hex}"
    result, _ = run_solver(
        sandbox,
        tmp_path,
        f"""
        import os, signal, subprocess, time
        def solve(case_spec):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            # a child in its own session that ignores SIGTERM, and a double-forked one
            subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep 600 {marker}"], start_new_session=True)
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.execvp("sleep", ["sleep", "601", "{marker}"])
                os._exit(0)
            time.sleep(600)
    """,
        timeout=2,
    )
    assert result.timed_out and (result.failure_reason() or "").startswith("timed out")
    deadline = time.time() + 5
    while processes_with(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert processes_with(marker) == []


def every_process_of_a_run_is_gone_when_it_returns(sandbox: Harness, tmp_path: Path) -> None:
    """The clock stops when the whole run is gone: a child the solver left
    behind cannot write the outputs after its end, which are read once it returns."""
    marker = f"pdebench-{uuid.uuid4().hex}"
    result, _ = run_solver(
        sandbox,
        tmp_path,
        f"""
        import os
        def solve(case_spec):
            if os.fork() == 0:
                os.setsid()
                os.execvp("sleep", ["sleep", "600", "{marker}"])
    """,
    )
    assert result.returncode == 0, result.stderr
    assert processes_with(marker) == []  # at once: not "within a while"


def memory_limit_stops_a_runaway_allocation(sandbox: Harness, tmp_path: Path) -> None:
    stray = Path.cwd() / "oom"  # what podman's conmon leaves in its working folder after a memory kill
    was_there = stray.exists()
    result, _ = run_solver(
        sandbox,
        tmp_path,
        """
        def solve(case_spec):
            blocks = [bytearray(64 * 1024 * 1024) for _ in range(64)]  # 4 GiB
    """,
        memory_mb=512,
    )
    assert result.returncode != 0
    # an address-space limit raises MemoryError; a container's memory cgroup kills (137)
    assert "MemoryError" in result.stderr or result.failure_reason() == "killed (out of memory?)"
    assert was_there or not stray.exists(), "the kill left a file in the folder the tests run from"


def file_size_limit(sandbox: Harness, tmp_path: Path) -> None:
    workdir, cache = tmp_path / "work", tmp_path / "cache"
    workdir.mkdir()
    cache.mkdir()
    (workdir / "case_spec.json").write_text(json.dumps({"case_spec": {}}))
    (workdir / "solver.py").write_text("def solve(c):\n    open('big', 'wb').write(b'0' * (3 * 2**20))\n")
    result = sandbox.run(workdir, cache, ["solver.py", ""], {}, Limits(timeout_sec=20, file_size_mb=1))
    assert result.returncode != 0
    assert result.failure_reason() == "file size limit exceeded" or "File too large" in result.stderr


def output_is_capped(sandbox: Harness, tmp_path: Path) -> None:
    result, _ = run_solver(
        sandbox,
        tmp_path,
        """
        import sys
        def solve(case_spec):
            for _ in range(4000):
                sys.stdout.write("x" * 1023 + "\\n")
    """,
    )
    assert result.returncode == 0
    assert len(result.stdout) < 600 * 1024
    assert "bytes dropped" in result.stdout


def exception_is_reported_with_its_message(sandbox: Harness, tmp_path: Path) -> None:
    result, _ = run_solver(
        sandbox,
        tmp_path,
        """
        def solve(case_spec):
            raise ValueError("mesh is upside down")
    """,
    )
    assert result.returncode == 2
    # what raised, and where: the sandbox's solver file (the harness names the author's, execution.named)
    assert result.failure_reason() == "exit code 2: solve() raised: ValueError: mesh is upside down (solver.py, line 3)"


def environment_whitelist_only(sandbox: Harness, tmp_path: Path) -> None:
    result, workdir = run_solver(
        sandbox,
        tmp_path,
        """
        import os
        def solve(case_spec):
            open("keys.txt", "w").write(" ".join(sorted(os.environ)))
    """,
    )
    keys = set((workdir / "keys.txt").read_text().split())
    # no engine's or image's variables either (HOSTNAME, container, an image's ENV lines)
    assert keys <= {
        "PATH",
        "HOME",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "PWD",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
        "LC_CTYPE",
    }, keys
    assert os.environ.get("PDEBENCH_MARKER_FD") is None


def a_run_inherits_nothing_from_an_earlier_one(sandbox: Harness, tmp_path: Path) -> None:
    """Module state, files and processes of one run are gone for the next (the warm
    runner forks each run from the same zygote: never from a run)."""
    body = """
        import json, os, subprocess
        def solve(case_spec):
            seen = {"module": getattr(json, "memo", None), "tmp": os.path.exists("/tmp/memo"),
                    "shm": os.path.exists("/dev/shm/memo"),
                    "commands": [open(f"/proc/{p}/cmdline", "rb").read().decode(errors="replace")
                                 for p in os.listdir("/proc") if p.isdigit()]}
            json.memo = "from the first run"
            open("/tmp/memo", "w").write("x")
            open("/dev/shm/memo", "w").write("x")
            subprocess.Popen(["sleep", "30"], start_new_session=True)
            open("seen.json", "w").write(json.dumps(seen))
    """
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first, _ = run_solver(sandbox, tmp_path / "first", body)
    second, second_dir = run_solver(sandbox, tmp_path / "second", body)
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    seen = json.loads((second_dir / "seen.json").read_text())
    assert seen["module"] is None and not seen["tmp"] and not seen["shm"]
    # the first run's detached sleep is not among the second run's processes (their pids
    # themselves differ from run to run under an engine, so the commands are compared)
    assert "sleep\x0030\x00" not in seen["commands"], seen["commands"]


def only_the_runs_own_processes_are_visible(sandbox: Harness, tmp_path: Path) -> None:
    result, workdir = run_solver(
        sandbox,
        tmp_path,
        """
        import os
        def solve(case_spec):
            lines = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    lines.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
                except OSError:
                    pass
            open("processes.txt", "w").write("\\n".join(lines))
    """,
    )
    assert result.returncode == 0, result.stderr
    processes = (workdir / "processes.txt").read_text().splitlines()
    # the sandbox's pid 1, the warm runner's placeholder, the solver: nothing of the host
    own = (
        "bwrap ",
        "/usr/bin/bwrap ",
        "/bin/sh -c echo ready",
        "sleep infinity",
        "/run/podman-init ",
        "/sbin/docker-init ",
        sandbox.python,
    )
    assert len(processes) <= 3 and all(line.startswith(own) for line in processes), processes


def a_solver_may_start_processes_the_spawn_way(sandbox: Harness, tmp_path: Path) -> None:
    """multiprocessing's spawn start method imports the main module again by its path: the
    warm runner's solver must name one that exists in the sandbox (the runner's)."""
    result, workdir = run_solver(
        sandbox,
        tmp_path,
        """
        import multiprocessing
        def solve(case_spec):
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                open("absolute.txt", "w").write(str(pool.map(abs, [-1, 2, -3])))
    """,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert (workdir / "absolute.txt").read_text() == "[1, 2, 3]"


def unseeded_random_numbers_differ_between_runs(sandbox: Harness, tmp_path: Path) -> None:
    """A fresh process draws new entropy; a fork of the warm runner's zygote must too."""
    body = """
        import random
        import numpy as np
        def solve(case_spec):
            open("draws.txt", "w").write(f"{random.random()} {np.random.random()}")
    """
    draws = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        result, workdir = run_solver(sandbox, tmp_path / name, body)
        assert result.returncode == 0, result.stderr
        draws.append((workdir / "draws.txt").read_text().split())
    assert draws[0][0] != draws[1][0] and draws[0][1] != draws[1][1]


CHECKS: list[Callable[[Harness, Path], None]] = [
    a_clean_run_reports_its_solve_time,
    import_time_work_of_the_submission_is_timed,
    closing_its_output_does_not_stop_the_clock,
    no_network_not_even_to_the_hosts_loopback,
    files_next_to_the_working_directory_are_invisible,
    writes_outside_the_working_directory_fail,
    harness_environment_is_not_visible,
    runs_as_an_unprivileged_user,
    timeout_kills_every_process_including_detached_ones,
    every_process_of_a_run_is_gone_when_it_returns,
    memory_limit_stops_a_runaway_allocation,
    file_size_limit,
    output_is_capped,
    exception_is_reported_with_its_message,
    environment_whitelist_only,
    a_run_inherits_nothing_from_an_earlier_one,
    only_the_runs_own_processes_are_visible,
    a_solver_may_start_processes_the_spawn_way,
    unseeded_random_numbers_differ_between_runs,
]


def check_backend(harness: Harness, folder: Path | None = None) -> dict[str, str | None]:
    """Every check on the harness's backend, each in a folder of its own under ``folder``
    (default: a temporary one): check name -> None where it held, else what failed."""
    import tempfile

    outcomes: dict[str, str | None] = {}
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        for check in CHECKS:
            (Path(scratch) / check.__name__).mkdir()
            try:
                check(harness, Path(scratch) / check.__name__)
                outcomes[check.__name__] = None
            except Exception as exc:  # an assertion, or the backend's own error: both are a failure here
                outcomes[check.__name__] = f"{type(exc).__name__}: {exc}" if str(exc) else traceback.format_exc(limit=2)
    return outcomes
