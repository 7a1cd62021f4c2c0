"""The share of the selected items a session runs. ``--pde-sample=N``: up to N items of each
track's family and construction method, the same ones in every session (a first look, the
README's demo). ``--pde-shard=K/N``: one of N deterministic parts of the selected items, for
a Slurm array or a CI matrix without a scheduler process; ``pdebench merge`` joins the N
shards' JSON reports into the report of one run.

The split is a function of the selected items alone (after ``-k``/``-m``), never of their
order: items are dealt most expensive first (longest-processing-time scheduling), each to
the shard with the fewest items of its family among the shards whose expected time is
within two of the item's own costs of the lightest one. Over the bundled tracks that keeps
the longest shard's expected time within 2.2% of the mean up to 16 shards (5.7% at 32,
where single items weigh) and each family's share within 1 item across shards up to 8
(4 at 32) (``benchmarks/shard_balance.py``). Expected
cost of an item: its calibration baseline times the runs it makes, plus what an item costs
around its solver.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

# seconds an item costs besides its solves: the sandbox and gates; deal.II also compiles
ITEM_OVERHEAD_SEC = {"dealii": 15.0}
DEFAULT_ITEM_OVERHEAD_SEC = 1.0
UNKNOWN_BASELINE_SEC = 1.0
FAMILY_SLACK = 2.0  # how much expected time, in the item's own cost, family balance may cost


def sample(items: list, per_group: int) -> tuple[list, list]:
    """``--pde-sample``: (the items kept, those left out). Up to ``per_group`` items of each
    (track, family, construction method), spread evenly over the group's case ids in sorted
    order; an item without a record (a broken case's) is kept, to say what is wrong."""
    groups: dict[tuple, list] = defaultdict(list)
    for item in items:
        record = getattr(item, "record", None)
        if record is not None:
            key = (getattr(item, "library", ""), record.family, record.evaluation_metadata.construction_method)
            groups[key].append(item)
    chosen: set[int] = set()
    for members in groups.values():
        members.sort(key=lambda item: item.record.id)
        chosen.update(id(item) for item in members[:: max(1, len(members) // per_group)][:per_group])
    kept = [item for item in items if id(item) in chosen or getattr(item, "record", None) is None]
    return kept, [item for item in items if id(item) not in chosen and getattr(item, "record", None) is not None]


class ShardError(ValueError):
    """A shard option or a set of shard reports that cannot be used; the message says why."""


@dataclass(frozen=True)
class Shard:
    index: int  # 1..count
    count: int

    @classmethod
    def parse(cls, value: str) -> Shard:
        try:
            index, count = (int(part) for part in value.split("/"))
        except ValueError:
            raise ShardError(f"--pde-shard {value!r}: expected K/N, e.g. 2/8 (shard 2 of 8)") from None
        if count < 1 or not 1 <= index <= count:
            raise ShardError(f"--pde-shard {value!r}: K must be between 1 and N (N >= 1)")
        return cls(index, count)


def expected_cost(record, library: str, runs: int) -> float:
    stored = record.evaluation_metadata.thresholds.get(library)
    baseline = stored.t_base if stored else UNKNOWN_BASELINE_SEC
    return (runs + 1) * baseline + ITEM_OVERHEAD_SEC.get(library, DEFAULT_ITEM_OVERHEAD_SEC)


def assign(items: list[tuple[str, str, float]], count: int) -> dict[str, int]:
    """(node id, family, expected cost) of each selected item -> its shard (1..count)."""
    family_count: dict[str, list[int]] = {}
    total = [0.0] * count
    shard_of = {}
    for nodeid, family, cost in sorted(items, key=lambda item: (-item[2], item[0])):
        members = family_count.setdefault(family, [0] * count)
        # the shards within FAMILY_SLACK of this item's cost of the lightest: the one with the fewest of its family
        lightest = min(total)
        chosen = min(
            (k for k in range(count) if total[k] <= lightest + FAMILY_SLACK * cost),
            key=lambda k: (members[k], total[k], k),
        )
        members[chosen] += 1
        total[chosen] += cost
        shard_of[nodeid] = chosen + 1
    return shard_of


def selection_digest(nodeids) -> str:
    """Names the whole selection, so that merged shards can be checked against it."""
    return hashlib.sha256("\n".join(sorted(nodeids)).encode()).hexdigest()[:16]


def merge_reports(paths: list[Path]) -> dict:
    """One pytest JSON report from the reports of the N shards of a run; raises ShardError
    unless they are exactly the N shards of one selection."""
    reports = []
    for path in paths:
        try:
            report = json.loads(Path(path).read_text())
        except OSError as exc:
            raise ShardError(f"{path}: cannot read it ({exc.strerror}); pass each shard's --json-report file") from None
        except ValueError as exc:
            raise ShardError(f"{path}: not a JSON report ({exc}); pass each shard's --json-report file") from None
        shard = (report.get("pde") or {}).get("shard")
        if not shard:
            raise ShardError(f"{path}: not the report of a --pde-shard run (no pde.shard in it)")
        reports.append((Path(path), report, shard))
    first = reports[0][2]
    for path, _, shard in reports:
        if (shard["count"], shard["selection"]) != (first["count"], first["selection"]):
            raise ShardError(
                f"{path}: shard {shard['index']}/{shard['count']} of selection {shard['selection']}, "
                f"not of {first['count']} shards of selection {first['selection']}"
            )
    indices = sorted(shard["index"] for _, _, shard in reports)
    if indices != list(range(1, first["count"] + 1)):
        missing = sorted(set(range(1, first["count"] + 1)) - set(indices))
        twice = sorted({i for i in indices if indices.count(i) > 1})
        raise ShardError(
            f"need shards 1..{first['count']} once each: missing {missing or 'none'}, given twice {twice or 'none'}"
        )
    tests = [test for _, report, _ in sorted(reports, key=lambda r: r[2]["index"]) for test in report["tests"]]
    nodeids = [test["nodeid"] for test in tests]
    if len(nodeids) != first["selected"] or selection_digest(nodeids) != first["selection"]:
        raise ShardError(
            f"the shards hold {len(nodeids)} items, the selection {first['selected']}: a shard run "
            "was cut short or its report is not the last one written"
        )
    summary: dict = {"total": len(tests), "collected": len(tests)}
    for test in tests:
        summary[test["outcome"]] = summary.get(test["outcome"], 0) + 1
    merged = dict(reports[0][1])
    pde = {key: value for key, value in merged.get("pde", {}).items() if key != "shard"}
    pde["shards"] = [
        {
            "index": shard["index"],
            "report": str(path),
            "machine": report.get("pde", {}).get("machine"),
            "duration": report.get("duration"),
        }
        for path, report, shard in reports
    ]
    merged.update(
        tests=tests, summary=summary, pde=pde, duration=max(report.get("duration", 0) for _, report, _ in reports)
    )
    merged.pop("collectors", None)  # per shard; a merged run has no single collection
    return merged


def keep(items: list, shard: Shard, runs: int) -> tuple[list, list, dict]:
    """--pde-shard: (this shard's items, the others, which part of what selection: the
    report's ``shard``, which ``merge_reports`` checks) of the selected items."""
    cases = [item for item in items if hasattr(item, "record")]
    shard_of = assign(
        [(item.nodeid, item.record.family, expected_cost(item.record, item.library, runs)) for item in cases],
        shard.count,
    )
    mine = [item for item in items if shard_of.get(item.nodeid, 1) == shard.index]
    info = {
        "index": shard.index,
        "count": shard.count,
        "selected": len(items),
        "selection": selection_digest(item.nodeid for item in items),
    }
    return mine, [item for item in items if shard_of.get(item.nodeid, 1) != shard.index], info
