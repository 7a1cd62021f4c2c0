"""Collecting the whole suite: pytest's own "collected in" figure and the process's wall
time and peak memory, for the bundled cases on every track. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/collection.py [--repeats 3] [--python PATH [--python PATH2 ...]]

``--python`` collects with another interpreter (a venv with the wheel installed, as a user's
is: ``pdebench`` and its dependencies, none of the checkout's test tools), from an empty
folder: the bundled suite, every track. Given more than once, the interpreters take turns
(round by round: the machine's drift between batches minutes apart is as large as the
differences measured), each with its median and quartiles. Without it, the checkout's venv
in the checkout.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def collect_once(python: str, folder: Path) -> tuple[int, float, float]:
    """(items, pytest's collection seconds, process wall seconds)."""
    # as a user's shell: bytecode written, so pytest keeps its rewritten plugin modules
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    done = subprocess.run([python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           f"--pde-submissions={REPO / 'submissions' / 'oracle'}",
                           "--pde-library=dolfinx,firedrake,dealii"],
                          cwd=folder, capture_output=True, text=True, check=True, env=env)
    wall = time.perf_counter() - started
    found = re.search(r"(\d+) tests? collected in ([\d.]+)s", done.stdout)
    return int(found.group(1)), float(found.group(2)), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python", action="append", help="another interpreter (a user's venv), from an empty folder")
    args = parser.parse_args()
    pythons = args.python or [sys.executable]
    figures: dict[str, list[tuple[int, float, float]]] = {python: [] for python in pythons}
    with tempfile.TemporaryDirectory() as empty:
        folder = Path(empty) if args.python else REPO
        for _ in range(args.repeats):
            for python in pythons:
                figures[python].append(collect_once(python, folder))
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    for python, rows in figures.items():
        walls = sorted(f[2] for f in rows)
        quartiles = statistics.quantiles(walls, n=4) if len(walls) > 1 else [walls[0]] * 3
        print(f"{python}: {rows[0][0]} items; collection {statistics.median(f[1] for f in rows):.2f} s "
              f"(pytest's figure, median of {args.repeats}); whole process {statistics.median(walls):.2f} s "
              f"(quartiles {quartiles[0]:.2f}-{quartiles[2]:.2f})")
    print(f"peak memory {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
