"""Issue 11's validity ladder: what each rung of solvers gets on a whole track.

    .venv/bin/python benchmarks/validity.py [--library dolfinx] [--jobs 2] [--runs 3]
        [--rungs oracle,oracle-again,textbook,boundary_data,...] [--reuse] [--resume]

Rungs (each a pytest run of the plugin over the bundled cases, JSON report in
reports/validity/<rung>.json; --reuse prints from the reports already there). A rung
starts from empty folders, so that a second run measures again instead of reusing the
first's verdicts; --resume picks up an interrupted rung where it stopped (its wall time
then sums the parts: each from its start to the last verdict it wrote).
- ``oracle`` and ``oracle-again``: the strong oracle twice (goal: 100% PASS, and the same
  verdict on >= 99.5% of items between the two; t_agent / t_base near 1); each prints its
  wall time against the solver's own (every run's timed window, over the workers: issue
  15's goal is within 1.3 x);
- ``oracle-cluster``: the strong oracle through ``--pde-cluster`` on a Dask scheduler and
  --jobs one-thread workers started on loopback (issue 19's parity: the same verdict as
  ``oracle`` on >= 99.5% of items);
- ``textbook``: submissions/textbook, plain P1 on a fixed mesh (an honest plain user);
- ``lifting``: submissions/lifting, the textbook's solve of only what the closed form in the
  case's text leaves (issue 66; every family): against ``textbook``, what lifting buys
  (benchmarks/lifting_gain.py pairs them item by item on other meshes and elements);
- ``boundary_data``, ``scaled_forcing``, ``initial_condition``, ``zeros``: the committed
  dishonest solvers of tests/data/dishonest (goal: 0 PASS);
- ``ansatz_fit``: issue 46's attacker (pytest_pdebench/data/attacker), the visible
  expressions' terms and polynomials fitted to the PDE residual and the boundary and
  initial data by least squares, no mesh (goal: at most 2% PASS per family; offline per
  record: benchmarks/ansatz_fit.py);
- with ``--variants SEED`` every rung runs on the variants of that seed (paired
  baselines), with ``--baseline paired`` on the published records with paired baselines
  (``stored``: the stored calibrations; without the option the plugin's default, this
  machine's kept timings, timed first where missing), and with ``--select N`` on N records
  per family (manufactured ones under --variants): the rung's files are then named
  ``<rung>-variants-SEED``, ``<rung>-paired`` (``-stored``), ``-selectN``;
  ``--hog N`` keeps N busy processes (one core's worth each) running beside the rung
  (``-hogN``); a paired rung prints its verdicts against the outcomes the same runs get
  under the stored calibration; ``--against NAME`` compares each rung's verdicts with
  those of the kept rung NAME on their common items (stability);
- ``calibration-again``: the calibration run again (the oracle at the calibration
  settings, same workers and runs as the committed one) on --sample cases per family,
  into a scratch calibration folder: t_base again / t_base committed is the oracle
  against itself under the conditions of the committed baselines (goal: median 1.0 +- 0.1);
and, static over the suite (no solver runs), the errors of the dishonest rungs and of
the reference with 1% noise against every record's tau_acc (leaks.rung_errors).
Prints figures; asserts nothing (tests/test_validity.py keeps the dishonest rungs at 0).
Each finished rung also leaves its verdicts in benchmarks/results/<library>-<rung>.json
(one line per item: id, family, outcome, error, tau_acc, t_agent, t_base, timed runs;
committed: the ladder's figures (docs/results/) can be re-printed and checked from them, and
--reuse falls back to them where the full reports are gone).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from pytest_pdebench.calibration import CalibrationStore
from pytest_pdebench.cases import load_cases
from pytest_pdebench.leaks import RUNGS, rung_errors
from pytest_pdebench.machine import machine_key
from pytest_pdebench.report import outcome_table

REPO = Path(__file__).resolve().parent.parent

DISHONEST = ("boundary_data", "scaled_forcing", "initial_condition", "zeros", "ansatz_fit")
SOURCES = {"oracle": "submissions/oracle", "oracle-again": "submissions/oracle", "oracle-cluster": "submissions/oracle",
           "textbook": "submissions/textbook", "textbook-again": "submissions/textbook",
           "lifting": "submissions/lifting",
           **{rung: f"tests/data/dishonest/{rung}" for rung in DISHONEST if rung != "ansatz_fit"},
           "ansatz_fit": "pytest_pdebench/data/attacker",  # the builds' own attacker, shipped in the package
           "calibration-again": "submissions/oracle"}
OUT = REPO / "reports" / "validity"
RESULTS = REPO / "benchmarks" / "results"
SCRATCH_CALIBRATIONS = OUT / "calibration-again"  # calibration-again writes here, never to calibrations/
KEPT = ("case_id", "library", "family", "outcome", "reason", "error", "e_base", "tau_acc", "t_agent", "t_base",
        "tau_time", "t_first_run", "timed_runs", "worker", "variant_seed", "calibration", "stored", "sibling")
BASELINE_KEPT = ("error", "t_first_run", "timed_runs", "t_base")  # of a paired oracle's figures


def run_rung(rung: str, library: str, jobs: int, runs: int, sample: int,
             resume: bool = False, live: tuple[str, list[str]] = ("", [])) -> tuple[list[dict], float | None]:
    """(verdicts, wall seconds of the run, over all its parts when it was resumed);
    ``live``: (the name's suffix, the pytest options) of --variants, --baseline, --select."""
    source, (suffix, options) = SOURCES[rung], live
    hog_count, options = live_hogs(options)
    rung = rung + suffix
    report, parts = OUT / f"{library}-{rung}.json", OUT / f"{library}-{rung}.parts.json"
    if not resume:
        for folder in rung_folders(library, rung):
            shutil.rmtree(folder, ignore_errors=True)
        parts.unlink(missing_ok=True)
    starts, this_start = (json.loads(parts.read_text()) if parts.is_file() else []), time.time()
    parts.write_text(json.dumps(starts + [this_start]))  # kept before it runs: a killed part still counts
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
               f"--pde-library={library}", f"--pde-submissions={REPO / source}", f"--pde-runs={runs}", *options,
               f"--pde-output={rung_folders(library, rung)[0]}", "--pde-resume",  # empty unless resuming
               "--json-report", f"--json-report-file={report}"]
    if rung == "calibration-again":
        conditions = CalibrationStore(REPO / "calibrations").conditions(library)
        command += ["--pde-calibrate", f"--pde-runs={conditions.get('runs', runs)}",
                    f"--pde-calibrations={SCRATCH_CALIBRATIONS}", "-k", " or ".join(sampled(library, sample))]
        jobs = conditions.get("workers", jobs)
    cluster = None
    if rung.startswith("oracle-cluster"):  # the workers stand in for -n: one core each, as on a cluster
        from pytest_pdebench.testing.loopback import LoopbackCluster

        shutil.rmtree(OUT / "cluster", ignore_errors=True)
        cluster = LoopbackCluster(OUT / "cluster", workers=jobs)
        command.append(f"--pde-cluster={cluster.address}")
    elif jobs > 1:
        command += ["-n", str(jobs)]
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hog_count)]
    started = time.perf_counter()
    print(f"running {rung}: {' '.join(command[2:])}", flush=True)
    report.unlink(missing_ok=True)  # a stale report must not stand for this run
    try:
        code = subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL).returncode
    finally:
        if cluster is not None:
            cluster.stop()
        for hog in hogs:
            hog.kill()
    if not report.exists():
        raise SystemExit(f"{rung}: pytest exited with code {code} and wrote no report "
                         f"(its error is above; is {sys.executable} the project's .venv python?)")
    earlier = earlier_parts(starts, rung_folders(library, rung)[0], this_start)
    return verdicts_of(report), earlier + time.perf_counter() - started


def earlier_parts(starts: list[float], items: Path, this_start: float) -> float:
    """Wall seconds of the interrupted parts of a rung: each from its start to the last
    verdict it wrote (a part killed with its session leaves no other trace of its end)."""
    ends = starts[1:] + [this_start]
    stamps = [path.stat().st_mtime for path in items.rglob("verdict.json")]
    total = 0.0
    for start, end in zip(starts, ends):
        written = [stamp for stamp in stamps if start <= stamp < end]
        total += max(written) - start if written else 0.0
    return total


def rung_folders(library: str, rung: str) -> list[Path]:
    """What a rung writes besides its report: the items' folders (and, for
    calibration-again, its scratch calibration folder)."""
    folders = [OUT / "runs" / library / rung]
    if rung == "calibration-again":
        folders.append(SCRATCH_CALIBRATIONS / library)
    return folders


def keep(library: str, rung: str, verdicts: list[dict], conditions: dict) -> Path:
    """The rung's verdicts, trimmed to what the tables and ratios need, as JSON lines."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{library}-{rung}.json"
    lines = [json.dumps(conditions, sort_keys=True)]
    lines += [json.dumps({**{key: v.get(key) for key in KEPT}, **_baseline_kept(v)})
              for v in sorted(verdicts, key=lambda v: v["case_id"])]
    path.write_text("\n".join(lines) + "\n")
    return path


def _baseline_kept(verdict: dict) -> dict:
    base = verdict.get("baseline")
    return {"baseline": {key: base.get(key) for key in BASELINE_KEPT}} if base else {}


HOG = "--hog="  # in a rung's options: the busy processes to start beside it (not a pytest option)


def live_hogs(options: list[str]) -> tuple[int, list[str]]:
    """(busy processes to start, the options for pytest)."""
    hogs = sum(int(option.removeprefix(HOG)) for option in options if option.startswith(HOG))
    return hogs, [option for option in options if not option.startswith(HOG)]


def live_options(variants: int | None, baseline: str | None, select: int | None,
                 library: str, hog: int = 0, only: Path | None = None) -> tuple[str, list[str]]:
    """(the rung names' suffix, the pytest options) of --variants, --baseline, --select,
    --only and --hog."""
    suffix, options = "", []
    if variants is not None:
        suffix, options = f"-variants-{variants}", [f"--pde-variants={variants}"]
    elif baseline:  # the plugin's default is this machine's kept baselines (timed first where missing)
        suffix, options = f"-{baseline}", [f"--pde-baseline={baseline}"]
    if select:
        suffix += f"-select{select}"
        options += ["-k", " or ".join(selected(library, select))]
    if only:
        suffix += f"-{only.stem}"
        listed = only.read_text().split()
        suite = {record.id for _, _, record in load_cases(REPO / "cases")}
        gone = [case for case in listed if case not in suite]
        if gone:  # a list kept from an earlier suite: say what no longer runs
            print(f"{only}: {len(gone)} of {len(listed)} ids are not in the suite now: {' '.join(gone)}")
        options += ["-k", " or ".join(listed)]
    if hog:
        suffix += f"-hog{hog}"
        options.append(f"{HOG}{hog}")
    return suffix, options


def paired_against_stored(verdicts: list[dict]) -> str | None:
    """A paired rung: its verdicts against the outcomes the same runs get under the stored
    calibration (where there is one)."""
    pairs = Counter((v["outcome"], v["stored"].get("outcome")) for v in verdicts if v.get("stored"))
    if not pairs:
        return None
    same = sum(n for (paired, stored), n in pairs.items() if paired == stored)
    total = sum(pairs.values())
    shown = ", ".join(f"{paired} paired / {stored} stored: {n}" for (paired, stored), n in sorted(pairs.items(),
                      key=lambda entry: -entry[1]))
    return f"paired against stored thresholds, same runs: same outcome on {same} of {total} items; {shown}"


def selected(library: str, per_family: int) -> list[str]:
    """Up to per_family manufactured records of each family (those a variant exists for),
    spread over the sorted ids: the same records for the published suite and every seed."""
    by_family: dict[str, list[str]] = {}
    for _, _, record in load_cases(REPO / "cases"):
        meta = record.evaluation_metadata
        if library in record.supported_libraries and meta.manufactured_solution and "smoke" not in record.tags:
            by_family.setdefault(record.family, []).append(record.id)
    chosen = []
    for ids in by_family.values():
        ids.sort()
        chosen += ids[::max(1, len(ids) // per_family)][:per_family]
    return chosen


def kept(library: str, rung: str) -> list[dict] | None:
    path = RESULTS / f"{library}-{rung}.json"
    if not path.is_file():
        return None
    return [json.loads(line) for line in path.read_text().splitlines()[1:] if line]


def conditions_of(library: str, rung: str) -> dict | None:
    """The first line of a kept rung: how it was run (jobs, minutes, revision, ...)."""
    path = RESULTS / f"{library}-{rung}.json"
    return json.loads(path.read_text().splitlines()[0]) if path.is_file() else None


def git_revision() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def sampled(library: str, per_family: int) -> list[str]:
    """Up to per_family calibrated cases of each family, spread over the sorted ids."""
    entries = CalibrationStore(REPO / "calibrations").entries(library)
    by_family: dict[str, list[str]] = {}
    for _, _, record in load_cases(REPO / "cases"):
        if record.id in entries:
            by_family.setdefault(record.family, []).append(record.id)
    chosen = []
    for ids in by_family.values():
        ids.sort()
        step = max(1, len(ids) // per_family)
        chosen += ids[::step][:per_family]
    return chosen


def self_ratio_line(library: str, verdicts: list[dict]) -> str:
    """t_base measured again over the committed t_base, per item."""
    entries = CalibrationStore(REPO / "calibrations").entries(library)
    ratios = sorted(v["t_agent"] / entries[v["case_id"]]["t_base"] for v in verdicts
                    if v.get("t_agent") and v["case_id"] in entries)
    if not ratios:
        return "calibration again: no timed items"
    pick = lambda q: ratios[min(len(ratios) - 1, int(q * len(ratios)))]  # noqa: E731
    return (f"the oracle against itself (t_base again / t_base committed) over {len(ratios)} items: median "
            f"{statistics.median(ratios):.2f}, 5th pct {pick(0.05):.2f}, 95th pct {pick(0.95):.2f}, "
            f"min {ratios[0]:.2f}, max {ratios[-1]:.2f}")


def verdicts_of(report: Path) -> list[dict]:
    data = json.loads(report.read_text())
    return [t["metadata"]["pde"] for t in data.get("tests", []) if "pde" in t.get("metadata", {})]


def ratio_line(verdicts: list[dict]) -> str:
    ratios = sorted(v["t_agent"] / v["t_base"] for v in verdicts if v.get("t_agent") and v.get("t_base"))
    if not ratios:
        return "t_agent / t_base: no timed items"
    pick = lambda q: ratios[min(len(ratios) - 1, int(q * len(ratios)))]  # noqa: E731
    return (f"t_agent / t_base over {len(ratios)} timed items: median {statistics.median(ratios):.2f}, "
            f"5th pct {pick(0.05):.2f}, 95th pct {pick(0.95):.2f}, max {ratios[-1]:.2f}")


def cost_line(verdicts: list[dict], seconds: float, jobs: int) -> str:
    """Wall time against the solver's own: every run's timed window (the gated run's and the
    timed runs', a paired oracle's included), summed over items and shared by the workers."""
    if any("t_first_run" not in v for v in verdicts):
        return "wall against solving: these verdicts were kept without the gated runs' windows (an older run)"

    def windows(figures: dict) -> float:
        return (figures.get("t_first_run") or 0.0) + sum(figures.get("timed_runs") or ())

    solving = sum(windows(v) + windows(v.get("baseline") or {}) for v in verdicts)
    if not solving:
        return "wall against solving: no timed windows in these verdicts"
    share = solving / jobs
    return (f"wall {seconds / 60:.1f} min against the solver's own {solving / 60:.1f} min / {jobs} workers = "
            f"{share / 60:.1f} min: {seconds / share:.2f} x")


def stability(first: list[dict], second: list[dict]) -> str:
    a = {(v["case_id"], v["library"]): v["outcome"] for v in first}
    b = {(v["case_id"], v["library"]): v["outcome"] for v in second}
    common = a.keys() & b.keys()
    same = sum(a[k] == b[k] for k in common)
    changed = Counter(f"{a[k]} -> {b[k]}" for k in common if a[k] != b[k])
    return (f"same verdict on {same} of {len(common)} items ({100 * same / max(1, len(common)):.1f}%)"
            + (f"; changed: {dict(changed)}" if changed else ""))


def static_rungs(library: str) -> str:
    from tabulate import tabulate

    counts: dict[str, Counter] = {}
    for path, _, record in load_cases(REPO / "cases"):
        thresholds = record.evaluation_metadata.thresholds.get(library)
        if library not in record.supported_libraries or thresholds is None:
            continue
        row = counts.setdefault(record.family, Counter())
        row["cases"] += 1
        for rung, error in rung_errors(record, path.parent).items():
            row[rung] += error <= thresholds.tau_acc
    total = sum(counts.values(), Counter())
    rows = [[family, row["cases"], *(row[r] for r in RUNGS)] for family, row in sorted(counts.items())]
    return tabulate(rows + [["all", total["cases"], *(total[r] for r in RUNGS)]],
                    headers=["family", "cases", *(f"{r}: PASS" for r in RUNGS)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default="dolfinx")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per item (the plugin's default: 3)")
    parser.add_argument("--rungs", default=",".join(SOURCES))
    parser.add_argument("--reuse", action="store_true", help="print from the reports already written")
    parser.add_argument("--resume", action="store_true", help="pick up interrupted rungs instead of starting afresh")
    parser.add_argument("--sample", type=int, default=10, help="calibration-again: cases per family")
    parser.add_argument("--variants", type=int, metavar="SEED", help="run the rungs on the variants of SEED")
    parser.add_argument("--baseline", choices=("stored", "paired", "local"),
                        help="stored calibrations, the oracle paired beside each item, or this machine's kept "
                             "timings (the plugin's default, used without this option)")  # fmt: skip
    parser.add_argument("--select", type=int, metavar="N", help="N manufactured records per family only")
    parser.add_argument("--only", type=Path, metavar="FILE", help="the case ids in FILE (one a line) only")
    parser.add_argument("--hog", type=int, default=0, metavar="N", help="N busy processes beside each rung")
    parser.add_argument("--against", metavar="NAME", help="compare the verdicts with the kept rung NAME")
    args = parser.parse_args()
    live = live_options(args.variants, args.baseline, args.select, args.library, args.hog, args.only)
    OUT.mkdir(parents=True, exist_ok=True)
    results = {}
    for base_rung in args.rungs.split(","):
        rung = base_rung + live[0]
        report = OUT / f"{args.library}-{rung}.json"
        if args.reuse and report.is_file():
            results[rung] = (verdicts_of(report), None)
        elif args.reuse and kept(args.library, rung) is not None:
            results[rung] = (kept(args.library, rung), None)
        else:
            results[rung] = run_rung(base_rung, args.library, args.jobs, args.runs, args.sample, args.resume, live)
            conditions = {"rung": rung, "library": args.library, "jobs": args.jobs, "runs": args.runs,
                          "options": live[1][:1],
                          "resumed": args.resume,  # then "minutes" sums the parts (earlier_parts)
                          "minutes": round(results[rung][1] / 60, 1), "revision": git_revision(),
                          "machine": machine_key(), "date": time.strftime("%Y-%m-%d")}
            print(f"verdicts kept in {keep(args.library, rung, results[rung][0], conditions).relative_to(REPO)}")
    for rung, (verdicts, seconds) in results.items():
        how = f"{args.jobs} cluster workers" if rung == "oracle-cluster" else f"-n {args.jobs}"
        took = f", {seconds / 60:.1f} min with {how}" if seconds else ""
        print(f"\n== {rung} ({SOURCES[rung.removesuffix(live[0])]}): {len(verdicts)} items{took}")
        print(outcome_table(verdicts))
        if rung.startswith(("oracle", "textbook")):
            print(ratio_line(verdicts))
        kept_as = {} if seconds else conditions_of(args.library, rung) or {}
        if rung.startswith("oracle") and (seconds or kept_as.get("minutes")):
            print(cost_line(verdicts, seconds or kept_as["minutes"] * 60, kept_as.get("jobs", args.jobs)))
        if rung == "calibration-again":
            print(self_ratio_line(args.library, verdicts))
        against_stored = paired_against_stored(verdicts)
        if against_stored:
            print(against_stored)
        if args.against and kept(args.library, args.against):
            print(f"against {args.against}: {stability(kept(args.library, args.against), verdicts)}")
    for second in ("oracle-again", "oracle-cluster"):
        if "oracle" in results and second in results:
            print(f"\nverdicts, oracle and {second}: {stability(results['oracle'][0], results[second][0])}")
    print(f"\n== static dishonest rungs over cases/ ({args.library} tau_acc; no solver runs)")
    print(static_rungs(args.library))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
