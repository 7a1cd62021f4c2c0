"""Compile time of deal.II submissions, as the harness compiles them (inside the
bubblewrap sandbox, CMake's Release flags), with and without the precompiled header,
and what the binary cache makes of a repeat. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/dealii_compile.py [--repeats 3]

Programs: the three deal.II oracle programs (scalar families, vector families,
biharmonic), the guide's program and a minimal program that includes one deal.II header.
Run it on a quiet machine: compile times are CPU-bound.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from pytest_pdebench.libraries import detect_runtime, get_track
from pytest_pdebench.libraries.cxx_toolchain import COMPILE_TIMEOUT_SEC, load_toolchain
from pytest_pdebench.libraries.dealii import host_toolchain
from pytest_pdebench.sandbox import Limits, RunRequest, get_backend

REPO = Path(__file__).resolve().parent.parent

ORACLE = REPO / "submissions" / "oracle" / "dealii"
MINIMAL = "#include <deal.II/base/point.h>\nint main() { dealii::Point<2> p(1, 2); return p.norm() > 0 ? 0 : 1; }\n"


def programs() -> dict[str, dict[str, bytes]]:
    helpers = {p.name: p.read_bytes() for p in ORACLE.glob("_*.h")}
    guide = "\n".join(re.findall(r"^```cpp\n(.*?)^```", (REPO / "guides" / "DEALII_GUIDE.md").read_text(),
                                 re.S | re.M))
    return {
        "oracle: scalar families (poisson.cpp)": {"solver.cpp": (ORACLE / "poisson.cpp").read_bytes(), **helpers},
        "oracle: vector families (stokes.cpp)": {"solver.cpp": (ORACLE / "stokes.cpp").read_bytes(), **helpers},
        "oracle: biharmonic.cpp": {"solver.cpp": (ORACLE / "biharmonic.cpp").read_bytes(), **helpers},
        "DEALII_GUIDE.md program": {"solver.cpp": guide.encode()},
        "one deal.II header": {"solver.cpp": MINIMAL.encode()},
    }


def compile_once(files: dict[str, bytes], use_pch: bool) -> float:
    toolchain, runtime = host_toolchain(), detect_runtime("dealii")
    track, backend = get_track("dealii"), get_backend("bubblewrap")
    with tempfile.TemporaryDirectory(prefix="pdebench-compile-") as tmp:
        build = Path(tmp)
        for name, content in files.items():
            (build / name).write_bytes(content)
        request = RunRequest(toolchain.compile_command(["solver.cpp"], "solver", use_pch), build, build,
                             track.sandbox_env(), [Path(p) for p in runtime.read_only],
                             Limits(timeout_sec=COMPILE_TIMEOUT_SEC, memory_mb=8192))
        started = time.perf_counter()
        result = backend.run(request)
        elapsed = time.perf_counter() - started
        if result.returncode != 0:
            raise SystemExit(f"compile failed: {result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    toolchain = host_toolchain()
    gch = toolchain.pch_header.with_suffix(".h.gch")
    fresh, started = not gch.exists(), time.perf_counter()
    toolchain.ensure_pch()
    print(f"deal.II {toolchain.dealii}, g++ {toolchain.compiler}; precompiled header {gch.stat().st_size / 1e6:.0f} MB"
          + (f", built now in {time.perf_counter() - started:.1f} s" if fresh else ""))
    print(f"{'program':42s} {'with PCH (s)':>14s} {'without (s)':>12s} {'speed-up':>9s}")
    with_all, without_all = [], []
    for name, files in programs().items():
        with_pch = [compile_once(files, True) for _ in range(args.repeats)]
        without = [compile_once(files, False) for _ in range(args.repeats)]
        with_all.append(statistics.median(with_pch))
        without_all.append(statistics.median(without))
        print(f"{name:42s} {statistics.median(with_pch):14.1f} {statistics.median(without):12.1f} "
              f"{statistics.median(without) / statistics.median(with_pch):8.1f}x")
    print(f"{'median over programs':42s} {statistics.median(with_all):14.1f} {statistics.median(without_all):12.1f}")
    # a repeat of the same source: the harness copies the cached executable
    files = programs()["oracle: scalar families (poisson.cpp)"]
    key = toolchain.binary_key(files)
    cached = toolchain.cached_binary(key)
    if cached:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            shutil.copy2(cached, Path(tmp) / "solver")
            print(f"repeat of a cached source (binary cache hit): {time.perf_counter() - started:.3f} s")
    else:
        print("repeat of a cached source: not in the binary cache yet (run the oracle once)")
    link_times(files, toolchain, args.repeats)


def link_times(files: dict[str, bytes], toolchain, repeats: int) -> None:
    """Linking alone, one object, CMake's linker against the one the harness uses."""
    cmake = load_toolchain()
    linkers = {"CMake's (" + _linker(cmake) + ")": cmake.link_flags, "the harness's (" + _linker(toolchain) + ")":
               toolchain.link_flags}
    with tempfile.TemporaryDirectory(prefix="pdebench-link-") as tmp:
        for name, content in files.items():
            (Path(tmp) / name).write_bytes(content)
        pch = ["-include", str(toolchain.pch_header)]
        compile_command = ["c++", *toolchain.compile_flags, *pch, "-c", "solver.cpp", "-o", "solver.o"]
        subprocess.run(compile_command, cwd=tmp, check=True)
        for label, flags in linkers.items():
            times = []
            for _ in range(max(repeats, 3)):
                started = time.perf_counter()
                subprocess.run(["c++", "solver.o", "-o", "solver", *flags], cwd=tmp, check=True)
                times.append(time.perf_counter() - started)
            print(f"link of poisson.cpp's object with {label}: {statistics.median(times):.2f} s")


def _linker(toolchain) -> str:
    return next((flag.split("=", 1)[1] for flag in toolchain.link_flags if flag.startswith("-fuse-ld=")), "ld")


if __name__ == "__main__":
    main()
