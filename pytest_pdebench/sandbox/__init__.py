"""Running a solver in isolation: one process tree, limits, a timeout that kills it.

A ``RunRequest`` says what to run (argv and environment, with ``{work}``,
``{cache}``, ``{kernels}`` and ``{harness}`` placeholders for the paths the solver
sees), which host directories it may read, and its limits. A backend turns it into a
``RunResult``:

- ``bubblewrap`` (default): a fresh user, pid, network, ipc and uts namespace as the
  unprivileged uid 65534; only /usr, the track's runtime and the kernel store
  (read-only), the run's working directory and its own cache folder (read-write)
  exist inside.
- ``docker``: a fresh container of the track's image per run (``docker_backend.py``).
- ``unsandboxed``: a plain child process in its own session, for machines without
  bubblewrap; chosen only by ``--pde-sandbox=none`` and announced with a warning.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .warm import WarmSpec

HARNESS_DIR = Path(__file__).parent
RUNNER = HARNESS_DIR / "runner.py"
LOG_CAP_BYTES = 256 * 1024  # kept from the head and from the tail of each stream

BWRAP_INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed: it isolates every solver run. "
    "Install it with `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap`, "
    "or run `make setup`; `--pde-sandbox=none` runs solvers unsandboxed (unsafe for untrusted code)."
)


# the runs going on in this process, so that all of one owner's can be killed at once
# (a cluster worker whose controller was interrupted: cluster.py)
_live_runs: dict[int, tuple[str | None, object]] = {}
_live_lock = threading.Lock()
_live_ids = itertools.count()
_owner = threading.local()
_aborted: set[str] = set()  # owners whose runs were aborted: a run of theirs that starts later is refused


@contextlib.contextmanager
def owned_by(token: str):
    """Runs started in this thread inside the block belong to ``token``."""
    _owner.token = token
    try:
        yield
    finally:
        _owner.token = None


@contextlib.contextmanager
def live_run(kill):
    """Register a run while it goes on; ``kill()`` ends it (and everything it started)."""
    key, owner = next(_live_ids), getattr(_owner, "token", None)
    with _live_lock:
        if owner in _aborted:  # its task began just before the abort came, which could not see it yet
            raise SandboxError(f"the runs of {owner} were aborted")
        _live_runs[key] = (owner, kill)
    try:
        yield
    finally:
        with _live_lock:
            _live_runs.pop(key, None)


def abort_live_runs(owner: str | None = None) -> int:
    """Kill the live runs of ``owner`` (None: all), and refuse its later ones; returns how many."""
    with _live_lock:
        if owner is not None:
            _aborted.add(owner)
        victims = [kill for who, kill in _live_runs.values() if owner is None or who == owner]
    for kill in victims:
        kill()
    return len(victims)


class SandboxError(RuntimeError):
    """The sandbox itself could not start the run (not the solver's fault)."""


@dataclass(frozen=True)
class Limits:
    timeout_sec: float = 300.0
    memory_mb: int = 8192
    file_size_mb: int = 2048
    cpu_count: int = os.cpu_count() or 1

    @property
    def cpu_seconds(self) -> int:
        # CPU time across all threads of one process: wall budget times the cores
        return int(self.timeout_sec * self.cpu_count) + 10


@dataclass
class RunRequest:
    argv: list[str]
    workdir: Path
    cache_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    read_only: list[Path] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    kernels: Path | None = None  # compiled kernels, mounted read-only (see kernel_cache.py)
    image: str | None = None  # the container backend: the track's image (its runtime)
    warm: WarmSpec | None = None  # the warm runner (warm.py): what the run imports and runs
    item: str = ""  # the item's audit folder: for the engine's labels, never shown to the run
    # bubblewrap: a folder to show as /tmp (None: a fresh tmpfs) and one holding runner.py
    # to show as the harness folder (None: runner.py bound alone); with them the run sees
    # folders of the harness's making and times (execution.ItemRun), not bubblewrap's
    tmp_dir: Path | None = None
    harness_dir: Path | None = None


@dataclass
class RunResult:
    returncode: int | None
    timed_out: bool
    wall_sec: float  # whole process
    solve_sec: float | None  # from the runner's start marker to process exit
    stdout: str
    stderr: str
    # CPU seconds of the run's processes over the timed window (the tree's, as reaped, less
    # what the runner had used at its marker); None where not measured (containers)
    cpu_sec: float | None = None

    @property
    def signal_name(self) -> str | None:
        """The signal that ended the solver: a negative return code, or 128 + n as bubblewrap
        (the sandbox's pid 1) reports a child killed by signal n, like a shell."""
        number = None
        if self.returncode is not None and self.returncode < 0:
            number = -self.returncode
        elif self.returncode is not None and 128 < self.returncode < 128 + signal.NSIG:
            number = self.returncode - 128
        if number is None:
            return None
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"

    def failure_reason(self) -> str | None:
        """One line saying why the run failed, or None if it exited cleanly."""
        if self.timed_out:
            return f"timed out after {self.wall_sec:.1f} s (killed)"
        if self.returncode == 0:
            return None
        limit = {"SIGXCPU": "CPU time limit exceeded", "SIGXFSZ": "file size limit exceeded",
                 "SIGKILL": "killed (out of memory?)"}.get(self.signal_name or "")
        if limit:
            return limit
        tail = _last_meaningful_line(self.stderr)
        code = f"exit code {self.returncode}"
        if self.signal_name:
            code = self.signal_name if self.returncode < 0 else f"{self.signal_name} (exit code {self.returncode})"
        return f"{code}: {tail}" if tail else code


def _last_meaningful_line(text: str) -> str:
    lines = text.strip().splitlines()
    summary = _dealii_exception(lines)
    if summary:
        return summary
    for line in reversed(lines):
        line = line.strip().removeprefix("PDEBENCH: ")
        if line and not line.startswith(("Traceback", "File ", "^")):
            return line[:300]
    return ""


def _dealii_exception(lines: list[str]) -> str:
    """deal.II prints exceptions as a block ending in a stack trace: keep what it says."""
    for index, line in enumerate(lines):
        if line.strip() == "Additional information:":
            words = []
            for follow in lines[index + 1:]:
                if not follow.strip():
                    break
                words.append(follow.strip())
            if words:
                return " ".join(words)[:300]
    return ""


class CappedLog:
    """A stream's head and tail (LOG_CAP_BYTES each), so a chatty solver cannot eat memory."""

    def __init__(self):
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        room = LOG_CAP_BYTES - len(self.head)
        self.head += chunk[:room]
        rest = chunk[room:] if room > 0 else chunk
        if rest:
            self.tail += rest
            if len(self.tail) > LOG_CAP_BYTES:
                self.dropped += len(self.tail) - LOG_CAP_BYTES
                del self.tail[: len(self.tail) - LOG_CAP_BYTES]

    def text(self) -> str:
        middle = f"\n[... {self.dropped} bytes dropped ...]\n" if self.dropped else ""
        return bytes(self.head).decode(errors="replace") + middle + bytes(self.tail).decode(errors="replace")


class _CappedStream(threading.Thread):
    """Drains a pipe into a CappedLog."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe, self.log = pipe, CappedLog()

    def run(self):
        with self.pipe:  # closed at its end: nothing else reads it
            for chunk in iter(lambda: self.pipe.read1(65536), b""):
                self.log.add(chunk)

    def text(self) -> str:
        return self.log.text()


class _Marker(threading.Thread):
    """Stamps the moment the runner says the timed window begins ("S" and the CPU seconds
    the run has used by then), and, from a cold run's waiting runner, takes the CPU
    seconds of the whole run at its end ("E" and the figure; runner.py)."""

    def __init__(self, fd: int):
        super().__init__(daemon=True)
        self.fd, self.time, self.cpu, self.total = fd, None, None, None

    def run(self):
        with os.fdopen(self.fd, "rb", buffering=0) as pipe:
            received = pipe.read(64)
            if not received:
                return
            self.time = time.perf_counter()
            while len(received) < 256:  # what an honest runner writes is far shorter
                more = pipe.read(64)
                if not more:
                    break
                received += more
        for message in re.findall(rb"([SE])([0-9.]+)", received):
            kind, figure = message[0], float(message[1])
            if kind == b"S" and self.cpu is None:
                self.cpu = figure
            elif kind == b"E":
                self.total = figure

    def window_cpu(self, total: float | None) -> float | None:
        """CPU seconds over the window, from the tree's total at its end."""
        return None if total is None or self.cpu is None else max(0.0, total - self.cpu)


def _wait_for_exit(process: subprocess.Popen, timeout: float) -> bool:
    """Wait until the process has exited, without reaping it; False on timeout.

    A pidfd wakes us the moment the process exits (Popen.wait with a timeout polls, with
    sleeps of up to 50 ms: that much noise at the end of the timed window)."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel): Popen's polling wait
        try:
            process.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        deadline = time.perf_counter() + timeout
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return False
            if poller.poll(max(1, int(remaining * 1000))):
                return True
    finally:
        os.close(pidfd)


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL to a process group, then reap its leader. The leader is not reaped before,
    so its id still names this group and no other."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _set_limits(limits: Limits):
    def apply():
        memory = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        size = limits.file_size_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


class Backend:
    name = "base"
    work, cache, kernels, harness = "", "", "", ""
    warm_capable = False  # runs requests that carry a WarmSpec through warm.py

    def available(self) -> str | None:
        """None when usable, else a message saying what to install."""
        return None

    def wrap(self, request: RunRequest, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict, str]:
        raise NotImplementedError

    def paths(self, request: RunRequest) -> dict[str, str]:
        return {"work": self.work, "cache": self.cache, "kernels": self.kernels, "harness": self.harness}

    def environment(self, request: RunRequest) -> dict[str, str]:
        paths = self.paths(request)
        return {key: value.format(**paths) for key, value in request.env.items()}

    def run(self, request: RunRequest) -> RunResult:
        if request.warm is not None and self.warm_capable:
            from .warm import run as run_warm

            return run_warm(self, request)
        paths = self.paths(request)
        argv = [arg.format(**paths) for arg in request.argv]
        env = self.environment(request)
        read_fd, write_fd = os.pipe()
        env["PDEBENCH_MARKER_FD"] = str(write_fd)
        command, process_env, cwd = self.wrap(request, argv, env)
        start = time.perf_counter()
        try:
            process = subprocess.Popen(
                command, cwd=cwd, env=process_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, pass_fds=(write_fd,), preexec_fn=_set_limits(request.limits),
                start_new_session=True,
            )
        except OSError as exc:
            os.close(read_fd)
            raise SandboxError(f"cannot start {command[0]}: {exc}") from exc
        finally:
            os.close(write_fd)
        marker, out, err = _Marker(read_fd), _CappedStream(process.stdout), _CappedStream(process.stderr)
        for thread in (marker, out, err):
            thread.start()
        try:
            with live_run(lambda: self.kill(process)):
                timed_out = not _wait_for_exit(process, request.limits.timeout_sec)
            end = time.perf_counter()
        finally:  # also on KeyboardInterrupt: leave nothing running behind us
            self.kill(process)  # the whole group: a child left behind cannot touch the outputs later
        for thread in (out, err):
            thread.join(timeout=10)
        marker.join(timeout=1)
        solve = end - marker.time if marker.time is not None else None
        result = RunResult(process.returncode, timed_out, end - start, solve, out.text(), err.text(),
                           marker.window_cpu(marker.total))
        self.check_started(result)
        return result

    def kill(self, process: subprocess.Popen) -> None:
        kill_group(process)

    def check_started(self, result: RunResult) -> None:
        pass


class BubblewrapBackend(Backend):
    name = "bubblewrap"
    warm_capable = True
    work, cache, kernels, harness = "/sandbox/work", "/sandbox/cache", "/sandbox/kernels", "/sandbox/harness"

    def __init__(self, executable: str | None = None):
        self.executable = executable or shutil.which("bwrap")

    def available(self) -> str | None:
        return None if self.executable else BWRAP_INSTALL_HINT

    def wrap(self, request, argv, env):
        command = [
            self.executable,
            "--unshare-user", "--uid", "65534", "--gid", "65534",  # no capabilities, even for root
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--clearenv",
            "--ro-bind", "/usr", "/usr",
        ]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            path = Path(top)
            if path.is_symlink():
                command += ["--symlink", os.readlink(path), top]
            elif path.is_dir():
                command += ["--ro-bind", top, top]
        command += [
            "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
            "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
            "--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu",  # CPU topology for hwloc
            "--dir", "/sys/class/net",
            "--proc", "/proc", "--dev", "/dev",
        ]
        if request.tmp_dir is not None:
            command += ["--bind", str(request.tmp_dir.resolve()), "/tmp"]
        else:
            command += ["--tmpfs", "/tmp"]
        for path in dict.fromkeys(Path(p).resolve() for p in request.read_only):
            command += ["--ro-bind", str(path), str(path)]
        command += [
            *(["--ro-bind", str(request.harness_dir.resolve()), self.harness] if request.harness_dir is not None
              else ["--ro-bind", str(RUNNER), f"{self.harness}/runner.py"]),
            "--bind", str(request.workdir.resolve()), self.work,
            "--bind", str(request.cache_dir.resolve()), self.cache,
        ]
        if request.kernels is not None:
            command += ["--ro-bind", str(request.kernels.resolve()), self.kernels]
        command += [
            "--remount-ro", "/",  # bwrap's own root tmpfs: no scratch space outside the mounts
            "--chdir", self.work,
        ]
        for key, value in env.items():
            command += ["--setenv", key, value]
        return command + ["--"] + argv, {"PATH": os.environ.get("PATH", "/usr/bin")}, None

    def holder_command(self, request: RunRequest, argv: list[str], info_fd: int) -> tuple[list[str], dict]:
        """The warm runner: this run's sandbox, exactly, around a placeholder ``argv``;
        bubblewrap writes the pid of its pid 1 to ``info_fd``."""
        command, host_env, _ = self.wrap(request, argv, self.environment(request))
        return [command[0], "--info-fd", str(info_fd), *command[1:]], host_env

    def check_started(self, result: RunResult) -> None:
        if result.solve_sec is None and result.stderr.startswith("bwrap:"):
            raise SandboxError(f"bubblewrap could not start the run: {result.stderr.strip()[:500]}")


class UnsandboxedBackend(Backend):
    """No isolation at all: same process handling, host paths."""

    name = "none"

    def paths(self, request):
        kernels = str(request.kernels.resolve()) if request.kernels is not None else ""
        return {"work": str(request.workdir.resolve()), "cache": str(request.cache_dir.resolve()),
                "kernels": kernels, "harness": str(HARNESS_DIR)}

    def wrap(self, request, argv, env):
        return argv, env, str(request.workdir)


def _docker_backend() -> Backend:
    from .docker_backend import DockerBackend  # imports the docker SDK only when chosen

    return DockerBackend()


BACKENDS = {"bubblewrap": BubblewrapBackend, "docker": _docker_backend, "none": UnsandboxedBackend}


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]()
    except KeyError:
        raise ValueError(f"unknown sandbox {name!r}; choose one of {', '.join(BACKENDS)}") from None
