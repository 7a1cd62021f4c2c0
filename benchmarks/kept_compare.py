"""Two stores of kept baselines side by side (issue 48): per case, the second's t_base and
first-run base (``t_first_run``) over the first's, for the cases both hold.

    .venv/bin/python benchmarks/kept_compare.py BEFORE.json AFTER.json

BEFORE and AFTER are kept files (``~/.cache/pytest-pdebench/baselines/<library>/<machine>.json``,
or the copies ``baselines_here.py`` moves aside). Prints one line per case and the median and
range of each ratio. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def by_case(path: Path) -> dict[str, dict]:
    entries = json.loads(path.read_text())["entries"]
    return {name.split("|")[0]: entry for name, entry in entries.items()}


def summary(label: str, ratios: list[float]) -> str:
    return f"{label}: median {statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before, after = by_case(args.before), by_case(args.after)
    common = sorted(set(before) & set(after))
    if not common:
        raise SystemExit("no case in both files")
    base, first = [], []
    print(f"{'case':48} {'t_base':>15} {'ratio':>6} {'t_first':>15} {'ratio':>6}")
    for case in common:
        b, a = before[case], after[case]
        base.append(a["t_base"] / b["t_base"])
        first.append(a["t_first_run"] / b["t_first_run"])
        print(
            f"{case:48} {b['t_base']:7.3f} {a['t_base']:7.3f} {base[-1]:6.3f} "
            f"{b['t_first_run']:7.3f} {a['t_first_run']:7.3f} {first[-1]:6.3f}"
        )
    print(f"{len(common)} cases; {summary('t_base after/before', base)}; {summary('t_first after/before', first)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
