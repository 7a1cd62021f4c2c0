"""Issue 50: what a pytest session costs per item outside the solver's timed windows, for a
trivial DOLFINx item (a numpy solver), as a user runs it: ``pytest --pde-submissions``.

    .venv/bin/python benchmarks/session_overhead.py [--items 40] [--jobs 1] [--runner warm]
                                                    [--solver numpy|dolfinx] [--profile FILE]

The items: ``--items`` copies of the test suite's ``poisson_basic`` (pytest_pdebench/data/smoke, its
references linked), each under its own id, on the DOLFINx track, default runs (one gated and
three timed), bubblewrap. The solver writes the manufactured field at once (``numpy``), or does
the same after ``import dolfinx`` (``dolfinx``: the track's start-up is then the harness's as for
any FEM solver). Accuracy and time multipliers are opened wide (the field leaves the case's
solve-only part out): every item reaches its timed runs and PASSes.

Prints the session's wall time, and per item (from the JSON report) the time pytest gave the
item (set-up, call, teardown) and what of it lay outside the solver's windows (the gated run's
and the timed runs'), medians; the session's wall over the items. ``--profile FILE`` runs the
session under cProfile (one worker) and prints the package's and the sandbox's heaviest calls.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from item_path import TOY  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "pytest_pdebench" / "data" / "smoke"

SOLVERS = {"numpy": TOY}  # the toy numpy solver of item_path.py
SOLVERS["dolfinx"] = "import dolfinx  # noqa: F401  (the track's start-up, as a FEM solver's)\n" + SOLVERS["numpy"]


def build(folder: Path, items: int, solver: str) -> Path:
    """The cases file (``items`` copies of poisson_basic) and the solver folder, in ``folder``."""
    record = next(json.loads(line) for line in (CASES / "starter.jsonl").read_text().splitlines()
                  if line.strip() and json.loads(line)["id"] == "poisson_basic")
    cases = folder / "cases"
    cases.mkdir()
    (cases / "references").symlink_to(CASES / "references")
    with (cases / "copies.jsonl").open("w") as out:
        for number in range(items):
            out.write(json.dumps({**record, "id": f"poisson_basic_{number:03d}"}) + "\n")
    solvers = folder / "solvers" / "dolfinx"
    solvers.mkdir(parents=True)
    (solvers / "poisson.py").write_text(SOLVERS[solver])
    return cases / "copies.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--runner", default="warm", choices=["warm", "cold"])
    parser.add_argument("--solver", default="numpy", choices=sorted(SOLVERS))
    parser.add_argument("--profile", type=Path, metavar="FILE", help="cProfile the session (one worker) into FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="session-overhead-") as tmp:
        folder = Path(tmp)
        cases = build(folder, args.items, args.solver)
        report = folder / "report.json"
        command = ["-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
                   "--pde-library=dolfinx", f"--pde-cases={cases}", f"--pde-submissions={folder / 'solvers'}",
                   "--pde-baseline=stored", f"--pde-runner={args.runner}", "--pde-alpha-acc=1e6",
                   "--pde-tau-max=1", "--pde-alpha-time=1e3", f"--pde-output={folder / 'runs'}",
                   "--json-report", f"--json-report-file={report}"]
        if args.jobs > 1 and not args.profile:
            command += ["-n", str(args.jobs)]
        prefix = [sys.executable]
        if args.profile:
            prefix += ["-m", "cProfile", "-o", str(args.profile)]
        started = time.perf_counter()
        done = subprocess.run(prefix + command, cwd=folder, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if not report.exists():
            print(done.stdout[-3000:], done.stderr[-3000:])
            return 1
        tests = json.loads(report.read_text())["tests"]
    given, outside, outcomes = [], [], {}
    for test in tests:
        verdict = test.get("metadata", {}).get("pde", {})
        outcome = verdict.get("outcome", test["outcome"])
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        seconds = sum(test.get(phase, {}).get("duration", 0.0) for phase in ("setup", "call", "teardown"))
        windows = (verdict.get("t_first_run") or 0.0) + sum(verdict.get("timed_runs") or [])
        given.append(seconds)
        outside.append(seconds - windows)
    print(f"{len(tests)} items ({outcomes}), {args.solver} solver, runner {args.runner}, -n {args.jobs}: "
          f"session wall {wall:.2f} s, {1000 * wall / len(tests):.0f} ms an item")
    print(f"per item (median): pytest's time {1000 * statistics.median(given):.0f} ms, "
          f"outside the solver's windows {1000 * statistics.median(outside):.0f} ms "
          f"(p90 {1000 * sorted(outside)[int(0.9 * (len(outside) - 1))]:.0f} ms)")
    if args.profile:
        stats = pstats.Stats(str(args.profile))
        stats.sort_stats("cumulative").print_stats(r"pytest_pdebench|_pytest/runner|xdist|json_report", 45)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
