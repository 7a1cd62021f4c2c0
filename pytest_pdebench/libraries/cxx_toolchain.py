"""Compiling C++ submissions against deal.II: flags, a precompiled header, a binary cache.

Everything here lives in one per-machine folder outside the repository, keyed by the
deal.II and compiler versions (``~/.cache/pytest-pdebench/dealii-<v>-gcc-<v>/``, or
``$PDEBENCH_CACHE``):

* ``toolchain.json``: the compile and link lines CMake produces for a Release target
  of deal.II (``deal_ii_setup_target``), probed once. A bare ``-ldeal.ii`` does not
  link on Debian; CMake's line is the authority. ``-g`` is dropped: debug info only
  costs compile time here.
* ``pch/pdebench_dealii.h(.gch)``: the common deal.II headers, precompiled once for
  the same flags (a PCH is only used by g++ if the flags match, -O level included).
  Submissions are compiled with ``-include`` of it; their own ``#include``s of the same
  headers are then no-ops. A submission that does not compile with the PCH is retried
  without it, so the PCH can never turn a valid program into a compile error.
* ``bin/<key>``: executables by a hash of (sources, flags, compiler, deal.II). The same
  source for many cases (a family solver) or a re-run compiles once. This is the
  harness's own cache rather than ccache: it needs no writable shared directory inside
  the sandbox (so one submission cannot plant objects for another) and also skips linking.

The PCH and the probe are built by the harness from its own fixed inputs; submissions
are compiled inside the sandbox like runs (no network, read-only system).

In the deal.II container image the flags and the PCH are made when the image is built
(``python3 cxx_toolchain.py --prepare DIR``: this file runs on its own there, standard
library only), and the binary cache is on the host, keyed by the image.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

DEALII_CMAKE_DIR = Path("/usr/share/cmake/deal.II")
COMPILE_TIMEOUT_SEC = 300.0
KEPT_BINARIES = 512  # the binary cache keeps the most recently stored executables
CXX_SOURCE_SUFFIXES = (".cpp", ".cc")

# headers almost every deal.II solver includes: kept in the precompiled header
PCH_HEADERS = """
base/function.h base/function_parser.h base/point.h base/quadrature_lib.h base/tensor.h
base/timer.h base/utilities.h base/mpi.h
lac/affine_constraints.h lac/dynamic_sparsity_pattern.h lac/full_matrix.h lac/precondition.h
lac/solver_cg.h lac/solver_gmres.h lac/solver_control.h lac/sparse_direct.h lac/sparse_matrix.h
lac/sparsity_pattern.h lac/vector.h lac/block_vector.h lac/block_sparse_matrix.h
grid/grid_generator.h grid/grid_in.h grid/grid_tools.h grid/manifold_lib.h grid/tria.h
dofs/dof_handler.h dofs/dof_renumbering.h dofs/dof_tools.h
fe/fe_q.h fe/fe_system.h fe/fe_values.h fe/mapping_q.h fe/mapping_q1.h
numerics/data_out.h numerics/matrix_tools.h numerics/vector_tools.h numerics/fe_field_function.h
""".split()


class ToolchainError(RuntimeError):
    """The deal.II toolchain is missing or broken (not the submission's fault)."""


def dealii_version() -> str | None:
    path = DEALII_CMAKE_DIR / "deal.IIConfigVersion.cmake"
    if not path.is_file():
        return None
    found = re.search(r'PACKAGE_VERSION\s+"([0-9.]+)"', path.read_text())
    return found.group(1) if found else None


def compiler_version() -> str | None:
    cxx = shutil.which("c++") or shutil.which("g++")
    if not cxx:
        return None
    done = subprocess.run([cxx, "-dumpfullversion"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


@contextmanager
def _locked(path: Path):
    """An exclusive lock across processes (xdist workers build the PCH only once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Toolchain:
    directory: Path
    dealii: str
    compiler: str
    compile_flags: tuple[str, ...]  # defines, includes, options (no source, no output)
    link_flags: tuple[str, ...]  # after the sources: rpath and libraries
    binaries: Path | None = None  # the binary cache (default: directory/bin)
    prebuilt_pch: bool | None = None  # an image's toolchain: whether its PCH was built with it

    @property
    def binary_folder(self) -> Path:
        return self.binaries or self.directory / "bin"

    @property
    def pch_header(self) -> Path:
        return self.directory / "pch" / "pdebench_dealii.h"

    def compile_command(self, sources: list[str], output: str, use_pch: bool) -> list[str]:
        pch = ["-include", str(self.pch_header), "-Winvalid-pch"] if use_pch else []
        return ["c++", *self.compile_flags, *pch, *sources, "-o", output, *self.link_flags]

    def binary_key(self, files: dict[str, bytes]) -> str:
        digest = hashlib.sha256(json.dumps([self.dealii, self.compiler, self.compile_flags, self.link_flags]).encode())
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + files[name] + b"\0")
        return digest.hexdigest()[:24]

    def cached_binary(self, key: str) -> Path | None:
        path = self.binary_folder / key
        return path if path.is_file() else None

    def store_binary(self, key: str, executable: Path) -> None:
        target = self.binary_folder / key
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{key}.{os.getpid()}")
        shutil.copy2(executable, tmp)
        os.replace(tmp, target)
        stored = sorted(target.parent.iterdir(), key=lambda path: path.stat().st_mtime)
        for old in stored[:-KEPT_BINARIES]:
            old.unlink(missing_ok=True)

    def ensure_pch(self) -> bool:
        """Build the precompiled header once per machine; False if it cannot be built."""
        if self.prebuilt_pch is not None:
            return self.prebuilt_pch
        gch = self.pch_header.with_suffix(".h.gch")
        failed = self.pch_header.with_suffix(".failed")
        with _locked(self.directory / "pch.lock"):
            if gch.is_file():
                return True
            if failed.is_file():
                return False
            self.pch_header.parent.mkdir(parents=True, exist_ok=True)
            self.pch_header.write_text("".join(f"#include <deal.II/{h}>\n" for h in PCH_HEADERS))
            tmp = gch.with_name(f".{gch.name}.{os.getpid()}")
            command = ["c++", *self.compile_flags, "-x", "c++-header", str(self.pch_header), "-o", str(tmp)]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                failed.write_text(done.stderr[-4000:])
                tmp.unlink(missing_ok=True)
                return False
            os.replace(tmp, gch)
            return True


def _probe_flags(directory: Path) -> tuple[list[str], list[str]]:
    """Let CMake write the compile and link lines of a Release deal.II target."""
    with tempfile.TemporaryDirectory(prefix="pdebench-cmake-") as tmp:
        src = Path(tmp)
        (src / "probe.cpp").write_text("int main() { return 0; }\n")
        (src / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.13)\n"
            f"find_package(deal.II 9.4 REQUIRED HINTS {DEALII_CMAKE_DIR})\n"
            "deal_ii_initialize_cached_variables()\nproject(probe CXX)\n"
            "add_executable(probe probe.cpp)\ndeal_ii_setup_target(probe)\n")
        done = subprocess.run(["cmake", "-S", str(src), "-B", str(src / "build"), "-DCMAKE_BUILD_TYPE=Release",
                               "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"], capture_output=True, text=True)
        if done.returncode != 0:
            raise ToolchainError("cmake could not configure a deal.II target:\n" + done.stderr[-2000:])
        compile_line = json.loads((src / "build" / "compile_commands.json").read_text())[0]["command"]
        link_line = (src / "build" / "CMakeFiles" / "probe.dir" / "link.txt").read_text()
    words = shlex.split(compile_line)[1:]
    compile_flags, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        if word in ("-o", "-c"):
            skip = True  # drop the object and the source
        elif word == "-g" or word.startswith("-ffile-prefix-map"):
            continue
        else:
            compile_flags.append(word)
    link_words = shlex.split(link_line)[1:]
    output_at = link_words.index("-o")
    # before -o: linker options; after "-o probe": libraries; the object file is dropped
    link_flags = [w for w in link_words[:output_at] if not w.endswith(".o")] + link_words[output_at + 2:]
    return compile_flags, link_flags


def _prepared(directory: Path) -> Toolchain:
    """Probe the flags into directory/toolchain.json once; raises ToolchainError."""
    dealii, compiler = dealii_version(), compiler_version()
    if not dealii:
        raise ToolchainError(f"deal.II is not installed (no {DEALII_CMAKE_DIR})")
    if not compiler:
        raise ToolchainError("no C++ compiler (c++/g++) on PATH")
    if not shutil.which("cmake"):
        raise ToolchainError("cmake is not installed")
    path = directory / "toolchain.json"
    with _locked(directory / "toolchain.lock"):
        if not path.is_file():
            compile_flags, link_flags = _probe_flags(directory)
            path.write_text(json.dumps({"compile": compile_flags, "link": link_flags, "dealii": dealii,
                                        "compiler": compiler}, indent=1))
    data = json.loads(path.read_text())
    return Toolchain(directory, dealii, compiler, tuple(data["compile"]), tuple(data["link"]))


@functools.lru_cache(maxsize=1)
def load_toolchain() -> Toolchain:
    """The machine's deal.II toolchain, probed on first use (once per process: it asks the
    compiler for its version); raises ToolchainError."""
    from . import cache_root

    dealii, compiler = dealii_version(), compiler_version()
    return _prepared(cache_root() / f"dealii-{dealii}-gcc-{compiler}")


def image_toolchain(data: dict, directory: str, binaries: Path) -> Toolchain:
    """The toolchain an image was built with (its toolchain.json), its binaries kept on the host."""
    return Toolchain(Path(directory), data["dealii"], data["compiler"], tuple(data["compile"]), tuple(data["link"]),
                     binaries=binaries, prebuilt_pch=bool(data.get("pch")))


def first_errors(stderr: str, count: int = 3) -> str:
    """The compiler's first error lines (with file:line), for an F-Exec reason."""
    lines = [line.strip() for line in stderr.splitlines()]
    errors = [line for line in lines if re.search(r"\b(error|fatal error)\b:", line)]
    chosen = errors[:count] or [line for line in lines if line][-count:]
    return " | ".join(line[:300] for line in chosen)


def _prepare_image_toolchain(directory: Path) -> None:
    """At image build time: the flags, the PCH and whether it built, into directory."""
    toolchain = _prepared(directory)
    path = directory / "toolchain.json"
    data = json.loads(path.read_text())
    data["pch"] = toolchain.ensure_pch()
    path.write_text(json.dumps(data, indent=1))
    print(f"deal.II {toolchain.dealii}, g++ {toolchain.compiler}, PCH {'built' if data['pch'] else 'FAILED'}")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] != ["--prepare"] or len(sys.argv) != 3:
        raise SystemExit("usage: python3 cxx_toolchain.py --prepare DIRECTORY")
    _prepare_image_toolchain(Path(sys.argv[2]))
