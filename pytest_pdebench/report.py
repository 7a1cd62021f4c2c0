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


def llm_usage(verdicts: list[dict]) -> str | None:
    """One line: model calls made (and cache hits), tokens and what the new calls cost."""
    used = [v["llm"] for v in verdicts if v.get("llm")]
    if not used:
        return None
    calls, hits = sum(u["calls"] for u in used), sum(u["cache_hits"] for u in used)
    tokens_in, tokens_out = sum(u["input_tokens"] for u in used), sum(u["output_tokens"] for u in used)
    cost = sum(u["cost_usd"] for u in used)
    attempts = sum(len(u["attempts"]) for u in used)
    return (f"model {used[0]['model']}: {calls} API calls, {hits} from the cache, {attempts} attempts over "
            f"{len(used)} items; {tokens_in:,} input + {tokens_out:,} output tokens; new calls cost ${cost:.2f}")


def stage_rates(verdicts: list[dict]) -> dict:
    """Execution, accuracy and runtime pass rates in the paper's staged sense."""
    n = len(verdicts)
    executed = [v for v in verdicts if v["outcome"] != "F-Exec"]
    accurate = [v for v in executed if v["outcome"] != "F-Acc"]
    passed = [v for v in accurate if v["outcome"] == "PASS"]
    rate = lambda part, whole: (len(part) / len(whole)) if whole else None  # noqa: E731
    return {"items": n, "exec_rate": rate(executed, verdicts), "acc_rate": rate(accurate, executed),
            "time_rate": rate(passed, accurate), "pass_rate": rate(passed, verdicts)}


def _percentiles(values: list[float]) -> list[str]:
    import numpy as np

    if not values:
        return ["-"] * 5
    return [f"{v:.1e}" for v in np.percentile(values, [0, 5, 50, 95, 100])]


def calibration_tables(rows: list[dict], fmt: str = "simple") -> tuple[str, str]:
    """Paper-style summaries of a calibration: per family (Table 6) and the e_base /
    tau_acc distribution (Table 7). ``rows``: family, method, e_base, t_base, tau_acc."""
    from tabulate import tabulate
    import numpy as np

    families = sorted({r["family"] for r in rows})
    per_family = []
    for family in families + ["all"]:
        part = [r for r in rows if family in ("all", r["family"])]
        errors = [r["e_base"] for r in part]
        per_family.append([family, len(part), sum(r["method"] == "manufactured_solution" for r in part),
                           sum(r["method"] == "reference_numerical" for r in part),
                           f"{np.median(errors):.1e}", f"{np.percentile(errors, 95):.1e}", f"{max(errors):.1e}",
                           f"{np.median([r['t_base'] for r in part]):.2f}"])
    family_table = tabulate(per_family, headers=["family", "cases", "MMS", "no-exact", "median e_base",
                                                 "95th e_base", "max e_base", "median t_base [s]"],
                            tablefmt=fmt, disable_numparse=True)
    groups = [("all cases", [r["e_base"] for r in rows]),
              ("manufactured", [r["e_base"] for r in rows if r["method"] == "manufactured_solution"]),
              ("no-exact, ref-based", [r["e_base"] for r in rows if r["method"] == "reference_numerical"]),
              ("tau_acc (all, after floor)", [r["tau_acc"] for r in rows]),
              ("t_base [s]", [r["t_base"] for r in rows])]
    distribution = tabulate([[name, len(values), *_percentiles(values)] for name, values in groups],
                            headers=["", "n", "min", "5th pct", "median", "95th pct", "max"], tablefmt=fmt,
                            disable_numparse=True)
    return family_table, distribution
