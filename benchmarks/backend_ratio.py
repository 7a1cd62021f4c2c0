"""The anchor's t_agent / t_base against a baseline calibrated under the same setting just
before, on the quickest item of each family: is the time gate the same under bubblewrap
(warm runner or a fresh interpreter per run) and in containers? And are the baselines of
two settings the same (per item, the second's t_base over the first's)? Prints figures;
asserts nothing.

    .venv/bin/python benchmarks/backend_ratio.py [--settings bubblewrap/cold,bubblewrap/warm,docker,cluster]
                                                 [--folder DIR]

The docker backend needs an engine (DOCKER_HOST; `pdebench containers engine`) and the
DOLFINx image (`pdebench containers build dolfinx`). ``cluster`` calibrates here (bubblewrap,
warm, two xdist workers) and evaluates through `--pde-cluster` on a scheduler and two
one-thread workers on loopback: the cluster's runs judged against the local calibration.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from pytest_pdebench.testing.loopback import scheduler_address

REPO = Path(__file__).resolve().parent.parent

# the quickest baseline of each family (as tests/test_docker_engine.py takes them)
ITEMS = ["poisson_graded_kappa_unit_square_010", "helmholtz_k2_star_037", "biharmonic_plate_unit_square_035",
         "elasticity_nu045_unit_square_noexact_003", "heat_short_unit_square_noexact_013",
         "cd_medium_pe_unit_square_084", "rd_linear_t_junction_016", "stokes_nu1_unit_square_002",
         "ns_re10_unit_square_noexact_000", "burgers_nu005_star_026", "wave_c1_t_junction_027"]


def run(setting: str, folder: Path, *extra: str, cluster: str | None = None) -> float:
    backend, _, runner = setting.partition("/")
    if backend == "cluster":
        backend, runner = "bubblewrap", "warm"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pde-library=dolfinx",
                    f"--pde-submissions={REPO / 'submissions' / 'oracle'}",
                    f"--pde-cases={REPO / 'cases' / 'suite.jsonl'}",
                    f"--pde-sandbox={backend}", f"--pde-runner={runner or 'warm'}",
                    f"--pde-calibrations={folder / 'calibrations'}",
                    *([f"--pde-cluster={cluster}"] if cluster else ["-n", "2"]),
                    "-k", " or ".join(ITEMS), *extra], cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--settings", default="bubblewrap/cold,bubblewrap/warm,docker",
                        help="sandbox[/runner], comma-separated (the runner only matters for bubblewrap)")
    parser.add_argument("--folder", help="where calibrations, audit folders and reports go (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.folder or scratch)
        baselines = {}
        for setting in args.settings.split(","):
            folder = root / setting.replace("/", "-")
            calibrating = run(setting, folder, "--pde-calibrate", f"--pde-output={folder / 'calibration'}")
            report = folder / "report.json"
            with scheduler_address(None, folder / "dask") if setting == "cluster" else nullcontext() as cluster:
                evaluating = run(setting, folder, f"--pde-output={folder / 'evaluation'}", "--json-report",
                                 f"--json-report-file={report}", cluster=cluster)
            verdicts = [test["metadata"]["pde"] for test in json.loads(report.read_text())["tests"]
                        if "pde" in test.get("metadata", {})]
            ratios = sorted(v["t_agent"] / v["t_base"] for v in verdicts if v.get("t_agent") and v.get("t_base"))
            passed = sum(v["outcome"] == "PASS" for v in verdicts)
            baselines[setting] = {v["case_id"]: v["t_base"] for v in verdicts if v.get("t_base")}
            print(f"{setting:16s} {passed} of {len(verdicts)} PASS; t_agent / t_base median "
                  f"{statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f}, p95 "
                  f"{ratios[min(len(ratios) - 1, int(0.95 * len(ratios)))]:.2f}); median t_base "
                  f"{statistics.median(v['t_base'] for v in verdicts):.2f} s; calibration {calibrating:.0f} s, "
                  f"evaluation {evaluating:.0f} s")

        first, *others = list(baselines)
        for other in others:
            shared = sorted(set(baselines[first]) & set(baselines[other]))
            ratios = sorted(baselines[other][case] / baselines[first][case] for case in shared)
            if ratios:
                print(f"t_base {other} / {first}: median {statistics.median(ratios):.2f} "
                      f"({ratios[0]:.2f}-{ratios[-1]:.2f}) over {len(ratios)} items")


if __name__ == "__main__":
    main()
