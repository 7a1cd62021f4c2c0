"""What a sandboxed run is asked to do and what it gave back: the data every backend shares."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class WarmSpec:
    """What a Python track's run needs from the warm runner: the submission's file name,
    the imports done in the run before its clock starts (``preload``) and those done once
    in the zygote (``zygote_preload``; with ``defer_mpi`` MPI is initialised in each run:
    before the clock with ``start_mpi``, else on the run's first import of a module under
    ``mpi_on_import``, inside the timed window). ``zygote_libraries``: extension modules the
    zygote maps without importing them (``package/folder/name*suffix``): importing them starts MPI."""

    solver: str
    preload: str
    zygote_preload: str
    defer_mpi: bool = False
    start_mpi: bool = True
    mpi_on_import: tuple[str, ...] = ()
    zygote_libraries: tuple[str, ...] = ()
    zygote_code: tuple[str, ...] = ()  # packages whose modules' bytecode the zygote reads (zygote.py)


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
        limit = {
            "SIGXCPU": "CPU time limit exceeded",
            "SIGXFSZ": "file size limit exceeded",
            "SIGKILL": "killed (out of memory?)",
        }.get(self.signal_name or "")
        if limit:
            return limit
        tail = _last_meaningful_line(self.stderr)
        code = f"exit code {self.returncode}"
        if self.signal_name:
            code = (
                self.signal_name
                if self.returncode is not None and self.returncode < 0
                else f"{self.signal_name} (exit code {self.returncode})"
            )
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
            for follow in lines[index + 1 :]:
                if not follow.strip():
                    break
                words.append(follow.strip())
            if words:
                return " ".join(words)[:300]
    return ""
