"""What a Dask cluster adds per item (--pde-cluster): scheduling and transfer on top of
the worker's own execution (build, gated run, timed runs). Prints figures; asserts nothing.

    .venv/bin/python benchmarks/cluster_overhead.py [--items 40] [--workers 2] [--cluster ADDRESS]

Without ``--cluster`` it starts a scheduler and ``--workers`` one-thread workers on
loopback (`dask scheduler` / `dask worker` processes). Two passes over the same trivial
DOLFINx items (an exact numpy solver, one timed run):

- one at a time: the controller's wait for each result minus the worker's execution
  (``Execution.site_sec``): the scheduler's and the transfer's cost per item;
- all sent ahead, as `pytest --pde-cluster` does for a folder of solvers: wall time
  against the sum of the workers' execution time divided by the workers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

from harness_overhead import EXACT_SOLVER  # beside this script (Python puts its folder on sys.path)

from pytest_pdebench.baselines import Calibrating
from pytest_pdebench.bundled import SMOKE_CASES
from pytest_pdebench.cases import load_cases
from pytest_pdebench.cluster.controller import Cluster
from pytest_pdebench.evaluation import run_task
from pytest_pdebench.fingerprints import case_fingerprint
from pytest_pdebench.plan import ItemPlan
from pytest_pdebench.settings import Settings
from pytest_pdebench.sources import Submission
from pytest_pdebench.speed import probe_seconds
from pytest_pdebench.testing.loopback import scheduler_address

REPO = Path(__file__).resolve().parent.parent


def tasks(count: int) -> list:
    record = next(r for _, _, r in load_cases(SMOKE_CASES) if r.id == "poisson_basic")
    submission = Submission("solver.py", {"solver.py": EXACT_SOLVER}, "benchmark")
    plan = ItemPlan(record, "dolfinx", None, Path("."), case_fingerprint(record, "dolfinx"), Calibrating())
    task = run_task(plan, submission, Settings(output_dir=Path("."), runs=1))
    # the same item under distinct ids: the scheduler sees count different tasks
    return [dataclasses.replace(task, case_id=f"{record.id}-{index}") for index in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cluster", help="a running scheduler (tcp://HOST:PORT or a scheduler file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with scheduler_address(args.cluster, Path(tmp) / "dask", args.workers) as address:
            measure(args, address)


def measure(args, address: str) -> None:
    cluster = Cluster(address, ["dolfinx"], "bubblewrap", {})
    try:
        machine, = cluster.machines()
        run = cluster.executor(machine)
        warmup = tasks(len(cluster.workers) * 2)
        for task in warmup:  # each worker's zygote imports the track once: not what is measured
            run.send(task)
        for task in warmup:
            run(task, Path("."), None)
        overheads, sites = [], []
        for task in tasks(args.items):
            start = time.perf_counter()
            done = run(task, Path("."), None)
            overheads.append(time.perf_counter() - start - done.site_sec)
            sites.append(done.site_sec)
        batch = tasks(args.items)
        start = time.perf_counter()
        for task in batch:
            run.send(task)
        results = [run(task, Path("."), None) for task in batch]
        wall = time.perf_counter() - start
        ideal = sum(done.site_sec for done in results) / len(cluster.workers)
        figures = {
            "workers": len(cluster.workers), "items": args.items, "speed_probe_sec": round(probe_seconds(), 4),
            "one_at_a_time": {"overhead_ms_median": round(1000 * statistics.median(overheads), 1),
                              "overhead_ms_p95": round(1000 * sorted(overheads)[int(0.95 * len(overheads))], 1),
                              "site_sec_median": round(statistics.median(sites), 3)},
            "sent_ahead": {"wall_sec": round(wall, 2), "sum_site_sec_over_workers": round(ideal, 2),
                           "wall_over_ideal": round(wall / ideal, 3),
                           "workers_used": sorted({done.worker for done in results})},
        }
        print(json.dumps(figures, indent=1))
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
