"""``pdebench attack-audit``: the ansatz-fit attacker (``making/attack.py``) on every record of
a suite, resumable, with a table per family and the records under the margin."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..making.attack import ATTACK_MARGIN, attack, load_attacker


def read_attacks(path: Path) -> dict[str, dict]:
    """The rows an earlier audit wrote (``--out``), by case id: an interrupted audit goes on
    from there."""
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {row["case_id"]: row for row in rows}


def attack_audit(
    cases: Path,
    solver: Path | None = None,
    margin: float = ATTACK_MARGIN,
    out: Path | None = None,
    families: list[str] | None = None,
    log=print,
    lifting_sample: int = 0,
    rung: Path | None = None,
) -> int:
    """``pdebench attack-audit``: the attacker on every record under ``cases`` (those of
    ``families``), one line of progress each, each result appended to ``out`` as it comes
    (a rerun skips the records already there); then a table per family and the records whose
    margin is under ``margin``. With ``lifting_sample`` n, the lifting rung (``rung``) measures
    what lifting gains on the first n records of each family whose build priced it
    (``lifting_sample``). Returns 1 when there are such records, or a measured gain over
    LIFTING_GAIN_CEILING (the gate for new cases), else 0."""
    from collections import defaultdict

    from tabulate import tabulate

    from ..cases import load_cases
    from ..validation import LIFTING_GAIN_BOUND, SOLVE_ONLY_TAUS, lifting_gain, lifting_lines, u_m_miss

    chosen = [
        (path.parent, record) for path, _, record in load_cases(cases) if not families or record.family in families
    ]
    if not chosen:
        log(f"pdebench attack-audit: no record of {cases} is selected" + (" (--family)" if families else ""))
        return 1
    done = read_attacks(out) if out else {}
    attacker, started = load_attacker(solver), time.perf_counter()
    rows = []
    for index, (case_dir, record) in enumerate(chosen, 1):
        if record.id in done:
            rows.append(done[record.id])
            continue
        row = attack(attacker, record, case_dir, record.supported_libraries[0]).as_dict()
        rows.append(row)
        if out:
            with out.open("a") as handle:
                handle.write(json.dumps(row) + "\n")
        said = f"margin {row['margin']:.2f}" if row["margin"] is not None else row["reason"] or "no thresholds"
        log(f"[{index}/{len(chosen)}] {record.id}: {said} ({row['seconds'] or 0:.1f} s)")
    # what the threat model promises besides: u_m alone (the text's closed form) misses by
    # SOLVE_ONLY_TAUS x every track's tau_acc (validation.u_m_miss; static, from the record)
    u_m_alone = {record.id: min(misses.values()) for _, record in chosen if (misses := u_m_miss(record))}
    # and a solver that lifts u_m out of the text gains at most LIFTING_GAIN_BOUND x on all but
    # LIFTING_OVER_BOUND of a family, LIFTING_GAIN_CEILING x on every record (the build's
    # estimate, worst of its pricing settings; --lifting-sample and benchmarks/lifting_gain.py measure it)
    lifting = {record.id: gain for _, record in chosen if (gain := lifting_gain(record)) is not None}
    by_family: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_family[row["family"]].append(row)
    table = []
    for family, found in sorted(by_family.items()):
        margins = sorted(r["margin"] for r in found if r["margin"] is not None)
        alone = [u_m_alone[r["case_id"]] for r in found if r["case_id"] in u_m_alone]
        table.append(
            [
                family,
                len(found),
                sum(m <= 1 for m in margins),
                sum(m < margin for m in margins),
                f"{margins[len(margins) // 2]:.1f}" if margins else "-",
                sum(r["error"] is None for r in found),
                sum(m < SOLVE_ONLY_TAUS for m in alone),
                _median([lifting[r["case_id"]] for r in found if r["case_id"] in lifting]),
                sum(lifting.get(r["case_id"], 0.0) > LIFTING_GAIN_BOUND for r in found),
            ]
        )
    log("")
    log(
        tabulate(
            table,
            headers=[
                "family",
                "records",
                "attacker PASS",
                f"under {margin:g} x tau_acc",
                "median margin",
                "no answer",
                f"u_m alone under {SOLVE_ONLY_TAUS:g} x",
                "lifting gain (median)",
                f"over {LIFTING_GAIN_BOUND:g} x",
            ],
        )
    )
    short = sorted((m, case) for case, m in u_m_alone.items() if m < SOLVE_ONLY_TAUS)
    if short:
        log(
            f"\nu_m alone (the text's closed form) misses by under {SOLVE_ONLY_TAUS:g} x tau_acc "
            f"on {len(short)} records:"
        )
        for m, case in short:
            log(f"  {case}: {m:.2f} x its tightest track's tau_acc")
    said, breaking = lifting_lines(
        {r.id: (r.family, lifting.get(r.id)) for _, r in chosen if r.evaluation_metadata.solve_only is not None}
    )
    for line in said:
        log(("" if line.startswith("  ") else "\n") + line)
    under = sorted((r for r in rows if r["margin"] is not None and r["margin"] < margin), key=lambda r: r["margin"])
    log(
        f"\nmargin: the attacker's error over the record's largest tau_acc ({len(rows)} records, "
        f"{(time.perf_counter() - started) / 60:.1f} min); {len(under)} under {margin:g}"
    )
    for row in under:
        log(f"  {row['case_id']}: {row['margin']:.2f}")
    measured_over = lifting_sample and _lifting_sample(chosen, lifting_sample, rung, log)
    return 1 if under or short or breaking or measured_over else 0


def _lifting_sample(chosen, per_family: int, rung: Path | None, log) -> bool:
    """The lifting rung on the first ``per_family`` priced records of each family (plain and
    lifted at the build's worst P1/P2 setting); a table of both errors, the gain and the build's
    estimate. True when a measured gain is over LIFTING_GAIN_CEILING."""
    from tabulate import tabulate

    from ..making.lifting import measure, worst_setting
    from ..validation import LIFTING_GAIN_BOUND, LIFTING_GAIN_CEILING

    counts: dict[str, int] = {}
    sample = []
    for case_dir, record in chosen:
        if worst_setting(record) is not None and counts.get(record.family, 0) < per_family:
            counts[record.family] = counts.get(record.family, 0) + 1
            sample.append((case_dir, record))
    if not sample:
        log("\nlifting: no record of the selection has a priced part to measure")
        return False
    log(f"\nlifting, measured ({len(sample)} records: the rung plain and lifted at the build's worst setting)")
    results = []
    for index, (case_dir, record) in enumerate(sample, 1):
        result = measure(record, case_dir, rung)
        results.append(result)
        said = f"gain {result.gain:.2f}" if result.gain else result.reason
        log(f"[{index}/{len(sample)}] {record.id}: {said}")
    rows = [
        [r.case_id, r.setting, _figure(r.estimate), _figure(r.plain), _figure(r.lifted), _figure(r.gain)]
        for r in results
    ]
    headers = ["record", "setting", "estimate", "plain / tau_acc", "lifted / tau_acc", "gain"]
    log(tabulate(rows, headers=headers, disable_numparse=True))
    gains = [r.gain for r in results if r.gain]
    log(
        f"measured gain over {LIFTING_GAIN_BOUND:g} x on {sum(g > LIFTING_GAIN_BOUND for g in gains)} of "
        f"{len(gains)}, over {LIFTING_GAIN_CEILING:g} x on {sum(g > LIFTING_GAIN_CEILING for g in gains)}"
    )
    return any(g > LIFTING_GAIN_CEILING for g in gains)


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _median(values: list[float]) -> str:
    return f"{sorted(values)[len(values) // 2]:.2f}" if values else "-"
