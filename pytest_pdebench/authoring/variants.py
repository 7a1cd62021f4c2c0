"""``pdebench variants``: a suite's live variants for a seed written as a case file (the
variants a run would draw, ``live_variants.py``), for a person to read or ``--pde-validate``."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from ..cases import CaseRecord, load_cases, write_case_file
from ..live_variants import VariantError, variants


def write_variants(
    cases: Path,
    seed: int,
    output: Path,
    select: Callable[[CaseRecord], bool] | None = None,
    log: Callable[[str], None] = print,
) -> int:
    """``pdebench variants``: the variants of the records under ``cases`` (those ``select``
    keeps) for ``seed``, written to ``output`` as one JSONL file; says how many records
    were left as they are and why. Returns an exit code (1: a variant failed its checks)."""
    loaded = load_cases(cases)
    records = [record for _, _, record in loaded if select is None or select(record)]
    if not records:
        log(f"pdebench variants: no record of {cases} is selected (--family, --match): nothing to vary")
        return 1
    case_dir = Path(cases) if Path(cases).is_dir() else Path(cases).parent
    parts = output.parent / f"{output.stem}.parts"  # beside the file: the variants' solve-only parts
    try:
        made, kept = variants(records, seed, case_dir, parts=parts)
    except VariantError as exc:
        log(f"pdebench variants: {exc}")
        return 1
    for record in made:  # the file names its parts relative to its own folder, as suite.jsonl does
        part = record.evaluation_metadata.solve_only
        if part is not None:
            part.path = os.path.relpath(part.path, output.parent.resolve())
    output.parent.mkdir(parents=True, exist_ok=True)
    write_case_file(output, made)
    reasons = Counter(line.partition(": ")[2].partition(" | ")[0] for line in kept)
    left = ", ".join(f"{count} {why}" for why, count in sorted(reasons.items())) or "none"
    log(f"{len(made)} variants of {len(records)} records (seed {seed}) in {output}; left as they are: {left}")
    for line in kept:  # each refused part with the build's reason: a person may want to look
        if " | " in line:
            log(f"  {line.partition(' | ')[2]}")
    return 0
