"""The paper's analyses as tables of numbers (headers and rows), computed from rows of
``runs.py`` only. Rendering (Markdown, HTML, LaTeX) is ``render.py``'s.

Pass rates: each (system, library, case) may have been run more than once (repeats);
a case counts with its share of passing runs, and Wilson intervals are over all runs.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from pathlib import Path

from .. import gates
from ..report import Stages
from ..thresholds import (
    DEFAULT_ALPHA_ACC,
    DEFAULT_ALPHA_TIME,
    DEFAULT_TAU_MAX,
    DEFAULT_TAU_MIN,
    SENSITIVITY_ALPHA_ACC,
    SENSITIVITY_ALPHA_TIME,
    accuracy_threshold,
)
from . import stats
from .runs import LOCAL_BASELINES

OUTCOMES = ("PASS", "F-Exec", "F-Acc", "F-Time")
TEMPLATE_SUFFIX = " (template)"


class Table:
    """A titled table: headers, rows of cells (str or number), and a note under it."""

    def __init__(self, key: str, title: str, headers: list[str], rows: list[list], note: str = ""):
        self.key, self.title, self.headers, self.rows, self.note = key, title, headers, rows, note

    def to_dict(self) -> dict:
        return {"title": self.title, "headers": self.headers, "rows": self.rows, "note": self.note}


def label_groups(rows: list[dict]) -> list[dict]:
    """A system run on several machines, sandboxes, images or calibrations becomes one
    system per setting: results measured under other conditions are never pooled."""
    settings = defaultdict(set)
    for row in rows:
        settings[(row["system"], row["library"])].add(_setting(row))
    for row in rows:
        if len(settings[(row["system"], row["library"])]) > 1:
            row["system"] = f"{row['system']} [{_setting(row)}]"
    return rows


def _setting(row: dict) -> str:
    image = row["image"].removeprefix("sha256:")[:12]
    calibration = Path(row["calibration"]).name if row["calibration"].endswith(".json") else row["calibration"]
    sandbox = f"{row['sandbox']} (warm runner)" if row["runner"] == "warm" else row["sandbox"]
    cases = "" if row.get("cases", "published") == "published" else row["cases"]
    parts = (row["machine"], sandbox, image, calibration, cases)
    return ", ".join(part for part in parts if part and part != "?")


def grouped(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[key] for key in keys)].append(row)
    return dict(sorted(groups.items()))


def pass_rate(rows: list[dict]) -> dict:
    """Pass rate over cases (a repeated case counts with its share of passes), the
    Wilson interval over all runs, and the counts."""
    by_case = grouped(rows, "case_id")
    shares = [sum(r["outcome"] == "PASS" for r in runs) / len(runs) for runs in by_case.values()]
    passed = sum(r["outcome"] == "PASS" for r in rows)
    low, high = stats.wilson(passed, len(rows))
    return {
        "rate": sum(shares) / len(shares) if shares else 0.0,
        "low": low,
        "high": high,
        "passed": passed,
        "runs": len(rows),
        "cases": len(by_case),
    }


def _cell(result: dict) -> str:
    return f"{100 * result['rate']:.1f} [{100 * result['low']:.0f}, {100 * result['high']:.0f}] n={result['runs']}"


def family_tables(rows: list[dict]) -> list[Table]:
    """Tables 1 and 2: pass rate per family x system, one table per library."""
    tables = []
    for (library,), part in grouped(rows, "library").items():
        systems = sorted({r["system"] for r in part})
        body = []
        for (family,), family_rows in grouped(part, "family").items():
            by_system = grouped(family_rows, "system")
            body.append([family, *(_cell(pass_rate(by_system[(s,)])) if (s,) in by_system else "-" for s in systems)])
        by_system = grouped(part, "system")
        body.append(["overall", *(_cell(pass_rate(by_system[(s,)])) for s in systems)])
        tables.append(
            Table(
                f"families_{library}",
                f"Pass rate by family, {library} (%, Wilson 95% interval, runs)",
                ["family", *systems],
                body,
            )
        )
    return tables


def stage_table(rows: list[dict]) -> Table:
    """Figure 4's numbers: where items stop, and the gates' conditional pass rates."""
    body = []
    for (system, library), part in grouped(rows, "system", "library").items():
        counts, stages = Counter(r["outcome"] for r in part), Stages.of(part)
        n = len(part)
        cells = [f"{counts[o]} ({100 * counts[o] / n:.1f}%)" for o in OUTCOMES]
        agent_failures = sum(r.get("source_failure", False) for r in part)
        if agent_failures:  # counted apart: the agent, not its solver, failed
            cells[1] += f"; {agent_failures} agent failures"
        body.append(
            [
                system,
                library,
                n,
                *cells,
                _share(stages.executed, n),
                _share(stages.accurate, stages.executed),
                _share(stages.passed, stages.accurate),
            ]
        )
    return Table(
        "stages",
        "Stage breakdown",
        ["system", "library", "runs", *OUTCOMES, "executed", "accurate given executed", "fast given accurate"],
        body,
    )


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def exec_reason_table(rows: list[dict]) -> Table:
    failed = [r for r in rows if r["outcome"] == "F-Exec"]
    categories = sorted({r["exec_category"] for r in failed})
    body = []
    for (system, library), part in grouped(failed, "system", "library").items():
        counts = Counter(r["exec_category"] for r in part)
        body.append([system, library, len(part), *(counts[c] for c in categories)])
    return Table("exec_reasons", "F-Exec reasons by category", ["system", "library", "F-Exec", *categories], body)


def flag_table(rows: list[dict]) -> Table | None:
    """Items whose verdict carries a flag (a timed run that used more than one core's worth
    of CPU): the outcome stands, a reader should know."""
    flagged = [r for r in rows if r.get("flags")]
    if not flagged:
        return None
    return Table(
        "flags",
        "Flagged items (the outcome stands)",
        ["system", "library", "case", "outcome", "flag"],
        [[r["system"], r["library"], r["case_id"], r["outcome"], "; ".join(r["flags"])] for r in flagged],
    )


T_BASE_ORIGINS = ("stored", "stored elsewhere", "kept", "paired")  # evaluation.Verdict.t_base_from


def t_base_table(rows: list[dict]) -> Table | None:
    """Whose timing each item's t_base is, per system and track: a stored calibration of this
    machine or of another, a baseline kept on this machine, or the oracle paired with the item."""
    timed = [r for r in rows if r.get("t_base_from")]
    if not timed:
        return None
    body = []
    for (system, library), part in grouped(timed, "system", "library").items():
        counts = Counter(r["t_base_from"] for r in part)
        body.append([system, library, len(part), *(counts[origin] for origin in T_BASE_ORIGINS)])
    return Table("t_base_origins", "Whose timing t_base is", ["system", "library", "items", *T_BASE_ORIGINS], body)


def cost_table(rows: list[dict]) -> Table | None:
    """Table 10: tokens and cost per system (runs with a model only)."""
    priced = [r for r in rows if r["input_tokens"] is not None]
    if not priced:
        return None
    body = []
    for (system,), part in grouped(priced, "system").items():
        tokens_in = sum(r["input_tokens"] or 0 for r in part)
        tokens_out = sum(r["output_tokens"] or 0 for r in part)
        cost = total_cost(part)
        passes = sum(r["outcome"] == "PASS" for r in part)
        body.append(
            [
                system,
                len(part),
                f"{tokens_in:,}",
                f"{tokens_out:,}",
                f"{tokens_in / len(part):,.0f}",
                f"{tokens_out / len(part):,.0f}",
                f"{cost:.2f}",
                f"{cost / len(part):.4f}",
                f"{cost / passes:.4f}" if passes else "-",
            ]
        )
    return Table(
        "cost",
        "Tokens and cost",
        [
            "system",
            "items",
            "input tokens",
            "output tokens",
            "input / item",
            "output / item",
            "cost $",
            "$ / item",
            "$ / PASS",
        ],
        body,
        "Cost counts new model calls only; answers replayed from the cache cost nothing.",
    )


def passed_by_attempt(rows: list[dict], most: int) -> list[float]:
    """The share of rows that passed at attempt k or earlier, for k = 1..most."""
    return [
        sum(1 for r in rows if r["first_pass_attempt"] and r["first_pass_attempt"] <= k) / len(rows)
        for k in range(1, most + 1)
    ]


def total_cost(rows: list[dict]) -> float:
    """Dollars of new model calls (replayed answers cost nothing)."""
    return sum(r["cost_usd"] or 0.0 for r in rows)


def attempt_tables(rows: list[dict]) -> list[Table]:
    """Appendix L: pass rate after attempt 1..k, and how outcomes change between attempts."""
    multi = [r for r in rows if r["attempts"] > 1]
    if not multi:
        return []
    systems = {(r["system"], r["library"]) for r in multi}
    part = [r for r in rows if (r["system"], r["library"]) in systems]
    most = max(r["attempts"] for r in part)
    curve: list[list] = []
    transitions: Counter[tuple[str, str, str, str]] = Counter()
    for (system, library), group in grouped(part, "system", "library").items():
        curve.append(
            [system, library, len(group), *(f"{100 * share:.1f}%" for share in passed_by_attempt(group, most))]
        )
        for row in group:
            history = [a["outcome"] for a in row["attempt_history"]]
            for before, after in zip(history, history[1:]):
                transitions[(system, library, before, after)] += 1
    moves = [[s, lib, f"{a} -> {b}", n] for (s, lib, a, b), n in sorted(transitions.items())]
    return [
        Table(
            "attempts",
            "Pass rate after attempt k (feedback with the failure)",
            ["system", "library", "items", *(f"after {k}" for k in range(1, most + 1))],
            curve,
        ),
        Table(
            "attempt_transitions",
            "Outcome changes between consecutive attempts",
            ["system", "library", "change", "items"],
            moves,
        ),
    ]


def paired(rows: list[dict], first: str, second: str, library: str) -> dict | None:
    """Two systems on the cases both ran in one library (a repeated case: its first run)."""
    a = {
        r["case_id"]: r["outcome"] == "PASS" for r in reversed(rows) if r["system"] == first and r["library"] == library
    }
    b = {
        r["case_id"]: r["outcome"] == "PASS"
        for r in reversed(rows)
        if r["system"] == second and r["library"] == library
    }
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    x, y = [a[c] for c in shared], [b[c] for c in shared]
    only_first = sum(p and not q for p, q in zip(x, y))
    only_second = sum(q and not p for p, q in zip(x, y))
    difference, low, high = stats.paired_bootstrap(x, y)
    return {
        "first": first,
        "second": second,
        "library": library,
        "cases": len(shared),
        "first_rate": sum(x) / len(x),
        "second_rate": sum(y) / len(y),
        "both": sum(p and q for p, q in zip(x, y)),
        "only_first": only_first,
        "only_second": only_second,
        "neither": sum(not p and not q for p, q in zip(x, y)),
        "difference": difference,
        "low": low,
        "high": high,
        "p_mcnemar": stats.mcnemar_exact(only_first, only_second),
    }


COMPARISON_NOTE = (
    "Reading: McNemar's exact test on the cases only one of the two passed (discordant), at the "
    f"{stats.LEVEL:g} level. 'No difference shown' whenever p is not below it; with fewer than "
    f"{stats.mcnemar_fewest_discordant()} discordant cases no split can be significant (the least p with n of them "
    "is 2 x 0.5^n). The bootstrap interval only describes these cases; on few it is unreliable (one case "
    "gives [+100, +100])."
)


def comparison_table(rows: list[dict]) -> Table | None:
    """Every pair of systems within a library, on their shared cases."""
    body = []
    for (library,), part in grouped(rows, "library").items():
        systems = sorted({r["system"] for r in part})
        for first, second in itertools.combinations(systems, 2):
            result = paired(part, first, second, library)
            if result:
                body.append(_comparison_row(result))
    if not body:
        return None
    return Table(
        "comparisons",
        "Paired comparisons on shared cases",
        [
            "first",
            "second",
            "library",
            "cases",
            "first %",
            "second %",
            "only first",
            "only second",
            "difference (pp) [95% bootstrap]",
            "McNemar p",
            "reading",
        ],
        body,
        COMPARISON_NOTE,
    )


def comparison_reading(result: dict) -> str:
    """What a paired result supports: a system ahead only when McNemar's p is below the
    report's level; else "no difference shown", saying why when the cases cannot show one."""
    only_first, only_second = result["only_first"], result["only_second"]
    if result["p_mcnemar"] < stats.LEVEL:
        return f"{result['first'] if only_first > only_second else result['second']} ahead"
    discordant, needed = only_first + only_second, stats.mcnemar_fewest_discordant()
    if discordant == 0:
        return "no difference shown (both passed the same cases)"
    if discordant < needed:
        return (
            f"no difference shown ({discordant} discordant case{'s' if discordant > 1 else ''}: "
            f"at least {needed} are needed for any difference to be significant at {stats.LEVEL:g})"
        )
    return "no difference shown"


def _comparison_row(result: dict) -> list:
    return [
        result["first"],
        result["second"],
        result["library"],
        result["cases"],
        f"{100 * result['first_rate']:.1f}",
        f"{100 * result['second_rate']:.1f}",
        result["only_first"],
        result["only_second"],
        f"{100 * result['difference']:+.1f} [{100 * result['low']:+.1f}, {100 * result['high']:+.1f}]",
        f"{result['p_mcnemar']:.3g}",
        comparison_reading(result),
    ]


def live_table(rows: list[dict]) -> Table | None:
    """Each system's score on the published records and on live variants, side by side
    (Wilson 95% intervals): a score that comes from having seen the published answers drops
    on the variants. Beside them, its score on the published records the variants were
    drawn from, and its sibling rate (of the items that passed, the share whose solver passes a
    second variant no prompt showed; a column, not a gate)."""
    if not any(r.get("cases", "published") != "published" or r.get("sibling") for r in rows):
        return None
    body = []
    for (library, system), part in grouped(rows, "library", "system_name").items():
        published = [r for r in part if r["cases"] == "published"]
        for (cases, calibration), group in grouped(part, "cases", "calibration").items():
            same = {r["case_id"] for r in group}
            beside = [r for r in published if r["case_id"] in same] if cases != "published" else []
            siblings = [r["sibling"] for r in group if r["sibling"] is not None]
            body.append(
                [
                    system,
                    library,
                    cases,
                    {"paired oracle": "paired", LOCAL_BASELINES: "local"}.get(calibration, "stored"),
                    _cell(pass_rate(group)),
                    _cell(pass_rate(beside)) if beside else "-",
                    f"{siblings.count('PASS')}/{len(siblings)}" if siblings else "-",
                ]
            )
    return Table(
        "live",
        "Published records and live variants, side by side (%, Wilson 95% interval, runs)",
        ["system", "library", "cases", "baseline", "score", "published, same records", "sibling passes"],
        body,
        "variants exist for records with an exact solution only (numerical references are not varied); "
        "sibling passes: of the items that passed, how many passed a second variant with the solver unchanged",
    )


def template_table(rows: list[dict]) -> Table | None:
    """Appendix M: a model with the template prompt against the same model single-shot."""
    body = []
    for (library,), part in grouped(rows, "library").items():
        systems = {r["system"] for r in part}
        for system in sorted(s for s in systems if s.endswith(TEMPLATE_SUFFIX)):
            single = system.removesuffix(TEMPLATE_SUFFIX)
            result = paired(part, system, single, library) if single in systems else None
            if result:
                body.append(_comparison_row(result))
    if not body:
        return None
    return Table(
        "template",
        "Template prompt against single-shot, same model, paired on cases",
        [
            "template",
            "single-shot",
            "library",
            "cases",
            "template %",
            "single %",
            "only template",
            "only single",
            "difference (pp) [95% bootstrap]",
            "McNemar p",
            "reading",
        ],
        body,
        COMPARISON_NOTE,
    )


def pass_at_k_table(rows: list[dict]) -> Table | None:
    """Cases run more than once by one system: the unbiased pass@k."""
    body = []
    for (system, library), part in grouped(rows, "system", "library").items():
        by_case = grouped(part, "case_id")
        least = min(len(runs) for runs in by_case.values())
        if least < 2:
            continue
        values = []
        for k in range(1, least + 1):
            estimates = [
                stats.pass_at_k(len(runs), sum(r["outcome"] == "PASS" for r in runs), k) for runs in by_case.values()
            ]
            values.append(f"{100 * sum(estimates) / len(estimates):.1f}")
        body.append([system, library, len(by_case), least, *values])
    if not body:
        return None
    most = max(row[3] for row in body)
    return Table(
        "pass_at_k",
        "pass@k over repeated runs (unbiased estimator)",
        ["system", "library", "cases", "runs per case", *(f"pass@{k}" for k in range(1, most + 1))],
        [row + ["-"] * (4 + most - len(row)) for row in body],
    )


# --- re-gating from stored numbers (Appendix E) ---


def regate(row: dict, alpha_acc: float, alpha_time: float) -> str | None:
    """The outcome under other multipliers, from the stored numbers; None when they do
    not decide it (an item that failed the accuracy gate without being timed, or a run
    that did not store e_base)."""
    if row["outcome"] == "F-Exec":
        return "F-Exec"
    tau_acc = _tau_acc(row, alpha_acc)
    if tau_acc is None or row["t_base"] is None:
        return None
    return gates.outcome_under(
        row["outcome"],
        row["error"],
        row.get("timed_errors") or [],
        row.get("timed_failure"),
        row["t_agent"],
        tau_acc,
        alpha_time * row["t_base"],
        row.get("t_first_run"),
        alpha_time * row["t_first_base"] if row.get("t_first_base") else None,
    )


def _tau_acc(row: dict, alpha_acc: float) -> float | None:
    if row["e_base"] is not None:
        tau_min = row["tau_min"] if row["tau_min"] is not None else DEFAULT_TAU_MIN
        tau_max = row["tau_max"] if row["tau_max"] is not None else DEFAULT_TAU_MAX
        return accuracy_threshold(row["e_base"], alpha_acc, tau_min, tau_max)
    stored = row["alpha_acc"] if row["alpha_acc"] is not None else DEFAULT_ALPHA_ACC
    return row["tau_acc"] if alpha_acc == stored else None  # an older run: only its own threshold is known


def sensitivity(rows: list[dict], alpha_acc: float, alpha_time: float) -> dict:
    outcomes = [regate(row, alpha_acc, alpha_time) for row in rows]
    passed = sum(o == "PASS" for o in outcomes)
    unknown = sum(o is None for o in outcomes)
    return {"passed": passed, "unknown": unknown, "runs": len(rows), "rate": passed / len(rows) if rows else 0.0}


def sensitivity_tables(rows: list[dict]) -> list[Table]:
    """Pass rate on the paper's grids: alpha_acc varied at alpha_time = 3, and alpha_time at
    alpha_acc = 10. A cell with items the stored numbers cannot decide shows its lower bound."""
    tables = []
    for key, name, grid, fixed in (
        ("alpha_acc", "alpha_acc", SENSITIVITY_ALPHA_ACC, DEFAULT_ALPHA_TIME),
        ("alpha_time", "alpha_time", SENSITIVITY_ALPHA_TIME, DEFAULT_ALPHA_ACC),
    ):
        body = []
        for (system, library), part in grouped(rows, "system", "library").items():
            cells = []
            for value in grid:
                alphas = (value, fixed) if key == "alpha_acc" else (fixed, value)
                result = sensitivity(part, *alphas)
                cell = (
                    "-"
                    if result["unknown"] == result["runs"]
                    else f"{'>= ' if result['unknown'] else ''}{100 * result['rate']:.1f}"
                )
                cells.append(cell)
            body.append([system, library, len(part), *cells])
        default = DEFAULT_ALPHA_ACC if key == "alpha_acc" else DEFAULT_ALPHA_TIME
        headers = [f"{name}={value:g}" + (" (default)" if value == default else "") for value in grid]
        tables.append(
            Table(
                f"sensitivity_{key}",
                f"Pass rate (%) against {name}",
                ["system", "library", "runs", *headers],
                body,
                "'>=': the stored numbers do not decide some items (failed the accuracy gate untimed, or "
                "a run that stored no e_base): counted as failing; '-': none decided.",
            )
        )
    return tables
