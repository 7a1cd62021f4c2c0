"""Issue 66's route on a few records: their parts built again under today's rule (or another
GAIN_AIM), into a scratch suite that benchmarks/lifting_gain.py can run (``--cases``).

    .venv/bin/python benchmarks/lifting_trial.py [--gain 1.8] --per-family 3 [--out reports/lifting/trial]

Takes ``--per-family`` manufactured records of each of the lifting rung's families from
cases/suite.jsonl (the first ones of the smoke sample's order: ``--pde-sample``'s pick), takes
their parts off (``authoring.parts.without_part``: the forcing's term, and the e_base back to
what it was without the part, divided by the ratio the build measured), builds each part again with
``making.pricing.GAIN_AIM`` set to ``--gain`` (``pdebench build-solve-only``'s code),
and writes OUT/suite.jsonl with OUT/references/. Each rebuilt record's thresholds are moved as
a calibration would move them: every library's e_base times the ratio the build measured on the
DOLFINx calibration baseline, tau_acc from it (the other tracks' baselines move alike, not
exactly: a real rebuild calibrates them again). Nothing under cases/ changes.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from pytest_pdebench.authoring.parts import assemble, build_parts, without_part
from pytest_pdebench.cases import iter_case_file, write_case_file
from pytest_pdebench.making import pricing
from pytest_pdebench.thresholds import accuracy_threshold

REPO = Path(__file__).resolve().parent.parent
FAMILIES = ("poisson", "helmholtz", "heat", "convection_diffusion")


def picked(per_family: int) -> list:
    """The first ``per_family`` manufactured records with a part, per family, without periodic
    data (the lifting rung's textbook solvers have none)."""
    chosen, counts = [], defaultdict(int)
    for _, record in iter_case_file(REPO / "cases" / "suite.jsonl"):
        meta = record.evaluation_metadata
        if (record.family in FAMILIES and meta.solve_only is not None and counts[record.family] < per_family
                and not record.case_spec_dict()["bc"].get("periodic")):
            counts[record.family] += 1
            chosen.append(record)
    return chosen


def moved_thresholds(out: Path) -> None:
    """Each rebuilt record's thresholds as its measured baseline ratio moves them."""
    path = out / "suite.jsonl"
    records = [record for _, record in iter_case_file(path)]
    for record in records:
        part, config = record.evaluation_metadata.solve_only, record.evaluation_config
        ratio = (part.build.get("measured_baseline_ratio") if part else None) or 1.0
        for thresholds in record.evaluation_metadata.thresholds.values():
            thresholds.e_base *= ratio
            thresholds.tau_acc = accuracy_threshold(thresholds.e_base, config.alpha_acc, config.tau_min, config.tau_max)
    write_case_file(path, records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gain", type=float, default=pricing.GAIN_AIM, help="GAIN_AIM for the rebuilt parts")
    parser.add_argument("--per-family", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "reports" / "lifting" / "trial"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source = out / "without-parts.jsonl"
    records = [without_part(record) for record in picked(args.per_family)]
    write_case_file(source, records)
    pricing.GAIN_AIM = args.gain
    kept, tried = build_parts(source, out, REPO / "submissions" / "oracle" / "dolfinx")
    assemble(source, out)
    moved_thresholds(out)
    print(f"kept {kept} of {tried} at GAIN_AIM {args.gain}; {out / 'suite.jsonl'}")
    for _, record in iter_case_file(out / "suite.jsonl"):
        build = record.evaluation_metadata.solve_only.build if record.evaluation_metadata.solve_only else {}
        print(record.id, build.get("tier"), build.get("measured_baseline_ratio"), build.get("lifting_gain"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
