"""How even --pde-shard's split of the bundled tracks is (expected cost from the records'
stored baselines; nothing runs). Prints figures; asserts nothing.

    .venv/bin/python benchmarks/shard_balance.py [--shards 2,4,8,16,32] [--runs 3]
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from pytest_pdebench.cases import LIBRARIES, load_cases
from pytest_pdebench.shards import assign, expected_cost

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", default="2,4,8,16,32")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    records = [record for _, _, record in load_cases(REPO / "cases")]
    rows = []
    for library in LIBRARIES:
        items = [(f"{record.id}[{library}]", record.family, expected_cost(record, library, args.runs))
                 for record in records if library in record.supported_libraries]
        for count in map(int, args.shards.split(",")):
            split = assign(items, count)
            load, shares = Counter(), {}
            for nodeid, family, cost in items:
                load[split[nodeid]] += cost
                shares.setdefault(family, Counter())[split[nodeid]] += 1
            mean = sum(load.values()) / count
            spread = max(max(s.get(k, 0) for k in range(1, count + 1)) - min(s.get(k, 0) for k in range(1, count + 1))
                         for s in shares.values())
            rows.append([library, len(items), count, f"{max(load.values()) / mean:.3f}",
                         f"{max(load.values()) / 3600:.2f}", spread])
    print(tabulate(rows, headers=["library", "items", "shards", "max / mean time", "longest shard (h, expected)",
                                  "family spread (items)"]))


if __name__ == "__main__":
    main()
