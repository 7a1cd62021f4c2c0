"""Issue 39's difficulty table: the validity ladder on the published records and on the
variants of two seeds, from the rungs benchmarks/validity.py kept.

    .venv/bin/python benchmarks/validity.py --baseline paired --select 4 --rungs oracle,textbook,...
    .venv/bin/python benchmarks/validity.py --variants 1 --select 4 --rungs oracle,textbook,...
    .venv/bin/python benchmarks/validity.py --variants 2 --select 4 --rungs oracle,textbook,...
    .venv/bin/python benchmarks/variant_difficulty.py [--library dolfinx] [--select 4] [--seeds 1,2]

Prints, per rung, the PASS share on the published records (paired baselines) and on each
seed's variants of the same records; then, per family, the median e_base (the paired
oracle's error, the same in every rung) of each seed over the published one. A rung kept
for the whole track (no --select) stands in for its sample where the sample's is missing.
Asserts nothing: the goals (oracle 100%, dishonest 0, textbook within 5 points, e_base
within 1.5x) are read off the table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validity import DISHONEST, kept  # noqa: E402  (a script beside this one)

RUNGS = ("oracle", "textbook", *DISHONEST)


def verdicts(library: str, rung: str, suite: str, select: int) -> list[dict] | None:
    """The rung's kept verdicts on a suite ("paired" or "variants-SEED"), its sample's first."""
    return kept(library, f"{rung}-{suite}-select{select}") or kept(library, f"{rung}-{suite}")


def share(rows: list[dict], ids: set[str]) -> str:
    chosen = [r for r in rows if r["case_id"] in ids]
    if not chosen:
        return "-"
    passed = sum(r["outcome"] == "PASS" for r in chosen)
    return f"{100 * passed / len(chosen):.1f}% ({passed}/{len(chosen)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default="dolfinx")
    parser.add_argument("--select", type=int, default=4)
    parser.add_argument("--seeds", default="1,2")
    args = parser.parse_args()
    suites = ["paired", *(f"variants-{seed}" for seed in args.seeds.split(","))]
    table = {(rung, suite): verdicts(args.library, rung, suite, args.select) for rung in RUNGS for suite in suites}
    # the records every suite of the oracle rung judged (varied ones: the published sample's)
    published = table[("textbook", "paired")] or table[("oracle", "paired")] or []
    ids = {r["case_id"] for r in published}
    print(f"{args.library}: {len(ids)} records ({args.select} manufactured per family), paired baselines throughout")
    print(f"{'rung':<20}" + "".join(f"{suite:>24}" for suite in ("published", *suites[1:])))
    for rung in RUNGS:
        cells = [share(table[(rung, suite)] or [], ids) if table[(rung, suite)] else "-" for suite in suites]
        print(f"{rung:<20}" + "".join(f"{cell:>24}" for cell in cells))
    print("\nper family: median e_base of the variants over the published records' (same records)")
    base: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for (_rung, suite), rows in table.items():
        for row in rows or []:
            if row["case_id"] in ids and row.get("e_base"):
                base[suite][row["family"]][row["case_id"]] = row["e_base"]
    families = sorted(base["paired"])
    print(f"{'family':<22}" + "".join(f"{suite:>16}" for suite in suites[1:]))
    for family in families:
        cells = []
        for suite in suites[1:]:
            common = base["paired"][family].keys() & base[suite][family].keys()
            if not common:
                cells.append("-")
                continue
            ratio = statistics.median(base[suite][family][c] for c in common) / statistics.median(
                base["paired"][family][c] for c in common
            )
            cells.append(f"{ratio:.2f} (n={len(common)})")
        print(f"{family:<22}" + "".join(f"{cell:>16}" for cell in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
