"""The process plumbing of a run, the same under every backend: who owns the live runs
(so that one owner's can all be killed), capped logs, the start marker, a wait that
wakes when the process exits, and killing a process group."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import resource
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from .runs import Limits, SandboxError

LOG_CAP_BYTES = 256 * 1024  # kept from the head and from the tail of each stream

# the runs going on in this process, so that all of one owner's can be killed at once
# (a cluster worker whose controller was interrupted: cluster/worker.py)
_live_runs: dict[int, tuple[str | None, Callable[[], object]]] = {}
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


class CappedStream(threading.Thread):
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


class Marker(threading.Thread):
    """Stamps the moment the runner says the timed window begins ("S" and the CPU seconds
    the run has used by then), and, from a cold run's waiting runner, takes the CPU
    seconds of the whole run at its end ("E" and the figure; runner.py)."""

    def __init__(self, fd: int):
        super().__init__(daemon=True)
        self.fd = fd
        self.time: float | None = None
        self.cpu: float | None = None
        self.total: float | None = None

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


def wait_for_exit(process: subprocess.Popen, timeout: float) -> bool:
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


def set_limits(limits: Limits):
    def apply():
        memory = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        size = limits.file_size_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply
