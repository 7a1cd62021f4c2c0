"""The default sandbox: bubblewrap, unprivileged namespaces around the run (see the package
docstring for what the run sees); with a ``WarmSpec`` the run is forked from a warm
zygote (warm.py) into the same sandbox."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..visibility import hidden_in
from . import warm
from .base import RUNNER, Backend
from .runs import RunRequest, RunResult, SandboxError

BWRAP_INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed: it isolates every solver run. "
    "Install it with `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap`, "
    "or run `make setup`; `--pde-sandbox=none` runs solvers unsandboxed (unsafe for untrusted code)."
)


def read_only_mounts(read_only) -> list[str]:
    """bubblewrap's arguments for the read-only mounts (visibility.py: the allow-list), each
    folder a run must not see under them shown as an empty tmpfs (made read-only at the
    end: a file mounted inside it, such as an agent's forwarder, still needs its mount
    point). Shallower paths first, so that a mount inside a hidden folder lands on its
    tmpfs and is not hidden by it."""
    binds = [(str(path), "--ro-bind") for path in dict.fromkeys(Path(p).resolve() for p in read_only)]
    masks = [(hidden, "--tmpfs") for hidden in hidden_in(read_only)]
    arguments: list[str] = []
    for path, kind in sorted(binds + masks, key=lambda entry: (len(Path(entry[0]).parts), entry[1] == "--tmpfs")):
        arguments += [kind, path, path] if kind == "--ro-bind" else [kind, path]
    return arguments


class BubblewrapBackend(Backend):
    name = "bubblewrap"
    work, cache, kernels, harness = "/sandbox/work", "/sandbox/cache", "/sandbox/kernels", "/sandbox/harness"

    def __init__(self, executable: str | None = None):
        self.executable = executable or shutil.which("bwrap")

    def available(self) -> str | None:
        return None if self.executable else BWRAP_INSTALL_HINT

    def wrap(self, request, argv, env):
        command = [
            self.executable,
            "--unshare-user",
            "--uid",
            "65534",
            "--gid",
            "65534",  # no capabilities, even for root
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            path = Path(top)
            if path.is_symlink():
                command += ["--symlink", os.readlink(path), top]
            elif path.is_dir():
                command += ["--ro-bind", top, top]
        command += [
            "--ro-bind-try",
            "/etc/ld.so.cache",
            "/etc/ld.so.cache",
            "--ro-bind-try",
            "/etc/alternatives",
            "/etc/alternatives",
            "--ro-bind-try",
            "/sys/devices/system/cpu",
            "/sys/devices/system/cpu",  # CPU topology for hwloc
            "--dir",
            "/sys/class/net",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        if request.tmp_dir is not None:
            command += ["--bind", str(request.tmp_dir.resolve()), "/tmp"]
        else:
            command += ["--tmpfs", "/tmp"]
        command += read_only_mounts(request.read_only)
        command += [
            *(
                ["--ro-bind", str(request.harness_dir.resolve()), self.harness]
                if request.harness_dir is not None
                else ["--ro-bind", str(RUNNER), f"{self.harness}/runner.py"]
            ),
            "--bind",
            str(request.workdir.resolve()),
            self.work,
            "--bind",
            str(request.cache_dir.resolve()),
            self.cache,
        ]
        if request.kernels is not None:
            command += ["--ro-bind", str(request.kernels.resolve()), self.kernels]
        for hidden in hidden_in(request.read_only):
            command += ["--remount-ro", hidden]
        command += [
            "--remount-ro",
            "/",  # bwrap's own root tmpfs: no scratch space outside the mounts
            "--chdir",
            self.work,
        ]
        for key, value in env.items():
            command += ["--setenv", key, value]
        return command + ["--"] + argv, {"PATH": os.environ.get("PATH", "/usr/bin")}, None

    def run(self, request: RunRequest) -> RunResult:
        if request.warm is not None:
            return warm.run(self, request)
        return super().run(request)

    def holder_command(self, request: RunRequest, argv: list[str], info_fd: int) -> tuple[list[str], dict]:
        """The warm runner: this run's sandbox, exactly, around a placeholder ``argv``;
        bubblewrap writes the pid of its pid 1 to ``info_fd``."""
        command, host_env, _ = self.wrap(request, argv, self.environment(request))
        return [command[0], "--info-fd", str(info_fd), *command[1:]], host_env

    def check_started(self, result: RunResult) -> None:
        if result.solve_sec is None and result.stderr.startswith("bwrap:"):
            raise SandboxError(f"bubblewrap could not start the run: {result.stderr.strip()[:500]}")
