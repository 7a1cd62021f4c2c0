"""What a first session can cost at least, from a whole-track sitting of ``baselines_here.py``
(modes ``stored`` and ``first``), and what timing only a sample would give instead.
Prints figures; asserts nothing; runs nothing (it reads the rows file).

    .venv/bin/python benchmarks/first_session_floor.py benchmarks/results/dolfinx-baselines-whole-track-warm-pass.json

1. The floor with a timing of every item: the plain run's wall plus the kept ``t_base``
   windows shared over the session's workers (the timed run at the calibration setting, with
   no warm-up, no start and no harness around it), over the plain run's wall.
2. Timing a sample instead: per family, the median of kept / stored ``t_base`` over ``k``
   records drawn at random, and every other record's ``t_base`` derived as its stored one
   times that; printed as the timed one over the derived one (20 draws), beside the
   timed one over the stored one (what a perfect scale would leave).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

DRAWS = 20


def spread(ratios: list[float]) -> str:
    ordered = sorted(ratios)

    def at(p: float) -> float:
        return ordered[round(p * (len(ordered) - 1))]

    return (f"median {statistics.median(ordered):.2f}, 5th-95th percentile {at(0.05):.2f}-{at(0.95):.2f}, "
            f"range {ordered[0]:.2f}-{ordered[-1]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", type=Path)
    parser.add_argument("--per-family", type=int, nargs="+", default=[1, 2, 3, 5])
    args = parser.parse_args()
    lines = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
    head, rows = lines[0], lines[1:]
    stored = {r["case_id"]: r for r in rows if r["mode"] == "stored"}
    timed = {r["case_id"]: r for r in rows if r["mode"] == "first" and r["t_base_from"] == "kept"}
    common = sorted(set(stored) & set(timed))
    plain = head["wall_sec"]["stored"]
    windows = sum(timed[case]["t_base"] for case in common)
    print(f"{head['machine']} {head['revision']} {head['date']}, {len(common)} records, -n {head['jobs']}")
    print(f"plain run {plain / 60:.1f} min; first session {head['wall_sec']['first'] / 60:.1f} min "
          f"({head['wall_sec']['first'] / plain:.2f} x)")
    print(f"kept t_base windows {windows / 60:.1f} min over {head['jobs']} workers: "
          f"floor of a first session that times every item {(plain + windows / head['jobs']) / plain:.2f} x")
    ratio = {case: timed[case]["t_base"] / stored[case]["t_base"] for case in common}
    print(f"timed / stored t_base: {spread(list(ratio.values()))}")
    families: dict[str, list[str]] = {}
    for case in common:
        families.setdefault(stored[case]["family"], []).append(case)
    for k in args.per_family:
        found, timed_count = [], 0
        for draw in range(DRAWS):
            pick = random.Random(draw)
            scale, sampled = {}, set()
            for family, cases in families.items():
                chosen = pick.sample(cases, min(k, len(cases)))
                sampled.update(chosen)
                scale[family] = statistics.median(ratio[case] for case in chosen)
            timed_count = len(sampled)
            found += [ratio[case] / scale[stored[case]["family"]] for case in common if case not in sampled]
        cost = sum(timed[case]["t_base"] for case in common) * timed_count / len(common)
        print(f"{k} per family ({timed_count} timed, floor {(plain + cost / head['jobs']) / plain:.2f} x): "
              f"timed / derived t_base {spread(found)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
