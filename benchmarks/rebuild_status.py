"""Issue 66: where a part rebuild stands, from its part files, by family.

    .venv/bin/python benchmarks/rebuild_status.py [OUT]   (default benchmarks/results/rebuild-issue-66)

Reads OUT/parts/*.json (``pdebench build-solve-only --out OUT`` writes one per record) and
prints, per family: the records built, kept and not kept, the builds' worst lifting-gain
estimate (the largest over a part's pricing settings: median, largest, how many over the
issue's 2 x and 3 x, and whether over 2 x stays within 5% of the family), the baseline ratio
the build measured (median, largest) and the part's share (median), and what other tracks'
oracles measured (``pdebench build-solve-only --track-gains``: the rows that name a library, ``dealii P1/n``,
counted in the worst gain as ``--pde-validate`` counts them, and apart: records measured, median,
over 2 x); then each record not kept with its reason and each kept one over 2 x with its worst
setting. Asserts nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from tabulate import tabulate

REPO = Path(__file__).resolve().parent.parent
BOUND, CEILING, OVER_BOUND = 2.0, 3.0, 0.05  # validation.LIFTING_GAIN_*: the bounds


def families(cases: Path) -> dict[str, str]:
    """Each record id of the case file with its family (a part file that kept nothing has no record)."""
    found = {}
    for line in cases.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            found[record["id"]] = record["pde_classification"]["equation_family"]
    return found


def entries(out: Path, family_of: dict[str, str]) -> list[dict]:
    found = []
    for path in sorted((out / "parts").glob("*.json")):
        entry = json.loads(path.read_text())
        record = entry.get("record") or {"id": path.stem, "evaluation_metadata": {}}
        part = record["evaluation_metadata"].get("solve_only") or {}
        build = part.get("build") or {}
        gains, rows = build.get("lifting_gain") or {}, build.get("pricing") or {}
        worst = max(gains, key=gains.get) if gains else None
        found.append({
            "id": record["id"],
            "family": family_of.get(record["id"], "?"),
            "kept": entry["kept"],
            "reason": entry["reason"],
            "seconds": entry.get("seconds", 0.0),
            "gain": gains[worst] if worst else None,
            "at": worst,
            "ratio": build.get("measured_baseline_ratio"),
            "share": part.get("share"),
            "tracks": [gain for label, gain in gains.items() if "library" in rows.get(label, {})],
        })  # fmt: skip
    return found


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def _measured(gains: list[float]) -> str:
    if not gains:
        return "-"
    return f"{len(gains)}, {statistics.median(gains):.2f}, {sum(gain > BOUND for gain in gains)}"


def main(out: Path) -> None:
    rows = entries(out, families(REPO / "cases" / "suite.jsonl"))
    by_family = defaultdict(list)
    for row in rows:
        by_family[row["family"]].append(row)
    table = []
    for family, found in sorted(by_family.items()):
        kept = [row for row in found if row["kept"]]
        gains = [row["gain"] for row in kept if row["gain"] is not None]
        ratios = [row["ratio"] for row in kept if row["ratio"] is not None]
        over = sum(gain > BOUND for gain in gains)
        table.append([
            family, len(found), len(kept), len(found) - len(kept), _median(gains),
            f"{max(gains):.2f}" if gains else "-", f"{over} ({over / max(len(kept), 1):.0%})",
            sum(gain > CEILING for gain in gains), "yes" if over <= OVER_BOUND * len(kept) else "no",
            f"{_median(ratios)} ({max(ratios):.2f})" if ratios else "-",
            f"{statistics.median(row['share'] for row in kept):.3f}" if kept else "-",
            _measured([gain for row in kept for gain in row["tracks"]]),
        ])  # fmt: skip
    headers = ["family", "built", "kept", "not kept", "worst gain, median", "largest", "over 2 x", "over 3 x",
               "within 5%", "baseline ratio, median (max)", "share, median",
               "other tracks measured: n, median, over 2 x"]  # fmt: skip
    print(f"{out}: {len(rows)} records, {sum(r['seconds'] for r in rows) / 3600:.1f} h of builds")
    print(tabulate(table, headers, tablefmt="github"))
    print("\nnot kept:")
    for row in rows:
        if not row["kept"]:
            print(f"  {row['id']}: {row['reason']}")
    print(f"\nkept, worst estimate over {BOUND:g} x:")
    for row in rows:
        if row["kept"] and row["gain"] is not None and row["gain"] > BOUND:
            print(f"  {row['id']}: {row['gain']:.2f} x at {row['at']} (baseline ratio {row['ratio'] or 0:.2f})")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "benchmarks" / "results" / "rebuild-issue-66")
