"""pytest's start where the plugin is installed (issue 49's target: at most 50 ms over
``-p no:pdebench``; ``pdebench --help`` under 0.3 s). Runs, interleaved, a one-test project's
``pytest -q`` and ``pytest --help`` with the plugin and without it, and ``pdebench --help``;
prints the medians and the differences. Prints figures; asserts nothing. Python writes and
reads its bytecode caches here as on a user's machine (PYTHONDONTWRITEBYTECODE, set in some
shells and CI images, is left out: every import would compile from source), after one
warm-up of each command.

    .venv/bin/python benchmarks/start_cost.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = {
    "pytest -q (one test)": ["-m", "pytest", "-q", "-p", "no:cacheprovider"],
    "pytest --help": ["-m", "pytest", "--help"],
}


ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def seconds(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, capture_output=True, check=True, env=ENV)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    cli = str(Path(sys.executable).with_name("pdebench"))
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "test_one.py").write_text("def test_one():\n    assert True\n")
        times: dict[str, list[float]] = {}
        for argv in CASES.values():  # warm-up: the bytecode caches written
            for extra in ([], ["-p", "no:pdebench"]):
                seconds([sys.executable, *argv, *extra], project)
        seconds([cli, "--help"], project)
        for _ in range(args.repeats):  # interleaved: a load that comes and goes hits both sides alike
            for name, argv in CASES.items():
                times.setdefault(f"{name} with the plugin", []).append(seconds([sys.executable, *argv], project))
                times.setdefault(f"{name} without", []).append(
                    seconds([sys.executable, *argv, "-p", "no:pdebench"], project)
                )
            times.setdefault("pdebench --help", []).append(seconds([cli, "--help"], project))
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        print(f"{name:40s} {value * 1000:7.0f} ms (median of {args.repeats})")
    for name in CASES:
        extra = median[f"{name} with the plugin"] - median[f"{name} without"]
        print(f"{name}: the plugin adds {extra * 1000:.0f} ms (target: at most 50)")
    print(f"pdebench --help: {median['pdebench --help']:.2f} s (target: under 0.3)")


if __name__ == "__main__":
    main()
