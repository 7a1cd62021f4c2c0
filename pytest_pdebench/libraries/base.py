"""What every track shares: the runtime a track found, a build's result, the ``Track``
and ``PythonTrack`` bases, the environment a run gets. The tracks themselves are
``dolfinx.py``, ``firedrake.py`` and ``dealii.py``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..containers import ContainerError, env_in, probe_program, probe_python, python_in
from ..kernel_cache import KernelRule
from ..sandbox import RunRequest, WarmSpec

# what a run of a submission that never imports its track imports before the clock, on a
# track without a zygote (with one: the zygote's modules, the same for every runner)
LIGHT_PRELOAD = "numpy"


class RuntimeMissing(RuntimeError):
    """The track's runtime is not installed; the message says how to install it."""


@dataclass(frozen=True)
class Runtime:
    """A detected runtime: what to mount read-only and the solver's environment."""

    library: str
    version: str
    python: str
    read_only: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    image: str | None = None  # the container backend: the image id the runtime lives in

    @property
    def key(self) -> str:
        """Names the runtime in cache keys: a container image's runtime is not the host's."""
        return f"{self.version}-{self.image.removeprefix('sha256:')[:12]}" if self.image else self.version


@dataclass
class BuildResult:
    """A compiled submission (tracks with a build step): the executable or why not."""

    executable: Path | None
    seconds: float
    cached: bool
    used_pch: bool
    failure: str | None = None
    log: str | None = None  # the compiler's output (from its pipes, never a file of the build)


class Track:
    name = ""
    suffixes: tuple[str, ...] = ()
    install_hint = ""
    binary_outputs = False  # may write solution_grid.bin / <name>.bin instead of solution.npz

    def build(
        self, runtime: Runtime, files: dict[str, bytes], solver_name: str, build_dir: Path, backend, limits
    ) -> BuildResult | None:
        """Compile the submission once per item (None: nothing to build)."""
        return None

    # which files of a run's cache folder are compiled kernels (see kernel_cache.py);
    # none: nothing a run writes reaches another run
    kernel_rules: tuple[KernelRule, ...] = ()
    # what one run may add to the item's store at most (kernel_cache.KernelCache)
    kernel_files_per_run, kernel_bytes_per_run = 64, 32 << 20

    def warm_spec(self, solver_name: str, imports_track: bool = True):
        return None  # compiled tracks: nothing to import before the program starts

    def imports_track(self, files: Mapping[str, bytes]) -> bool:
        """Whether a submission of these files may import the track's libraries (compiled
        tracks: always; their programs link them)."""
        return True

    def detect(self) -> Runtime:
        raise NotImplementedError

    def detect_container(self, image: str, labels: dict) -> Runtime:
        """The runtime inside a container image (the docker sandbox)."""
        raise RuntimeMissing(f"the {self.name} track does not run in containers yet")

    def run_request(
        self, runtime: Runtime, solver_name: str, workdir: Path, cache_dir: Path, limits, imports_track: bool = True
    ) -> RunRequest:
        raise NotImplementedError


def _probe_python(python: str, modules: str, version_expr: str, timeout: float = 120) -> dict:
    """Ask an interpreter for its prefixes and a library version, in a subprocess."""
    code = probe_program(modules, version_expr)
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeMissing(str(exc)) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeMissing(f"{python}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# Open MPI (Debian's, under Firedrake and deal.II) as a singleton in a network-less sandbox:
# it looks for no peers (ess), and is given the only transports a process alone needs,
# ob1 over "self", instead of probing UCX, libfabric and shared memory for them. Measured
# in a warm Firedrake run: MPI_Init 0.37 s with Open MPI's defaults, 0.025 s with these
# (docs/results/2026-11-26-harness-overhead.md). MPI starts outside the timed windows of the
# Python tracks; deal.II's oracle does not start MPI.
OPEN_MPI_SINGLETON_ENV = {"OMPI_MCA_ess_singleton_isolated": "1", "OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self"}


def thread_env() -> dict[str, str]:
    """One thread per BLAS/OpenMP pool: parallelism is the solver's explicit choice."""
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    # set on some CPUs because older OpenBLAS builds compute wrong results there
    for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


class PythonTrack(Track):
    """A track whose submissions are Python files exposing solve(case_spec)."""

    suffixes = (".py",)
    python_env_var = ""
    probe_modules = ""
    version_expr = ""
    preload = ""
    # a submission whose files name none of these modules never imports the track: its
    # runs skip the track's start-up (PETSc and the library, and in the warm runner MPI;
    # 0.15-0.6 s a run) and import before the clock only what the zygote holds, with any
    # runner. One that imports the track all the same under a name built at run time does
    # so inside its timed window (the warm runner starts MPI first).
    track_modules: tuple[str, ...] = ()
    # the warm runner (sandbox/warm.py): imported once per worker, before any fork;
    # None: this track's runs always start a fresh interpreter
    zygote_preload: str | None = None
    defer_mpi = False  # the zygote leaves MPI uninitialised; each run initialises its own
    # extension modules whose import starts MPI (PETSc's): the zygote maps their shared
    # objects (and what they link) without importing them, so a run's import of them does
    # not load and relocate them again (``package/folder/name*suffix``; the package is found,
    # not imported)
    zygote_libraries: tuple[str, ...] = ()
    # packages imported only after MPI starts: the zygote reads their modules' bytecode once,
    # and a run's import executes it without finding, reading and unmarshalling it again
    zygote_code: tuple[str, ...] = ()

    def warm_spec(self, solver_name: str, imports_track: bool = True):
        """What the warm runner needs for a run of ``solver_name``, or None."""
        if self.zygote_preload is None:
            return None
        return WarmSpec(
            solver_name,
            self.preload_for(imports_track),
            self.zygote_preload,
            self.defer_mpi,
            start_mpi=imports_track,
            mpi_on_import=self.track_modules,
            zygote_libraries=self.zygote_libraries,
            zygote_code=self.zygote_code,
        )

    def imports_track(self, files: Mapping[str, bytes]) -> bool:
        if not self.track_modules:
            return True
        names = re.compile(rb"\b(%s)\b" % b"|".join(re.escape(m.encode()) for m in self.track_modules))
        return any(names.search(content) for content in files.values())

    def preload_for(self, imports_track: bool) -> str:
        """The modules a run imports before its clock starts."""
        return self.preload if imports_track else (self.zygote_preload or LIGHT_PRELOAD)

    def python_path(self) -> str:
        return os.environ.get(self.python_env_var) or sys.executable

    def detect(self) -> Runtime:
        python = self.python_path()
        try:
            info = _probe_python(python, self.probe_modules, self.version_expr)
        except RuntimeMissing as exc:
            raise RuntimeMissing(f"{self.name} runtime not found ({exc}). {self.install_hint}") from None
        read_only = tuple(dict.fromkeys([info["prefix"], info["base_prefix"], *self.extra_read_only(info)]))
        return Runtime(self.name, info["version"], python, read_only, self.extra_env(info))

    def detect_container(self, image: str, labels: dict) -> Runtime:
        python = python_in(self.name, labels)
        try:
            info = probe_python(image, python, self.probe_modules, self.version_expr)
        except ContainerError as exc:
            raise RuntimeMissing(f"{self.name} runtime not usable in image {image[:19]}: {exc}") from None
        return Runtime(self.name, info["version"], python, (), {**env_in(labels), **self.extra_env(info)}, image=image)

    def extra_env(self, info: dict) -> dict[str, str]:
        return {}

    def extra_read_only(self, info: dict) -> list[str]:
        return []

    def run_request(self, runtime, solver_name, workdir, cache_dir, limits, imports_track=True) -> RunRequest:
        env = {
            "PATH": f"{Path(runtime.python).parent}:/usr/bin:/bin",
            "HOME": "{work}",
            "XDG_CACHE_HOME": "{cache}",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            **thread_env(),
            **runtime.env,
        }
        argv = [runtime.python, "-I", "{harness}/runner.py", solver_name, self.preload_for(imports_track)]
        return RunRequest(
            argv, workdir, cache_dir, env, [Path(p) for p in runtime.read_only], limits, image=runtime.image
        )
