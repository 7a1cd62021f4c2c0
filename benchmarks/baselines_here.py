"""Issue 48: whose t_base judges a run on this machine, how close it is to the oracle timed
beside the submission, and what timing it here costs.

    .venv/bin/python benchmarks/baselines_here.py [--library dolfinx] [--jobs 2] [--select 1 | --all]
        [--modes default,paired] [--tag NAME] [--hog N]

Each mode is one pytest run of the oracle (submissions/oracle) over the chosen records, in
this order, back to back (one sitting):

- ``default``: no ``--pde-baseline`` (what a user gets);
- ``stored``: ``--pde-baseline=stored`` (the stored calibration, else the records' thresholds);
- ``first``: ``--pde-baseline=local`` with an empty store of kept baselines (the store of
  this machine and library is moved aside to ``reports/baselines-aside/`` first);
- ``second``: ``--pde-baseline=local`` again, with what ``first`` kept;
- ``again``: ``--pde-baseline=local`` once more;
- ``paired``, ``paired-again``: ``--pde-baseline=paired`` (the oracle timed beside every item).

``--submissions DIR`` runs another solver folder than the oracle (the oracle still sets the
baselines); ``--against A,B`` prints how many items kept their verdict between modes A and B.

Prints each mode's wall time (and against ``stored`` when both ran), where its t_base came
from, and per record its t_base against the ``paired`` run's (median, range). ``--hog N``
keeps N busy processes (one core's worth each) beside every mode. Rows go to
``benchmarks/results/<library>-baselines-<tag>.json`` (one line per mode and record).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validity import git_revision, selected, verdicts_of  # noqa: E402

from pytest_pdebench.bundled import baselines_folder  # noqa: E402
from pytest_pdebench.machine import machine_key
from pytest_pdebench.report import t_base_origins  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "reports" / "baselines-here"
RESULTS = REPO / "benchmarks" / "results"
MODES = {"default": [], "stored": ["--pde-baseline=stored"], "first": ["--pde-baseline=local"],
         "second": ["--pde-baseline=local"], "again": ["--pde-baseline=local"], "paired": ["--pde-baseline=paired"],
         "paired-again": ["--pde-baseline=paired"]}


def run_mode(mode: str, library: str, jobs: int, select: list[str], hogs: int,
             submissions: Path) -> tuple[list[dict], float, str]:
    """(verdicts, wall seconds, the run's t_base summary line)."""
    if mode == "first":
        kept = baselines_folder() / library
        if kept.is_dir():
            aside = REPO / "reports" / "baselines-aside" / time.strftime("%Y%m%dT%H%M%S")
            aside.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(kept), aside)
            print(f"kept baselines of {library} moved aside to {aside.relative_to(REPO)}")
    report, items = OUT / f"{library}-{mode}.json", OUT / f"{library}-{mode}"
    shutil.rmtree(items, ignore_errors=True)
    report.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
               f"--pde-library={library}", f"--pde-submissions={submissions}", *MODES[mode],
               f"--pde-output={items}", "--json-report", f"--json-report-file={report}"]
    if select:
        command += ["-k", " or ".join(select)]
    if jobs > 1:
        command += ["-n", str(jobs)]
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    print(f"running {mode}: {' '.join(command[2:8])} ...", flush=True)
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    finally:
        for hog in busy:
            hog.kill()
    seconds = time.perf_counter() - started
    if not report.exists():
        raise SystemExit(f"{mode}: pytest exited with {done.returncode} and wrote no report:\n{done.stdout[-3000:]}")
    verdicts = verdicts_of(report)
    return verdicts, seconds, t_base_origins(verdicts) or "no t_base"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default="dolfinx")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--select", type=int, default=1, metavar="N", help="N manufactured records per family")
    parser.add_argument("--all", action="store_true", help="the whole track instead of --select")
    parser.add_argument("--modes", default="default,paired")
    parser.add_argument("--tag", default=time.strftime("%Y-%m-%d"))
    parser.add_argument("--hog", type=int, default=0, metavar="N")
    parser.add_argument("--submissions", type=Path, default=REPO / "submissions" / "oracle")
    parser.add_argument("--against", metavar="A,B", help="verdicts of mode A against mode B")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if unknown := set(modes) - MODES.keys():
        parser.error(f"unknown modes {sorted(unknown)}: choose from {', '.join(MODES)}")
    OUT.mkdir(parents=True, exist_ok=True)
    chosen = [] if args.all else selected(args.library, args.select)
    runs: dict[str, tuple[list[dict], float, str]] = {}
    for mode in modes:
        runs[mode] = run_mode(mode, args.library, args.jobs, chosen, args.hog, args.submissions.resolve())
    rows = RESULTS / f"{args.library}-baselines-{args.tag}.json"
    with rows.open("w") as out:
        out.write(json.dumps({"machine": machine_key(), "revision": git_revision(), "date": time.strftime("%F %T"),
                              "jobs": args.jobs, "hog": args.hog, "items": len(chosen) or "all",
                              "submissions": str(args.submissions),
                              "wall_sec": {m: round(s, 1) for m, (_, s, _) in runs.items()}}) + "\n")
        for mode, (verdicts, _, _) in runs.items():
            for v in verdicts:
                out.write(json.dumps({"mode": mode, **{k: v.get(k) for k in (
                    "case_id", "family", "outcome", "error", "t_agent", "t_base", "t_base_from",
                    "calibration")}}) + "\n")
    print(f"\nrows: {rows.relative_to(REPO)}")
    for mode, (verdicts, seconds, origins) in runs.items():
        against = ""
        if "stored" in runs and mode != "stored":
            against = f" ({seconds / runs['stored'][1]:.2f} x stored)"
        outcomes = statistics_of(verdicts)
        print(f"{mode:>8}: {len(verdicts)} items, {outcomes}, wall {seconds / 60:.1f} min{against}; {origins}")
    if args.against:
        a, b = args.against.split(",")
        first = {v["case_id"]: v for v in runs[a][0]}
        second = {v["case_id"]: v for v in runs[b][0]}
        common = sorted(first.keys() & second.keys())
        same = sum(first[c]["outcome"] == second[c]["outcome"] for c in common)
        drifts = sorted((second[c]["t_agent"] / second[c]["t_base"]) / (first[c]["t_agent"] / first[c]["t_base"])
                        for c in common if all(x[c].get("t_agent") and x[c].get("t_base") for x in (first, second)))
        print(f"\n{a} against {b}: same verdict on {same} of {len(common)} items"
              + (f"; t_agent/t_base of {b} over {a}'s: median {statistics.median(drifts):.2f}, "
                 f"range {drifts[0]:.2f}-{drifts[-1]:.2f}" if drifts else ""))
        for c in common:
            if first[c]["outcome"] != second[c]["outcome"]:
                print(f"  {c}: {first[c]['outcome']} -> {second[c]['outcome']}")
    if "paired" in runs:
        paired = {v["case_id"]: v["t_base"] for v in runs["paired"][0] if v.get("t_base")}
        for mode, (verdicts, _, _) in runs.items():
            if mode == "paired":
                continue
            ratios = {v["case_id"]: v["t_base"] / paired[v["case_id"]] for v in verdicts
                      if v.get("t_base") and v["case_id"] in paired}
            if not ratios:
                continue
            print(f"\n{mode} t_base / paired t_base, per record:")
            for case, ratio in sorted(ratios.items(), key=lambda kv: kv[1]):
                print(f"  {case:55s} {ratio:.2f}")
            values = sorted(ratios.values())
            print(f"  median {statistics.median(values):.2f}, range {values[0]:.2f}-{values[-1]:.2f} "
                  f"({len(values)} records; the issue's bounds: median 0.87-1.15, each 0.67-1.5)")
    return 0


def statistics_of(verdicts: list[dict]) -> str:
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v["outcome"]] = counts.get(v["outcome"], 0) + 1
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))


if __name__ == "__main__":
    raise SystemExit(main())
