"""What the kernel store costs per run: making a run's cache folder (one link per stored
kernel) and harvesting what the gated run compiled (checks and copies).

    python benchmarks/kernel_cache_cost.py [--kernels 12 200 2000]

Kernels are copies of one real shared library (compiled here with cc), named as FFCx
names them; the figures are medians over repeats, in milliseconds.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from pytest_pdebench.kernel_cache import KernelCache
from pytest_pdebench.libraries.dolfinx import DolfinxTrack
from pytest_pdebench.run_folders import Scratch, freeze_tree


def fill_run_cache(folder: Path, library: bytes, count: int, salt: str) -> None:
    (folder / "fenics").mkdir(parents=True, exist_ok=True)
    for index in range(count):
        module = folder / "fenics" / f"libffcx_forms_{salt}{index:038x}"  # 40 hex digits, as FFCx
        module.with_name(module.name + ".cpython-312-x86_64-linux-gnu.so").write_bytes(library)
        module.with_name(module.name + ".c").write_text("/* generated */\n" * 2000)
        module.with_name(module.name + ".c.cached").write_text("build log\n")


def measure(count: int, library: bytes, repeats: int) -> tuple[float, float]:
    prepare, harvest = [], []
    for _repeat in range(repeats):
        root = Path(tempfile.mkdtemp())
        seed = root / "seed"
        fill_run_cache(seed, library, count, "aa")  # the store holds `count` modules (no per-run cap)
        KernelCache(root / "store", DolfinxTrack.kernel_rules, max_files=10 ** 6, max_bytes=1 << 40).harvest(seed)
        cache = KernelCache(root / "store", DolfinxTrack.kernel_rules)
        started = time.perf_counter()
        scratch = Scratch()  # tmpfs where there is one, as in evaluation
        run = scratch.path / "cache"
        cache.prepare(run, "/sandbox/kernels")
        freeze_tree(run)  # as every run's cache folder is
        prepare.append(time.perf_counter() - started)
        fill_run_cache(run, library, 6, "bb")  # a gated run compiles 6 new modules
        started = time.perf_counter()
        cache.harvest(run)
        harvest.append(time.perf_counter() - started)
        scratch.remove()
        shutil.rmtree(root)
    return statistics.median(prepare) * 1e3, statistics.median(harvest) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, nargs="+", default=[12, 200, 2000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as build:
        source = Path(build) / "k.c"
        source.write_text("double kernel(double x) { return 2 * x; }\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", f"{build}/k.so", str(source)], check=True)
        library = Path(f"{build}/k.so").read_bytes()
    print(f"{'modules in store':>18}  {'prepare a run [ms]':>18}  {'harvest 6 new [ms]':>18}")
    for count in args.kernels:
        prepare, harvest = measure(count, library, args.repeats)
        print(f"{count:>18}  {prepare:>18.2f}  {harvest:>18.2f}")


if __name__ == "__main__":
    main()
