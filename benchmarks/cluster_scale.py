"""Many trivial items through `pytest --pde-cluster`: does the controller keep up, and does
its memory stay flat? Prints figures; asserts nothing.

    .venv/bin/python benchmarks/cluster_scale.py [--items 10000] [--workers 2] [--cluster ADDRESS]

Writes ``--items`` copies of the toy Poisson case (ids item_00000, ...), one exact numpy
solver for all, and a calibration for every copy under this machine's key, into a scratch
folder; starts a scheduler and ``--workers`` one-thread workers on loopback (unless
``--cluster``); runs pytest over them with ``--pde-runs=1`` and a JSON report, sampling
the pytest process's resident memory every second. Prints wall time, items per second,
the controller's peak and final resident memory, and the outcome counts.
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

from harness_overhead import EXACT_SOLVER  # beside this script (Python puts its folder on sys.path)

from pytest_pdebench.bundled import SMOKE_CASES
from pytest_pdebench.machine import machine_key
from pytest_pdebench.testing.loopback import scheduler_address

REPO = Path(__file__).resolve().parent.parent


def write_inputs(folder: Path, count: int) -> None:
    from pytest_pdebench.cases import parse_record
    from pytest_pdebench.fingerprints import case_fingerprint

    data = next(json.loads(line) for path in sorted(SMOKE_CASES.glob("*.jsonl"))
                for line in path.read_text().splitlines() if '"poisson_basic"' in line)
    lines, entries = [], {}
    for index in range(count):
        data["id"] = f"item_{index:05d}"
        record = parse_record(data, folder / "cases.jsonl", index + 1)
        lines.append(json.dumps(data))
        entries[record.id] = {"e_base": 1e-4, "t_base": 5.0, "fingerprint": case_fingerprint(record, "dolfinx")}
    (folder / "cases.jsonl").write_text("\n".join(lines) + "\n")
    calibrations = folder / "calibrations" / "dolfinx"
    calibrations.mkdir(parents=True)
    (calibrations / f"{machine_key()}.json").write_text(json.dumps({"cases": entries}))
    (folder / "solvers" / "dolfinx").mkdir(parents=True)
    (folder / "solvers" / "dolfinx" / "solver.py").write_bytes(EXACT_SOLVER)


def resident_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cluster", help="a running scheduler (tcp://HOST:PORT or a scheduler file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_inputs(folder, args.items)
        with scheduler_address(args.cluster, folder / "dask", args.workers) as address:
            run(folder, args, address)


def run(folder: Path, args, address: str) -> None:
    report = folder / "report.json"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--pde-library=dolfinx",
            f"--pde-cases={folder / 'cases.jsonl'}", f"--pde-submissions={folder / 'solvers'}",
            f"--pde-calibrations={folder / 'calibrations'}", f"--pde-output={folder / 'out'}", "--pde-runs=1",
            f"--pde-cluster={address}", "--json-report", f"--json-report-file={report}"]
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples = []
    verdicts = folder / "out" / "dolfinx"
    while process.poll() is None:
        memory = resident_mb(process.pid)
        if memory is not None:
            samples.append((time.perf_counter() - start, memory))
            if len(samples) % 60 == 0:  # progress a person can follow (and a partial figure if cut short)
                done = sum(1 for _ in verdicts.glob("*/verdict.json")) if verdicts.is_dir() else 0
                print(f"{samples[-1][0]:7.0f} s: {done} items done, controller {memory:.0f} MB", flush=True)
        time.sleep(1)
    wall = time.perf_counter() - start
    tests = json.loads(report.read_text())["tests"] if report.exists() else []
    outcomes = Counter((t.get("metadata") or {}).get("pde", {}).get("outcome", t["outcome"]) for t in tests)
    tenth = [memory for moment, memory in samples if moment <= wall / 10]
    print(json.dumps({
        "items": args.items, "workers": args.workers, "exit_code": process.returncode,
        "wall_sec": round(wall, 1), "items_per_sec": round(len(tests) / wall, 2),
        "controller_rss_mb": {"peak": round(max(m for _, m in samples), 1),
                              "after_a_tenth": round(max(tenth), 1) if tenth else None,
                              "last": round(samples[-1][1], 1)},
        "outcomes": dict(outcomes), "stderr_tail": process.stderr.read().decode(errors="replace")[-500:],
    }, indent=1))


if __name__ == "__main__":
    main()
