"""The deal.II track: C++17 programs compiled against Debian's deal.II 9.4.1.

A submission is a source file (``solver.cpp`` plus ``_*.h`` helper headers). It is
compiled once per item, inside the sandbox, then every run executes

    solver case_spec.json .

in a fresh working directory. The runner writes the start marker just before it
``exec``s the program, so the timed window holds the program's whole life, loading of
the shared libraries included (about 0.3 s of any deal.II program here). Compile time
is reported separately (``compile_sec``) and never counted in ``t_agent``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import platform
import shutil
import time
from pathlib import Path

from ..bundled import cache_root
from ..containers import ContainerError, probe
from ..run_files import HeldFolder, UnsafeOutput
from ..sandbox import Limits, RunRequest
from .base import OPEN_MPI_SINGLETON_ENV, BuildResult, Runtime, RuntimeMissing, Track, thread_env
from .cxx_toolchain import (
    COMPILE_TIMEOUT_SEC,
    CXX_SOURCE_SUFFIXES,
    Toolchain,
    ToolchainError,
    first_errors,
    image_toolchain,
    load_toolchain,
)

SYSTEM_PYTHON = "/usr/bin/python3"  # runs the standard-library runner that exec()s the program
EXECUTABLE = "solver"
IMAGE_TOOLCHAIN = "/opt/pdebench/toolchain"  # where containers/dealii prepares flags and PCH


@functools.cache
def _image_toolchain(image: str) -> Toolchain:
    data = json.loads(probe(image, ["cat", f"{IMAGE_TOOLCHAIN}/toolchain.json"]))
    return image_toolchain(
        data, IMAGE_TOOLCHAIN, cache_root() / f"dealii-binaries-{image.removeprefix('sha256:')[:12]}"
    )


def host_toolchain() -> Toolchain:
    """This machine's toolchain: CMake's flags, linked by LLVM's lld on one thread (a worker
    owns one core) where the ``lld`` package is installed, else by CMake's gold. lld links a
    deal.II program in 0.6 s against gold's 1.2-1.6 s; the program loads the same libraries
    and runs as fast (docs/start/dealii.md), so baselines linked by gold still hold. Kept
    out of cxx_toolchain.py, which is part of the deal.II image's recipe: the image links
    with gold until it is rebuilt with lld. Raises ToolchainError."""
    return _host_toolchain(cache_root())


@functools.cache
def _host_toolchain(root: Path) -> Toolchain:
    # once per cache root, not once per process: a process whose HOME or PDEBENCH_CACHE
    # changes (a pytester run) must not keep the first root's folder (load_toolchain's own
    # cache would, and its module's bytes are the image's recipe)
    toolchain = load_toolchain.__wrapped__()
    if not shutil.which("ld.lld"):
        return toolchain
    kept = tuple(flag for flag in toolchain.link_flags if not flag.startswith("-fuse-ld="))
    return dataclasses.replace(toolchain, link_flags=("-fuse-ld=lld", "-Wl,--threads=1", *kept))


def toolchain_for(runtime: Runtime) -> Toolchain:
    return _image_toolchain(runtime.image) if runtime.image else host_toolchain()


# The BLAS and LAPACK every deal.II run loads, whatever the system's alternative says:
# Debian's reference ones, which the image has and the baselines were measured with.
# (Installing libopenblas-dev, as the Firedrake provisioning does, switches the system's
# libblas.so.3 to OpenBLAS. Measured on stokes_nu1_unit_cube_007 within one hour: 17 s in
# bubblewrap with OpenBLAS, 122 s in bubblewrap with the reference BLAS, 129 s in the image;
# so bubblewrap runs had silently left the runtime their baselines were measured with.)
REFERENCE_BLAS_DIRS = tuple(f"/usr/lib/{platform.machine()}-linux-gnu/{name}" for name in ("blas", "lapack"))


PROGRAM_CAP_BYTES = 1 << 30


def _built_program(build_dir: Path) -> Path | None:
    """The program a compile left in ``build_dir`` (the sandbox's folder), copied out by
    descriptor as a regular file (never through a link) into a folder beside it that no
    run has held; None if there is none."""
    try:
        with HeldFolder(build_dir) as held:
            content = held.read(EXECUTABLE, PROGRAM_CAP_BYTES)
    except UnsafeOutput:
        return None
    if content is None:
        return None
    folder = build_dir.with_name(build_dir.name + "-program")
    folder.mkdir()
    with HeldFolder(folder) as fresh:
        fresh.write(EXECUTABLE, content, mode=0o755)
    return folder / EXECUTABLE


class DealiiTrack(Track):
    name = "dealii"
    suffixes = (".cpp", ".cc")
    binary_outputs = True
    install_hint = (
        "Install deal.II 9.4 and its build tools with `apt-get install --no-install-recommends "
        "libdeal.ii-dev libblas3 liblapack3 cmake g++ make nlohmann-json3-dev gmsh lld` (Debian 12; about a "
        "minute, 2 GB), or run `make setup`."
    )

    def detect(self) -> Runtime:
        try:
            toolchain = host_toolchain()
        except ToolchainError as exc:
            raise RuntimeMissing(f"deal.II runtime not usable: {exc}. {self.install_hint}") from None
        if not Path(SYSTEM_PYTHON).is_file():
            raise RuntimeMissing(f"{SYSTEM_PYTHON} is missing (the deal.II runner needs it)")
        missing = [d for d in REFERENCE_BLAS_DIRS if not next(Path(d).glob("lib*.so.3"), None)]
        if missing:
            raise RuntimeMissing(
                f"the reference BLAS/LAPACK the deal.II track runs with is missing ({', '.join(missing)}):"
                " `apt-get install libblas3 liblapack3`"
            )
        # only the precompiled header is the sandbox's to read: the binary cache beside it holds
        # other programs, the oracle's among them (visibility.py)
        toolchain.pch_header.parent.mkdir(parents=True, exist_ok=True)
        return Runtime(self.name, toolchain.dealii, SYSTEM_PYTHON, (str(toolchain.pch_header.parent),))

    def detect_container(self, image: str, labels: dict) -> Runtime:
        try:
            toolchain = _image_toolchain(image)
        except (ContainerError, ValueError, KeyError) as exc:
            raise RuntimeMissing(
                f"no deal.II toolchain in image {image[:19]} ({exc}): build it with `pdebench containers build dealii`"
            ) from None
        return Runtime(self.name, toolchain.dealii, labels.get("org.pdebench.python") or SYSTEM_PYTHON, (), image=image)

    def build(
        self, runtime: Runtime, files: dict[str, bytes], solver_name: str, build_dir: Path, backend, limits: Limits
    ) -> BuildResult:
        toolchain = toolchain_for(runtime)
        key = toolchain.binary_key(files)
        cached = toolchain.cached_binary(key)
        if cached:
            target = build_dir / EXECUTABLE
            shutil.copy2(cached, target)
            return BuildResult(target, 0.0, cached=True, used_pch=False)
        use_pch = toolchain.ensure_pch()
        sources = [solver_name] + sorted(n for n in files if n != solver_name and n.endswith(CXX_SOURCE_SUFFIXES))
        compile_limits = Limits(timeout_sec=COMPILE_TIMEOUT_SEC, memory_mb=max(limits.memory_mb, 4096))
        attempts = [True, False] if use_pch else [False]
        started = time.perf_counter()
        for with_pch in attempts:
            request = RunRequest(
                toolchain.compile_command(sources, EXECUTABLE, with_pch),
                build_dir,
                build_dir,
                self.sandbox_env(),
                [Path(p) for p in runtime.read_only],
                compile_limits,
                image=runtime.image,
            )
            result = backend.run(request)
            log = result.stdout + result.stderr
            program = _built_program(build_dir) if result.returncode == 0 else None
            if program is not None:
                toolchain.store_binary(key, program)
                return BuildResult(program, time.perf_counter() - started, cached=False, used_pch=with_pch, log=log)
            if result.timed_out:
                break  # without the PCH it would only be slower
        elapsed = time.perf_counter() - started
        if result.timed_out:
            reason = f"compilation timed out after {COMPILE_TIMEOUT_SEC:.0f} s"
        else:
            reason = "compile error: " + (first_errors(result.stderr) or result.failure_reason() or "no output")
        return BuildResult(None, elapsed, cached=False, used_pch=False, failure=reason, log=log)

    def sandbox_env(self) -> dict[str, str]:
        return {
            "PATH": "/usr/bin:/bin",
            "LD_LIBRARY_PATH": ":".join(REFERENCE_BLAS_DIRS),
            "HOME": "{work}",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            **thread_env(),
            **OPEN_MPI_SINGLETON_ENV,
        }

    def run_request(self, runtime, solver_name, workdir, cache_dir, limits, imports_track=True) -> RunRequest:
        argv = [runtime.python, "-I", "{harness}/runner.py", "--exec", f"./{EXECUTABLE}", "case_spec.json", "."]
        return RunRequest(
            argv,
            workdir,
            cache_dir,
            self.sandbox_env(),
            [Path(p) for p in runtime.read_only],
            limits,
            image=runtime.image,
        )
