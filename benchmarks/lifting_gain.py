"""Issue 66: what a solver gains by lifting the closed form out of a case's text.

    .venv/bin/python benchmarks/lifting_gain.py [--settings P1:24,P1:48,P2:8,P2:16] [--sample 4 | -k EXPR]
        [-m EXPR] [--jobs 2] [--reuse]

For each setting (element degree and cells per side), the lifting rung (submissions/lifting)
runs twice through the plugin on the same items: plain (its LIFT off: the textbook solver of
the family on that mesh and element) and lifted (the closed form S found in the text, only
w = u - S solved). Thresholds are the stored calibrations' (``--pde-baseline=stored``: no
baseline pass), one timed run per item (the error is what is compared). Prints, per item, both
errors as multiples of tau_acc and the gain (plain error / lifted error); per family the
median and largest gain and how many items gain at most 2x and 3x (the issue's bounds), and
how many items the lifted solve passes the accuracy gate on where the plain one misses it by
2x or more. Then, per element degree, each item's gain at the coarsest of the settings where the
plain solve passes the accuracy gate (the issue's "a mesh near the plain solve's coarsest passing
one"; the finest setting where none passes). The pairs go to
benchmarks/results/lifting-gain-<name>.json; ``--reuse`` prints from the JSON reports already in
reports/lifting/. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tabulate import tabulate

REPO = Path(__file__).resolve().parent.parent
RUNG = REPO / "submissions" / "lifting" / "dolfinx"
OUT = REPO / "reports" / "lifting"
RESULTS = REPO / "benchmarks" / "results"
FAMILIES = "manufactured_solution"  # the rung lifts in every family (a numerical reference gives nothing)


def folder(setting: str, lift: bool, name: str) -> Path:
    """A submission folder: the rung's files linked, its _setting.py written for this run."""
    from pytest_pdebench.making.lifting import rung_folder

    degree, cells = (int(n) for n in setting.removeprefix("P").split(":"))
    where = OUT / name / f"{setting.replace(':', '-')}-{'lifted' if lift else 'plain'}" / "dolfinx"
    return rung_folder(where, cells, max(4, cells // 4), degree, lift, RUNG).parent


def run(setting: str, lift: bool, selection: list[str], jobs: int, reuse: bool, name: str) -> dict[str, dict]:
    submissions = folder(setting, lift, name)
    report = submissions / "report.json"
    if not (reuse and report.is_file()):
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--pde-library=dolfinx",
                   f"--pde-submissions={submissions}", "--pde-runs=1", "--pde-baseline=stored",
                   f"--pde-output={submissions / 'runs'}", "--json-report", f"--json-report-file={report}",
                   *selection, *(["-n", str(jobs)] if jobs > 1 else [])]
        print(f"running {submissions.name}: {' '.join(command[3:])}", flush=True)
        report.unlink(missing_ok=True)
        subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL)
        if not report.is_file():
            raise SystemExit(f"{submissions.name}: pytest wrote no report")
    tests = json.loads(report.read_text()).get("tests", [])
    verdicts = [t["metadata"]["pde"] for t in tests if "pde" in t.get("metadata", {})]
    return {v["case_id"]: v for v in verdicts}


def pairs(setting: str, plain: dict[str, dict], lifted: dict[str, dict]) -> list[dict]:
    rows = []
    for case_id in sorted(set(plain) & set(lifted)):
        p, q = plain[case_id], lifted[case_id]
        if p.get("error") is None or q.get("error") is None or not p.get("tau_acc"):
            continue
        rows.append({"case_id": case_id, "family": p["family"], "tau_acc": p["tau_acc"], "setting": setting,
                     "plain": p["error"] / p["tau_acc"], "lifted": q["error"] / q["tau_acc"],
                     "gain": p["error"] / max(q["error"], 1e-300)})
    return rows


def family_table(rows: list[dict]) -> str:
    by_family = defaultdict(list)
    for row in rows:
        by_family[row["family"]].append(row)
    lines = []
    for family, group in sorted(by_family.items()) + [("all", rows)]:
        gains = [r["gain"] for r in group]
        failing = [r for r in group if r["plain"] >= 2]
        lines.append([family, len(group), f"{statistics.median(gains):.2f}", f"{max(gains):.2f}",
                      sum(g <= 2 for g in gains), sum(g <= 3 for g in gains), len(failing),
                      sum(r["lifted"] <= 1 for r in failing)])
    return tabulate(lines, headers=["family", "items", "median gain", "largest", "<= 2x", "<= 3x",
                                    "plain >= 2 tau", "of those lifted passes"])


def at_coarsest_pass(rows: list[dict]) -> list[dict]:
    """Per element degree and item, the row of the coarsest setting whose plain solve passes the
    accuracy gate (the finest setting's where none does)."""
    chosen = []
    by_item = defaultdict(list)
    for row in rows:
        by_item[(row["setting"].split(":")[0], row["case_id"])].append(row)
    for group in by_item.values():
        group.sort(key=lambda r: int(r["setting"].split(":")[1]))
        chosen.append(next((r for r in group if r["plain"] <= 1), group[-1]))
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default="P1:24,P1:48,P2:8,P2:16", help="degree:cells, comma-separated")
    parser.add_argument("--sample", type=int, default=4, help="items per family and construction method")
    parser.add_argument("-k", dest="keyword", help="pytest's -k instead of --sample")
    parser.add_argument("-m", dest="marker", default=FAMILIES, help=f"pytest's -m (default: {FAMILIES})")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cases", help="a case file instead of the suite (benchmarks/lifting_trial.py writes one)")
    parser.add_argument("--name", default="suite", help="the runs' folder in reports/lifting/, the results' suffix")
    parser.add_argument("--reuse", action="store_true", help="print from the reports already there")
    args = parser.parse_args()
    selection = ["-m", args.marker] + (["-k", args.keyword] if args.keyword else [f"--pde-sample={args.sample}"])
    selection += [f"--pde-cases={Path(args.cases).resolve()}"] if args.cases else []
    every = []
    for setting in args.settings.split(","):
        rows = pairs(setting, run(setting, False, selection, args.jobs, args.reuse, args.name),
                     run(setting, True, selection, args.jobs, args.reuse, args.name))
        every += rows
        print(f"\n== {setting}: {len(rows)} items with both errors (error / tau_acc, gain = plain / lifted)")
        print(tabulate([[r["case_id"], f"{r['plain']:.2f}", f"{r['lifted']:.2f}", f"{r['gain']:.2f}"] for r in rows],
                       headers=["case", "plain", "lifted", "gain"]))
        print(family_table(rows))
    for degree in dict.fromkeys(r["setting"].split(":")[0] for r in every):
        chosen = [r for r in at_coarsest_pass(every) if r["setting"].startswith(degree + ":")]
        print(f"\n== {degree}, each item at the coarsest setting where the plain solve passes")
        print(tabulate([[r["case_id"], r["setting"], f"{r['plain']:.2f}", f"{r['lifted']:.2f}", f"{r['gain']:.2f}"]
                        for r in chosen], headers=["case", "setting", "plain", "lifted", "gain"]))
        print(family_table(chosen))
    RESULTS.mkdir(exist_ok=True)
    kept = RESULTS / f"lifting-gain-{args.name}.json"
    kept.write_text("".join(json.dumps(row) + "\n" for row in every))
    print(f"pairs kept in {kept.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
