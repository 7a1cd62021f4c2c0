"""Turning verdicts into tables (terminal summary, paper-style) and report metadata."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterable

from .cases import OUTCOMES


def outcome_table(verdicts: Iterable[dict], fmt: str = "simple") -> str:
    """Rows = PDE family, columns = outcome counts and pass rate, plus an overall row."""
    from tabulate import tabulate

    by_family: dict[str, Counter] = defaultdict(Counter)
    for verdict in verdicts:
        by_family[verdict["family"]][verdict["outcome"]] += 1
    rows, total = [], Counter()
    for family in sorted(by_family):
        counts = by_family[family]
        total.update(counts)
        rows.append(_row(family, counts))
    rows.append(_row("overall", total))
    return tabulate(rows, headers=["family", *OUTCOMES, "pass rate"], tablefmt=fmt, disable_numparse=True)


def _row(label: str, counts: Counter) -> list:
    n = sum(counts[o] for o in OUTCOMES)
    rate = f"{100.0 * counts['PASS'] / n:.1f}%" if n else "-"
    return [label, *(counts[o] for o in OUTCOMES), rate]


def tables_by_library(verdicts: list[dict], fmt: str = "simple") -> list[tuple[str, str]]:
    libraries = sorted({v["library"] for v in verdicts})
    return [(library, outcome_table([v for v in verdicts if v["library"] == library], fmt)) for library in libraries]


def stage_rates(verdicts: list[dict]) -> dict:
    """Execution, accuracy and runtime pass rates in the paper's staged sense."""
    n = len(verdicts)
    executed = [v for v in verdicts if v["outcome"] != "F-Exec"]
    accurate = [v for v in executed if v["outcome"] != "F-Acc"]
    passed = [v for v in accurate if v["outcome"] == "PASS"]
    rate = lambda part, whole: (len(part) / len(whole)) if whole else None  # noqa: E731
    return {"items": n, "exec_rate": rate(executed, verdicts), "acc_rate": rate(accurate, executed),
            "time_rate": rate(passed, accurate), "pass_rate": rate(passed, verdicts)}
