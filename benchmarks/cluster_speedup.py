"""Does a second worker double the throughput? The DOLFINx oracle on a sample of the track
through `--pde-cluster` on a loopback scheduler with one worker, then two, against the
committed calibration, one pytest session each. A session's own cost (start, collection of
every record, connecting to the scheduler, writing the reports) does not shrink with workers, so it
is measured apart (the same session selecting nothing) and the throughput is also given
without it. Issue 19's target on this 2-core machine: about 2x. Prints figures; asserts
nothing.

    .venv/bin/python benchmarks/cluster_speedup.py [--workers 1,2] [--sample 40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from pytest_pdebench.testing.loopback import LoopbackCluster

REPO = Path(__file__).resolve().parent.parent

QUICK_ENOUGH_SEC = 4.0  # items whose baseline is longer leave one worker alone at the end


def spread_sample(size: int) -> list[str]:
    """Every k-th DOLFINx record (file order mixes families) whose baseline is under
    QUICK_ENOUGH_SEC: size items of the costs a run of the track is made of."""
    eligible = []
    for line in (REPO / "cases" / "suite.jsonl").read_text().splitlines():
        record = json.loads(line)
        baseline = record["evaluation_metadata"].get("thresholds", {}).get("dolfinx", {}).get("t_base")
        if baseline is not None and baseline < QUICK_ENOUGH_SEC:
            eligible.append(record["id"])
    step = max(1, len(eligible) // size)
    return eligible[::step][:size]


def timed_run(address: str, folder: Path, items: list[str]) -> tuple[float, Counter]:
    """Wall time of one pytest run over items (collection included), and its outcomes."""
    folder.mkdir(parents=True, exist_ok=True)
    report = folder / "report.json"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pde-library=dolfinx",
                    f"--pde-submissions={REPO / 'submissions' / 'oracle'}", f"--pde-output={folder / 'runs'}",
                    f"--pde-cluster={address}", "-k", " or ".join(items),
                    "--json-report", f"--json-report-file={report}"], cwd=REPO, capture_output=True)
    wall = time.perf_counter() - started
    tests = json.loads(report.read_text())["tests"]
    return wall, Counter(t["metadata"]["pde"]["outcome"] for t in tests if "pde" in t.get("metadata", {}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--sample", type=int, default=40, help="items, spread over the track")
    args = parser.parse_args()
    counts, items = [int(n) for n in args.workers.split(",")], spread_sample(args.sample)
    walls, items_only = {}, {}
    for workers in counts:
        with tempfile.TemporaryDirectory() as folder:
            cluster = LoopbackCluster(Path(folder) / "cluster", workers=workers)  # started outside the clock
            try:
                session, _ = timed_run(cluster.address, Path(folder) / "empty", ["no_such_case"])
                wall, outcomes = timed_run(cluster.address, Path(folder) / "sample", items)
            finally:
                cluster.stop()
        walls[workers], items_only[workers] = wall, wall - session
        print(f"{workers} worker(s): {len(items)} items in {wall:.1f} s, {dict(outcomes)}; a session selecting "
              f"nothing {session:.1f} s, so {wall - session:.1f} s for the items", flush=True)
    for workers in counts[1:]:
        print(f"{workers} workers against {counts[0]}: {walls[counts[0]] / walls[workers]:.2f} x the throughput "
              f"({items_only[counts[0]] / items_only[workers]:.2f} x without the session's own cost)")


if __name__ == "__main__":
    main()
