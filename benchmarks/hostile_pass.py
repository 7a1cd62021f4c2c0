"""Issue 48: can a submission inflate the baselines kept for later sessions? The baseline pass
(--pde-baseline=local) timed three times in one sitting, each with an empty store of kept
baselines of its own: a quiet session (the oracle's solvers as the submission), a hostile one
(every solver fills its scratch space, then streams memory until its run is killed, on both
workers), and a quiet one again (how far two quiet sessions minutes apart drift).

    .venv/bin/python benchmarks/hostile_pass.py [--library dolfinx] [--select 1] [--tag NAME]

Prints, per record and as median (range), the kept t_base of the hostile session and of the
second quiet one against the first quiet one's. Rows go to
``benchmarks/results/<library>-hostile-pass-<tag>.json``. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validity import git_revision, selected  # noqa: E402

from pytest_pdebench.machine import machine_key
from pytest_pdebench.testing import HOSTILE_NEIGHBOUR  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"


def hostile_folder(library: str, scratch: Path) -> Path:
    """A solver folder with the hostile solver for every family the oracle has one for."""
    folder = scratch / "hostile"
    (folder / library).mkdir(parents=True)
    for solver in (REPO / "submissions" / "oracle" / library).glob("[!_]*.py"):
        (folder / library / solver.name).write_text(HOSTILE_NEIGHBOUR)
    return folder


def kept_timings(store: Path, library: str) -> dict[str, float]:
    """case id -> the t_base the session kept."""
    files = list((store / library).glob("*.json"))
    entries = json.loads(files[0].read_text())["entries"] if files else {}
    return {name.split("|")[0]: entry["t_base"] for name, entry in entries.items()}


def session(name: str, library: str, submissions: Path, select: list[str], scratch: Path, timeout: int) -> dict:
    store = scratch / f"kept-{name}"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "-n", "2",
               f"--pde-library={library}", f"--pde-submissions={submissions}", "--pde-baseline=local",
               f"--pde-timeout={timeout}", f"--pde-output={scratch / name}", "-k", " or ".join(select)]
    print(f"{name}: the pass and {len(select)} items ...", flush=True)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PDEBENCH_BASELINES": str(store)})
    timings = kept_timings(store, library)
    print(f"  {time.perf_counter() - started:.0f} s, {len(timings)} kept; {done.stdout.strip().splitlines()[-1]}")
    return timings


def spread(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default="dolfinx")
    parser.add_argument("--select", type=int, default=1, metavar="N", help="N manufactured records per family")
    parser.add_argument("--timeout", type=int, default=20, help="--pde-timeout: how long each hostile run lasts")
    parser.add_argument("--tag", default=time.strftime("%Y-%m-%d"))
    args = parser.parse_args()
    chosen = selected(args.library, args.select)
    with tempfile.TemporaryDirectory(prefix="pdebench-hostile-") as tmp:
        scratch = Path(tmp)
        oracle = REPO / "submissions" / "oracle"
        hostile = hostile_folder(args.library, scratch)
        quiet = session("quiet", args.library, oracle, chosen, scratch, args.timeout)
        loaded = session("hostile", args.library, hostile, chosen, scratch, args.timeout)
        again = session("quiet-again", args.library, oracle, chosen, scratch, args.timeout)
        shutil.rmtree(scratch / "hostile")
    rows = [{"case_id": case, "quiet": quiet[case], "hostile": loaded.get(case), "quiet_again": again.get(case)}
            for case in chosen if case in quiet]
    print(f"{'record':48s} {'quiet':>7s} {'hostile':>8s} {'again':>7s}")
    for row in rows:
        print(f"{row['case_id']:48s} {row['quiet']:7.3f} {row['hostile'] or 0:8.3f} {row['quiet_again'] or 0:7.3f}")
    hostile_ratios = [r["hostile"] / r["quiet"] for r in rows if r["hostile"]]
    quiet_ratios = [r["quiet_again"] / r["quiet"] for r in rows if r["quiet_again"]]
    print(f"kept t_base, hostile session / quiet: {spread(hostile_ratios)}; "
          f"quiet again / quiet: {spread(quiet_ratios)}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{args.library}-hostile-pass-{args.tag}.json"
    head = {"machine": machine_key(), "revision": git_revision(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "records": len(rows), "timeout": args.timeout}
    out.write_text("\n".join(json.dumps(line) for line in [head, *rows]) + "\n")
    print(f"rows: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
