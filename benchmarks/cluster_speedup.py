"""Does a second worker double the throughput? The DOLFINx oracle on the quickest item of
each family (benchmarks/backend_ratio.py's sample) through `--pde-cluster` on a loopback
scheduler with one worker, then two, against the committed calibration. Issue 19's target
on this 2-core machine: about 2x. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/cluster_speedup.py [--workers 1,2] [--repeat 2]
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from backend_ratio import ITEMS  # noqa: E402
from pytest_pdebench.cluster import LoopbackCluster  # noqa: E402


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
    parser.add_argument("--repeat", type=int, default=2, help="copies of the sample (more items, steadier figure)")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    walls = {}
    for workers in counts:
        with tempfile.TemporaryDirectory() as folder:
            cluster = LoopbackCluster(Path(folder) / "cluster", workers=workers)  # started outside the clock
            total, outcomes = 0.0, Counter()
            try:
                for copy in range(args.repeat):  # -k selects each case once: the sample again, a new run
                    wall, got = timed_run(cluster.address, Path(folder) / str(copy), ITEMS)
                    total, outcomes = total + wall, outcomes + got
            finally:
                cluster.stop()
        walls[workers] = total
        print(f"{workers} worker(s): {len(ITEMS) * args.repeat} items in {total:.1f} s, {dict(outcomes)}", flush=True)
    base = walls[counts[0]]
    for workers in counts[1:]:
        print(f"{workers} workers against {counts[0]}: {base / walls[workers]:.2f} x the throughput")


if __name__ == "__main__":
    main()
