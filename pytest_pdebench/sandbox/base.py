"""A backend turns a ``RunRequest`` into a ``RunResult``: this is the part they share (start
the wrapped command, stamp the timed window, enforce the timeout, kill the whole group)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from .processes import CappedStream, Marker, kill_group, live_run, set_limits, wait_for_exit
from .runs import RunRequest, RunResult, SandboxError

HARNESS_DIR = Path(__file__).parent
RUNNER = HARNESS_DIR / "runner.py"


class Backend:
    name = "base"
    work, cache, kernels, harness = "", "", "", ""
    # a request's WarmSpec is for backends that can fork runs from a zygote (bubblewrap);
    # the others run every request in a fresh process

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
        paths = self.paths(request)
        argv = [arg.format(**paths) for arg in request.argv]
        env = self.environment(request)
        read_fd, write_fd = os.pipe()
        env["PDEBENCH_MARKER_FD"] = str(write_fd)
        command, process_env, cwd = self.wrap(request, argv, env)
        start = time.perf_counter()
        try:
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env=process_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(write_fd,),
                preexec_fn=set_limits(request.limits),
                start_new_session=True,
            )
        except OSError as exc:
            os.close(read_fd)
            raise SandboxError(f"cannot start {command[0]}: {exc}") from exc
        finally:
            os.close(write_fd)
        marker, out, err = Marker(read_fd), CappedStream(process.stdout), CappedStream(process.stderr)
        for thread in (marker, out, err):
            thread.start()
        try:
            with live_run(lambda: self.kill(process)):
                timed_out = not wait_for_exit(process, request.limits.timeout_sec)
            end = time.perf_counter()
        finally:  # also on KeyboardInterrupt: leave nothing running behind us
            self.kill(process)  # the whole group: a child left behind cannot touch the outputs later
        for thread in (out, err):
            thread.join(timeout=10)
        marker.join(timeout=1)
        solve = end - marker.time if marker.time is not None else None
        result = RunResult(
            process.returncode, timed_out, end - start, solve, out.text(), err.text(), marker.window_cpu(marker.total)
        )
        self.check_started(result)
        return result

    def kill(self, process: subprocess.Popen) -> None:
        kill_group(process)

    def check_started(self, result: RunResult) -> None:
        pass
