"""The warm runner (``--pde-runner=warm``, the default with bubblewrap): the track's
libraries are imported once per worker by a long-lived process (``zygote.py``), and each
run is a fork of it that enters the run's own sandbox.

The sandbox is the fresh process's, built by the same ``BubblewrapBackend.wrap`` with the
same mounts, limits and environment, around a placeholder process instead of the runner;
the zygote's fork joins its namespaces and runs the submission there. The timed window is
the fresh process's too: from the run's marker until every process of the run is gone.
When the zygote reports that the solver has exited, the sandbox is ended, and with its
pid 1 whatever the run left running; the clock stops once that pid 1 is gone (a child the
solver left behind cannot write the outputs after the clock stops).

One zygote per runtime and environment, per process; the two most recently used are
kept. A zygote that dies is started again for the next run; a run it was serving ends
in a SandboxError (the harness's failure, never the submission's verdict).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from typing import IO, cast

from .base import HARNESS_DIR
from .processes import CappedLog, CappedStream, Marker, kill_group, live_run
from .runs import RunRequest, RunResult, SandboxError, WarmSpec

ZYGOTE = HARNESS_DIR / "zygote.py"
KEPT_ZYGOTES = 2
START_TIMEOUT_SEC = 300.0  # importing a track on a loaded machine
SANDBOX_START_TIMEOUT_SEC = 60.0
KILL_GRACE_SEC = 30.0  # a killed run's processes are gone well within this
WARM_FAILURE = "PDEBENCH: the warm runner could not start the run"
# the process that keeps the run's sandbox open until the zygote's fork has joined it
PLACEHOLDER = ["/bin/sh", "-c", "echo ready && exec sleep infinity"]


class Zygote:
    """One zygote process and the harness's end of its socket."""

    def __init__(self, python: str, spec: WarmSpec, env: dict[str, str]):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # an empty folder of its own to start in; the run's environment (HOME, caches)
        # names sandbox paths, which do not exist out here
        self.folder = tempfile.mkdtemp(prefix="pytest-pdebench-zygote-")
        argv = [python, "-I", str(ZYGOTE), *(["--defer-mpi"] if spec.defer_mpi else [])]
        argv += [f"--map={','.join(spec.zygote_libraries)}"] if spec.zygote_libraries else []
        argv += [f"--code={','.join(spec.zygote_code)}"] if spec.zygote_code else []
        argv.append(spec.zygote_preload)
        try:
            self.process = subprocess.Popen(
                argv,
                env=env,
                cwd=self.folder,
                stdin=theirs.fileno(),  # what Popen takes of a socket
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise SandboxError(f"cannot start the warm runner ({python}): {exc}") from exc
        finally:
            theirs.close()
        self.channel, self.count, self.log = ours, 0, CappedLog()
        for pipe in (self.process.stdout, self.process.stderr):
            threading.Thread(target=self._drain, args=(pipe,), daemon=True).start()
        hello = self._receive(START_TIMEOUT_SEC)
        if not hello or not hello.get("ready"):
            self.close()
            said = (hello or {}).get("error") or self.output() or "no output"
            raise SandboxError(f"the warm runner did not start: {said}")
        self.preload_sec = hello["preload_sec"]

    def _drain(self, pipe) -> None:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            self.log.add(chunk)

    def output(self) -> str:
        return self.log.text().strip()[-2000:]

    def _receive(self, timeout: float | None) -> dict | None:
        """The zygote's next message; None when it is gone or ``timeout`` passed."""
        if not select.select([self.channel], [], [], timeout)[0]:
            return None
        try:
            message = self.channel.recv(65536)
        except OSError:
            return None
        return json.loads(message) if message else None

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, request: dict, fds: list[int]) -> None:
        """One run: the request, with the run's stdout, stderr and marker pipes."""
        self.count += 1
        try:
            socket.send_fds(self.channel, [json.dumps(request).encode()], fds)
        except OSError as exc:
            raise SandboxError(f"the warm runner is gone: {exc}; {self.output()}") from exc

    def wait(self, timeout: float, on_timeout) -> tuple[dict | None, bool]:
        """The run's reply (None: the zygote died) and whether it timed out."""
        reply = self._receive(timeout)
        if reply is None and self.alive():
            on_timeout()  # ends the run's sandbox: the solver goes with it, and the zygote says so
            return self._receive(KILL_GRACE_SEC), True
        return reply, False

    def close(self) -> None:
        """Close the socket (the zygote leaves), then kill what is left of it."""
        try:
            self.channel.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill_group(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)


_zygotes: OrderedDict[tuple, Zygote] = OrderedDict()
_lock = threading.Lock()


def _zygote_for(python: str, spec: WarmSpec, env: dict[str, str]) -> Zygote:
    key = (
        python,
        spec.zygote_preload,
        spec.zygote_libraries,
        spec.zygote_code,
        spec.defer_mpi,
        tuple(sorted(env.items())),
    )
    zygote = _zygotes.pop(key, None)
    if zygote is not None and not zygote.alive():
        zygote.close()
        zygote = None
    if zygote is None:
        zygote = Zygote(python, spec, env)
    _zygotes[key] = zygote
    while len(_zygotes) > KEPT_ZYGOTES:
        _zygotes.popitem(last=False)[1].close()
    return zygote


def _forget(zygote: Zygote) -> None:
    for key, known in list(_zygotes.items()):
        if known is zygote:
            del _zygotes[key]
    zygote.close()


@atexit.register
def close_all() -> None:
    with _lock:
        while _zygotes:
            _zygotes.popitem()[1].close()


def _end_sandbox(sandbox: subprocess.Popen) -> None:
    kill_group(sandbox)
    for pipe in (sandbox.stdout, sandbox.stderr):
        cast(IO[bytes], pipe).close()  # both PIPE (_start_sandbox)


def _pidfd(pid: int) -> int | None:
    """A pidfd on the sandbox's pid 1 (None: no pidfds here, or it is gone already)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _wait_until_gone(pidfd: int | None) -> None:
    """Until the sandbox's pid 1 has exited: the kernel ends a pid namespace's other
    processes before its first one's exit is seen, so then nothing of the run is left."""
    if pidfd is not None and not select.select([pidfd], [], [], KILL_GRACE_SEC)[0]:
        raise SandboxError(f"the run's sandbox did not end within {KILL_GRACE_SEC:g} s of being killed")


def _start_sandbox(backend, request: RunRequest) -> tuple[subprocess.Popen, int]:
    """The run's sandbox around the placeholder, and the host pid of its pid 1."""
    info_read, info_write = os.pipe()
    command, host_env = backend.holder_command(request, PLACEHOLDER, info_write)
    try:
        sandbox = subprocess.Popen(
            command,
            env=host_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(info_write,),
            start_new_session=True,
        )
    except OSError as exc:
        os.close(info_read)
        raise SandboxError(f"cannot start {command[0]}: {exc}") from exc
    finally:
        os.close(info_write)
    stdout, stderr = cast(IO[bytes], sandbox.stdout), cast(IO[bytes], sandbox.stderr)  # both PIPE
    with os.fdopen(info_read, "rb") as info:
        ready = select.select([stdout], [], [], SANDBOX_START_TIMEOUT_SEC)[0] and stdout.readline()
        if ready != b"ready\n":
            kill_group(sandbox)
            raise SandboxError(f"bubblewrap could not start the run: {stderr.read().decode()[:500]}")
        text = b""  # complete once the placeholder runs: bubblewrap writes it before
        while b"}" not in text:
            chunk = info.read(4096)
            if not chunk:
                break
            text += chunk
    try:
        return sandbox, int(json.loads(text)["child-pid"])
    except (ValueError, KeyError) as exc:
        _end_sandbox(sandbox)
        raise SandboxError(f"bubblewrap did not say where the run's sandbox is: {text[:200]!r}") from exc


def run(backend, request: RunRequest) -> RunResult:
    """``request`` through a zygote of its track, in its own sandbox of ``backend``."""
    spec = cast(WarmSpec, request.warm)  # the backend sends only its warm requests here
    env = backend.environment(request)
    limits = request.limits
    payload = {
        "solver": spec.solver,
        "preload": spec.preload,
        "start_mpi": spec.start_mpi,
        "mpi_on_import": list(spec.mpi_on_import),
        "limits": {
            "memory_mb": limits.memory_mb,
            "cpu_seconds": limits.cpu_seconds,
            "file_size_mb": limits.file_size_mb,
        },
    }
    with _lock:
        zygote = _zygote_for(request.argv[0], spec, env)
        start = time.perf_counter()
        sandbox, ns_pid = _start_sandbox(backend, request)
        pidfd = _pidfd(ns_pid)
        pipes = [os.pipe() for _ in range(3)]  # stdout, stderr, marker
        out = CappedStream(os.fdopen(pipes[0][0], "rb"))
        err = CappedStream(os.fdopen(pipes[1][0], "rb"))
        marker = Marker(pipes[2][0])
        for thread in (marker, out, err):
            thread.start()
        reply, timed_out = None, False
        try:
            try:
                zygote.send({**payload, "ns_pid": ns_pid}, [write for _, write in pipes])
            finally:  # the run holds them now: their ends arrive when it is gone
                for _, write in pipes:
                    os.close(write)
            with live_run(lambda: kill_group(sandbox)):
                reply, timed_out = zygote.wait(limits.timeout_sec, lambda: kill_group(sandbox))
                # the clock stops when every process of the run is gone, not when the solver
                # is: a child it left could still write the outputs, off the clock
                _end_sandbox(sandbox)
                _wait_until_gone(pidfd)
            end = time.perf_counter()
        finally:  # also on KeyboardInterrupt: nothing of the run outlives this call
            _end_sandbox(sandbox)
            if pidfd is not None:
                os.close(pidfd)
            if reply is None:
                _forget(zygote)
    for thread in (out, err):
        thread.join(timeout=10)
    marker.join(timeout=1)
    if reply is None:
        raise SandboxError(f"the warm runner died during a run: {zygote.output() or 'no output'}")
    solve = end - marker.time if marker.time is not None else None
    result = RunResult(
        reply["returncode"],
        timed_out,
        end - start,
        solve,
        out.text(),
        err.text(),
        marker.window_cpu(reply.get("cpu_sec")),
    )
    if solve is None and result.stderr.startswith(WARM_FAILURE):
        raise SandboxError(
            f"{result.stderr.strip()[:500]}; `--pde-runner=cold` starts a fresh interpreter per run instead"
        )
    return result
