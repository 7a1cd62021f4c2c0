"""``pdebench build-solve-only``: the solve-only part of every manufactured record of a suite
(``making/solve_only.py`` builds one), one file per record so that a build resumes, then one
case file; ``--discard`` hands the records that keep none back to the suite generator."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from ..cases import CaseRecord
from ..making.part_field import forcing_without_part
from ..making.solve_only import ORACLE_FAILED, build_part, write_entry

# ---- the whole suite: one file per record (resumable, two processes side by side), then one case file ----


def build_parts(
    cases: Path,
    out: Path,
    oracle_dir: Path,
    families: list[str] | None = None,
    shard=(0, 1),
    log=print,
    retry: bool = False,
    again: Collection[str] = (),
) -> tuple[int, int]:
    """``pdebench build-solve-only CASES --out OUT``: the solve-only part of every manufactured
    record of CASES (only ``families`` when given; shard ``(i, n)`` takes every n-th from the
    i-th), each into ``OUT/parts/<id>.json`` (the updated record, or why it was not kept)
    and ``OUT/references/``. A record with a part file already is skipped, so an interrupted
    build resumes; ``assemble`` writes the case file. The records named in ``again`` have
    their part taken off and built anew. Every build keeps the bundled attacker
    ATTACK_MARGIN x tau_acc away (``build_part``). Returns (kept, tried)."""
    from ..cases import iter_case_file
    from ..making.attack import builds_attacker

    parts = Path(out) / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    records = (without_part(record) if record.id in again else record for _, record in iter_case_file(Path(cases)))
    manufactured = [
        record
        for record in records
        if record.evaluation_metadata.construction_method == "manufactured_solution"
        and record.evaluation_metadata.solve_only is None
        and (not families or record.family in families)
    ]
    # the share is priced with the record's DOLFINx baseline: a record not calibrated yet waits
    uncalibrated = [record.id for record in manufactured if "dolfinx" not in record.evaluation_metadata.thresholds]
    if uncalibrated:
        log(
            f"{len(uncalibrated)} records have no DOLFINx thresholds yet (calibrate them first): "
            + ", ".join(uncalibrated)
        )
    candidates = [record for record in manufactured if record.id not in uncalibrated][
        shard[0] :: shard[1]
    ]  # the shard before what is built: two processes never share a record
    todo = [record for record in candidates if retry_it(parts / f"{record.id}.json", retry)]
    log(f"{len(todo)} records to build")
    attacker = builds_attacker(log) if todo else None
    kept = 0
    for index, record in enumerate(todo, start=1):
        outcome = build_part(record, Path(out), oracle_dir, attacker)
        kept += outcome.kept
        write_entry(parts / f"{record.id}.json", record, outcome)
        log(
            f"[{index}/{len(todo)}] {record.id}: {outcome.reason}, share {outcome.share or 0:.3g}, "
            f"reference error {outcome.reference_error or 0:.2g}, attacker margin "
            f"{'-' if outcome.attack_margin is None else format(outcome.attack_margin, '.2f')}, {outcome.seconds:.0f} s"
        )
    return kept, len(todo)


def without_part(record: CaseRecord, calibrated: bool = True) -> CaseRecord:
    """The record as generated: its part's forcing term taken off, no part, and its thresholds
    as the baseline had them then (each e_base divided by the baseline ratio the build
    measured, tau_acc from it: a part built again is priced against the bare record's).
    ``calibrated=False``: a part file's record, whose thresholds are still the bare record's
    (a build does not calibrate), keeps them."""
    from ..thresholds import accuracy_threshold

    part = record.evaluation_metadata.solve_only
    if part is None:
        return record
    data = record.case_spec_dict()
    data["pde"]["forcing"]["value"] = forcing_without_part(data["pde"]["forcing"]["value"], part.forcing)
    meta = record.evaluation_metadata.model_copy(update={"solve_only": None}, deep=True)
    ratio = part.build.get("measured_baseline_ratio") or part.build.get("predicted_baseline_ratio") or 1.0
    ratio = ratio if calibrated else 1.0
    config = record.evaluation_config
    for thresholds in meta.thresholds.values():
        thresholds.e_base /= ratio
        thresholds.tau_acc = accuracy_threshold(thresholds.e_base, config.alpha_acc, config.tau_min, config.tau_max)
    spec = type(record.case_spec).model_validate(data)
    return record.model_copy(update={"case_spec": spec, "evaluation_metadata": meta})


def retry_it(part: Path, retry: bool) -> bool:
    """Whether to build a record: it has no part file yet, or (``retry``) one that kept nothing."""
    return not part.exists() or (retry and not json.loads(part.read_text())["kept"])


def assemble(cases: Path, out: Path, log=print) -> tuple[int, list[str]]:
    """``OUT/suite.jsonl``: CASES with each record that has a kept part replaced by its built
    form (the rest as they were); the references beside it are OUT's. Returns (replaced,
    the manufactured records without a part, with their reasons)."""
    from ..cases import iter_case_file, write_case_file
    from .rebuilds import same_case

    parts = Path(out) / "parts"
    records, missing = [], []
    replaced = 0
    for _, record in iter_case_file(Path(cases)):
        part = parts / f"{record.id}.json"
        entry = json.loads(part.read_text()) if part.exists() else None
        if entry and entry["kept"] and same_case(built := CaseRecord.model_validate(entry["record"]), record):
            # the part and the forcing that drives it; the rest (libraries, settings, thresholds)
            # as the record has it now: a regenerated suite may have dealt it another library
            meta = record.evaluation_metadata.model_copy(update={"solve_only": built.evaluation_metadata.solve_only})
            record = record.model_copy(update={"case_spec": built.case_spec, "evaluation_metadata": meta})
            replaced += 1
        elif record.evaluation_metadata.construction_method == "manufactured_solution" and (
            record.evaluation_metadata.solve_only is None
        ):
            why = "not built" if not entry else entry["reason"] if not entry["kept"] else "built for another draw"
            missing.append(f"{record.id}: {why}")
        records.append(record)
    write_case_file(Path(out) / "suite.jsonl", records)
    log(f"{Path(out) / 'suite.jsonl'}: {replaced} records with a solve-only part, {len(missing)} manufactured without")
    return replaced, missing


def discard_without_part(cases: Path, out: Path, discarded: Path | None = None, log=print) -> list[str]:
    """``--discard``: the manufactured records of CASES whose build kept no part (the
    oracle's own failures aside: another try may do), and those a family has over 2 x
    (the build's estimates and other tracks' measurements alike) beyond its 5% of them
    (``validation.beyond_allowance``: the largest gains go), join the suite generator's
    discarded candidates with why, so that ``pdebench build-suite`` deals the family's next
    combination in their place. Returns the ids added."""
    import tomllib

    from ..cases import iter_case_file
    from ..making.suite import DISCARDED_FILE
    from ..validation import LIFTING_GAIN_BOUND, beyond_allowance, lifting_gain

    path = Path(discarded or DISCARDED_FILE)
    with open(path, "rb") as handle:
        known = tomllib.load(handle).get("discarded", {})
    reasons, gains = {}, {}
    for _, record in iter_case_file(Path(cases)):
        part = Path(out) / "parts" / f"{record.id}.json"
        entry = json.loads(part.read_text()) if part.is_file() else None
        if entry and not entry["kept"] and not entry["reason"].startswith(ORACLE_FAILED):
            reasons[record.id] = "no solve-only part: " + entry["reason"]
        elif entry and entry["kept"]:
            gains[record.id] = (record.family, lifting_gain(CaseRecord.model_validate(entry["record"])))
    for case, gain in beyond_allowance(gains).items():
        reasons[case] = (
            f"lifting u_m out of the text gains {gain:.2f} x, over {LIFTING_GAIN_BOUND:g} x on more of the "
            f"family's records than its 5%"
        )
    added = [case for case in reasons if case not in known]
    with open(path, "a", encoding="utf-8") as handle:  # one TOML line each: a JSON string is a TOML one
        handle.writelines(f"{json.dumps(case)} = {json.dumps(reasons[case])}\n" for case in added)
    log(f"{path}: {len(added)} records discarded (no solve-only part, or lifting over the family's allowance)")
    return added


# ---- parts priced again with what other tracks' oracles measure (benchmarks/lifting_tracks.py) ----


def measured_pairs(files: list[Path]) -> dict[str, list[dict]]:
    """Case id -> the pairs ``benchmarks/lifting_tracks.py`` wrote for it (the track's oracle
    plain and on w alone at one setting), from every file; a file that is no such output
    stops here, naming it."""
    pairs: dict[str, list[dict]] = {}
    for path in files:
        try:
            found = json.loads(Path(path).read_text())
            library = found["library"]
            for pair in found["pairs"]:
                pairs.setdefault(pair["case_id"], []).append({**pair, "library": library})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"{path}: not a lifting_tracks.py result ({type(exc).__name__}: {exc})") from exc
    return pairs


def reprice_with_tracks(out: Path, oracle_dir: Path, files: list[Path], shard=(0, 1), log=print) -> tuple[int, int]:
    """``pdebench build-solve-only CASES --out OUT --track-gains FILE``: each kept part of OUT
    that another track's oracle measured (FILE: ``benchmarks/lifting_tracks.py``'s pairs) gets
    that measurement as a pricing row (``pricing.track_row``) and its gain beside the build's
    own estimates (which ``--pde-validate`` reads). A part measured over TRACK_GAIN_AGAIN is
    built again with the row, as it was built (``solve_only.PricedAgain``), once: measured
    again, the new part only has its figure written down. Returns (kept, built again)."""
    from ..making.attack import builds_attacker
    from ..making.pricing import TRACK_GAIN_AGAIN, Pricing, track_row
    from ..making.solve_only import PricedAgain, SolveOnlyOutcome

    measured = measured_pairs(files)
    todo = sorted(measured)[shard[0] :: shard[1]]
    attacker, kept, rebuilt = None, 0, 0
    for index, case_id in enumerate(todo, start=1):
        said = f"[{index}/{len(todo)}] {case_id}:"
        path = Path(out) / "parts" / f"{case_id}.json"
        entry = json.loads(path.read_text()) if path.is_file() else {}
        record = CaseRecord.model_validate(entry["record"]) if entry.get("kept") else None
        part = record.evaluation_metadata.solve_only if record is not None else None
        priced = Pricing.from_build(part.build) if part is not None else None
        if record is None or part is None or priced is None:
            log(f"{said} no kept, priced part in {path.parent}: left as it is")
            continue
        pairs = _of_this_build(measured[case_id], part)
        if not pairs:
            log(f"{said} measured before its part was built again: measure it again")
            continue
        rows = [track_row(p["library"], p["setting"], p["plain_error"],
                          p["lifted_error_of_w"] * p["norm_w"] / p["norm_u"], part.share)
                for p in pairs]  # fmt: skip
        gains = Pricing(rows).gains(part.share)  # each the measured plain / lifted
        if max(gains.values()) <= TRACK_GAIN_AGAIN or any(
            label in (part.build.get("pricing") or {}) for label in gains
        ):
            part.build["lifting_gain"] = {
                **part.build.get("lifting_gain", {}),
                **{k: round(g, 3) for k, g in gains.items()},
            }
            part.build["pricing"] = priced.with_rows(rows).as_build()
            outcome = SolveOnlyOutcome(case_id, True, "measured, kept as it is", part.share)
        else:
            attacker = attacker or builds_attacker(log)
            record = without_part(record, calibrated=False)
            # every track's rows price it: those written down before (delta_1's error does not
            # depend on the scale) and the new ones
            tracks = Pricing([row for row in priced.rows if "library" in row[1]]).with_rows(rows).rows
            outcome = build_part(record, Path(out), oracle_dir, attacker, PricedAgain.of(part.build, tracks))
            rebuilt += 1
        kept += outcome.kept
        outcome.seconds = outcome.seconds or float(entry.get("seconds", 0.0))
        write_entry(path, record, outcome)
        now = f", worst estimate now {outcome.worst_gain:.2f}" if outcome.lifting_gain else ""
        log(f"{said} measured {', '.join(f'{k} {g:.2f}' for k, g in gains.items())}; {outcome.reason}{now}")
    return kept, rebuilt


def _of_this_build(pairs: list[dict], part) -> list[dict]:
    """The pairs that measured this build of the part: those naming its digest, and those naming
    none (measured before pairs did) whose row the build does not have yet (else it was built
    again with that row since, and the pair measured its predecessor)."""
    rows = part.build.get("pricing") or {}
    return [
        pair
        for pair in pairs
        if pair.get("digest", part.digest) == part.digest
        and ("digest" in pair or f"{pair['library']} {pair['setting']}" not in rows)
    ]
