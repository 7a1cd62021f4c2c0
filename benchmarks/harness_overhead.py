"""Harness overhead per item: what the sandbox, the runtime start-up and the gates
cost on top of the solver's own (timed) work. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/harness_overhead.py [--repeats 10] [--backends bubblewrap,none,docker]
                                                    [--runners cold,warm] [--library dolfinx]

With bubblewrap, ``--runners`` measures both runners: ``cold`` starts a fresh interpreter
per run, ``warm`` forks it from a zygote that imported the track once (sandbox/warm.py).
``--library firedrake`` measures the Firedrake track (its provisioned runtime) the same way.

The docker backend needs an engine (DOCKER_HOST; `pdebench containers engine`) and the
DOLFINx image (`pdebench containers build dolfinx`): its figure is the whole container
life (create, copy in, start, wait, copy out, remove) around the same empty solver.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

from pytest_pdebench.baselines import Stored
from pytest_pdebench.bundled import SMOKE_CASES
from pytest_pdebench.cases import load_cases
from pytest_pdebench.evaluation import evaluate
from pytest_pdebench.fingerprints import case_fingerprint
from pytest_pdebench.libraries import detect_runtime, get_track
from pytest_pdebench.plan import ItemPlan
from pytest_pdebench.sandbox import Limits, get_backend
from pytest_pdebench.settings import Settings, item_directory
from pytest_pdebench.sources import Submission
from pytest_pdebench.speed import probe_seconds
from pytest_pdebench.thresholds import ResolvedThresholds

REPO = Path(__file__).resolve().parent.parent

EXACT_SOLVER = b"""
import json
import numpy as np

def solve(case_spec):
    g = case_spec["eval_grid"]
    x = np.linspace(g["bbox"][0], g["bbox"][1], g["nx"])
    y = np.linspace(g["bbox"][2], g["bbox"][3], g["ny"])
    X, Y = np.meshgrid(x, y)
    np.savez("solution.npz", u=np.sin(np.pi * X) * np.sin(np.pi * Y), x=x, y=y)
    json.dump({"wall_time_sec": 0.0, "status": "success"}, open("meta.json", "w"))
"""


# the same, with noise far under tau_acc: every run's outputs differ, so each timed run's are
# read and judged in full (identical bytes are only compared)
VARYING_SOLVER = EXACT_SOLVER.replace(b"np.sin(np.pi * X) * np.sin(np.pi * Y)",
                                      b"np.sin(np.pi * X) * np.sin(np.pi * Y) + 1e-9 * np.random.rand(*X.shape)")


# e_base 1e-2 (tau_acc 0.1), t_base 10 s: every item PASSes (the exact field leaves out the
# case's solve-only part, 3% of it: the runs, not the accuracy, are what is measured here)
THRESHOLDS = ResolvedThresholds.from_baseline(1e-2, 10.0, 10, 3, 1e-6, 1.0, "benchmark")


def median_ms(values) -> str:
    return f"{1000 * statistics.median(values):7.1f} ms"


def process_start(library: str, backend_name: str, preload: bool, repeats: int,
                  runner: str = "cold") -> tuple[list[float], list[float]]:
    """Wall time of a run whose solve() does nothing, and its timed window."""
    sandbox = "docker" if backend_name == "docker" else "bubblewrap"  # the runtime lives in the image
    track, runtime = get_track(library), detect_runtime(library, sandbox)
    walls, windows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            work, cache = Path(tmp) / f"w{i}", Path(tmp) / "cache"
            work.mkdir()
            cache.mkdir(exist_ok=True)
            (work / "case_spec.json").write_text(json.dumps({"case_spec": {}}))
            (work / "solver.py").write_text("def solve(case_spec):\n    pass\n")
            request = track.run_request(runtime, "solver.py", work, cache, Limits(timeout_sec=60))
            if not preload:
                request.argv[-1] = ""
            if runner == "warm":
                spec = track.warm_spec("solver.py")
                request.warm = spec if preload else dataclasses.replace(spec, preload="", zygote_preload="",
                                                                        defer_mpi=False)
            result = get_backend(backend_name).run(request)
            assert result.returncode == 0, result.stderr
            walls.append(result.wall_sec)
            windows.append(result.solve_sec)
    return walls, windows


def whole_items(library: str, repeats: int, runner: str, runs: int,
                solver: bytes = EXACT_SOLVER) -> list[tuple[float, float]]:
    """(item wall time, time inside solver processes) for poisson_basic with an exact
    solver: one gated run and ``runs`` timed runs."""
    record = next(r for _, _, r in load_cases(SMOKE_CASES) if r.id == "poisson_basic")
    submission = Submission("solver.py", {"solver.py": solver}, "benchmark")
    thresholds = THRESHOLDS
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(output_dir=Path(tmp), runner=runner, runs=runs)
        for _ in range(repeats):
            started = time.perf_counter()
            plan = ItemPlan(record, library, SMOKE_CASES, item_directory(settings, library, record.id),
                            case_fingerprint(record, library), Stored(thresholds))
            verdict = evaluate(plan, submission, "benchmark", settings)
            elapsed = time.perf_counter() - started
            assert verdict.outcome == "PASS", verdict.reason
            figures.append((elapsed, verdict.t_first_run + sum(verdict.timed_runs)))
    return figures


def judging_cost(repeats: int, runs: int, grid: int) -> list[float]:
    """Seconds to judge ``runs`` timed runs whose outputs all differ from the gated run's
    (each read, checked and compared in full) on a ``grid`` x ``grid`` evaluation grid: what
    judging every run adds to an item, apart from the runs themselves."""
    import io

    import numpy as np

    from pytest_pdebench.execution import Execution, RunOutputs
    from pytest_pdebench.judge import Judge
    from pytest_pdebench.verdict import Verdict

    record = next(r for _, _, r in load_cases(SMOKE_CASES) if r.id == "poisson_basic")
    record = record.model_copy(deep=True)
    record.case_spec.eval_grid.nx = record.case_spec.eval_grid.ny = grid
    record.evaluation_metadata.solve_only = None  # stored on the case's own grid: the judging is what counts
    thresholds = THRESHOLDS
    x = y = np.linspace(0, 1, grid)
    X, Y = np.meshgrid(x, y)

    def npz(noise: float) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, u=np.sin(np.pi * X) * np.sin(np.pi * Y) + noise, x=x, y=y)
        return buffer.getvalue()

    meta = json.dumps({"wall_time_sec": 0.1, "status": "success"}).encode()
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            verdict = Verdict.for_item(record, "dolfinx", "benchmark", Settings(output_dir=Path(tmp)))
            plan = ItemPlan(record, "dolfinx", SMOKE_CASES, Path(tmp), "", Stored(thresholds))
            judge = Judge(plan, verdict, Settings(output_dir=Path(tmp)))
            judge.prepare()
            done = Execution(solution=npz(0.0), meta=meta, timed=True, timed_runs=[0.1] * runs,
                             timed_outputs=[RunOutputs(npz(1e-9 * (k + 1)), meta) for k in range(runs)])
            judge._gated_run(done, verdict, None, thresholds)
            started = time.perf_counter()
            judge._timed_runs(done, verdict, thresholds)
            figures.append(time.perf_counter() - started)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--backends", default="bubblewrap,none")
    parser.add_argument("--runners", default="cold,warm", help="bubblewrap only: cold, warm or both")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per item (besides the gated one)")
    parser.add_argument("--library", default="dolfinx", choices=["dolfinx", "firedrake"])
    parser.add_argument("--varying", action="store_true",
                        help="also a solver whose outputs differ every run: each timed run's judged in full")
    args = parser.parse_args()
    library = args.library
    print(f"{library} {detect_runtime(library).version}; medians of {args.repeats} runs; "
          f"speed probe {probe_seconds():.4f} s\n")
    runners = args.runners.split(",")
    for backend in args.backends.split(","):
        for runner in runners if backend == "bubblewrap" else ["cold"]:
            label = f"{backend}/{runner}"
            walls, windows = process_start(library, backend, False, args.repeats, runner)
            print(f"{label:17s} empty solver, no preload:      process {median_ms(walls)}   timed window "
                  f"{median_ms(windows)}")
            walls, windows = process_start(library, backend, True, args.repeats, runner)
            print(f"{label:17s} empty solver, track's imports: process {median_ms(walls)}   timed window "
                  f"{median_ms(windows)}")
    for grid in (20, 100, 200):  # 100 x 100: 534 of the suite's 645 cases
        print(f"judging {args.runs} timed runs whose outputs differ from the gated run's, {grid} x {grid} grid: "
              f"{median_ms(judging_cost(args.repeats, args.runs, grid))}")
    # a numpy solver names no module of the track, so its runs skip the track's start-up
    # (issue 50); the same solver importing the track pays it, as every FEM solver does
    solvers = {"exact numpy solver": EXACT_SOLVER,
               f"the same, importing {library}": f"import {library}  # noqa: F401\n".encode() + EXACT_SOLVER}
    if args.varying:
        solvers["outputs differing every run"] = VARYING_SOLVER
    for runner in runners:
        for label, solver in solvers.items():
            items = whole_items(library, args.repeats, runner, args.runs, solver)
            item_wall = [w for w, _ in items]
            outside = [w - inside for w, inside in items]
            print(f"\n{runner}: whole item (poisson_basic, {label}, 1 gated + {args.runs} timed runs): "
                  f"{median_ms(item_wall)}")
            print(f"{runner}:   of which outside the timed windows (start-up, imports, gates, files): "
                  f"{median_ms(outside)}")


if __name__ == "__main__":
    main()
