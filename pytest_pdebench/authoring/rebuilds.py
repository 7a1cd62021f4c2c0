"""Regenerating records without losing what was built for them: references, calibrations,
calibration settings (refined, coarsened, adjusted per library after the draw) and
solve-only parts of records whose case, as drawn, and exact solution did not change
(``pdebench build-suite``, ``build-starter``, ``import-upstream``, the solve-only builds).
Offline: sympy compares expressions that differ in their text only."""

from __future__ import annotations

import re
from pathlib import Path

from ..cases import CalibrationSetting, CaseRecord, iter_case_file, write_case_file


def same_case(before: CaseRecord, after: CaseRecord) -> bool:
    """Same case as drawn (a solve-only part's term aside) and exact solution, where
    expressions may differ in their text only: sympy prints the terms of a sum in an order
    that can change between processes (9 of 645 records came out reordered in one
    rebuild), which must not drop their baselines."""
    old = [_as_drawn(before), before.evaluation_metadata.manufactured_solution]
    new = [_as_drawn(after), after.evaluation_metadata.manufactured_solution]
    return old == new or _equal_trees(old, new)


def _as_drawn(record: CaseRecord) -> dict:
    """The case as its design draws it: a solve-only part's term taken off the forcing."""
    spec = record.case_spec_dict()
    part = record.evaluation_metadata.solve_only
    if part is None or not spec["pde"].get("forcing"):
        return spec
    value, extra = spec["pde"]["forcing"]["value"], part.forcing
    from .. import expressions

    def less(text, term) -> str:
        return expressions.expression_to_string(
            expressions.parse_expression(str(text)) - expressions.parse_expression(str(term))
        )

    if isinstance(value, list):
        forcing: str | list[str] = [less(v, e) for v, e in zip(value, extra if isinstance(extra, list) else [extra])]
    else:
        forcing = less(value, extra)
    spec["pde"]["forcing"] = {**spec["pde"]["forcing"], "value": forcing}
    return spec


EXPAND_OPS = 5_000  # larger differences are not expanded (a changed case: seconds of sympy for nothing)


def _equal_trees(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal_trees(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal_trees(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str) and a != b:
        import sympy as sp

        from .. import expressions

        try:  # sympy's trees are canonical: equal expressions compare equal whatever the text order
            first, second = (expressions.parse_expression(e, allow=("u",)) for e in (a, b))
        except ValueError:  # ExpressionError included
            return False
        # a sum printed again after a term was added and taken off (a solve-only part's) may
        # come back with its factors distributed: equal once expanded (milliseconds here)
        return first == second or (sp.count_ops(first - second) < EXPAND_OPS and sp.expand(first - second) == 0)
    return a == b


# one step of a record's calibration_config source (authoring/calibration_configs.py writes
# them); a library named after "for" is the only one the step applies to
SETTING_STEP = re.compile(r"(refined|coarsened|adjusted)(?: for (\w+))? from P(\d)/(\d+) to P(\d)/(\d+)")


def setting_steps(source: str) -> list[tuple[str, str | None, tuple[int, int], tuple[int, int]]]:
    """(kind, only library or None, (degree, cells) before, after) of each step, in order."""
    return [
        (kind, only or None, (int(a), int(b)), (int(c), int(d)))
        for kind, only, a, b, c, d in SETTING_STEP.findall(source)
    ]


def with_shared_steps(setting: dict, source: str) -> dict:
    """SETTING (a library's drawn one) after the steps of SOURCE that every library shares
    and that start where it stands, in order: the others' refinements, for a library the
    record gained since they were made."""
    for _, only, before, after in setting_steps(source):
        if only is None and (setting["element_degree"], setting["cells_per_side"]) == before:
            setting = {**setting, "element_degree": after[0], "cells_per_side": after[1]}
    return setting


def carry_over_built_fields(records: list[CaseRecord], previous: list[CaseRecord]) -> None:
    """Regenerating records must not lose what was built for them since: references,
    calibrations, calibration settings (refined, coarsened or adjusted per library after
    the draw) and solve-only parts (with the forcing that drives them) of records whose
    case, as drawn, and exact solution did not change are kept."""
    old = {r.id: r for r in previous}
    for record in records:
        before = old.get(record.id)
        if before and same_case(before, record):
            # the stored text, so the fingerprints its baselines carry still match
            record.case_spec = before.case_spec.model_copy(deep=True)
            record.evaluation_metadata.manufactured_solution = before.evaluation_metadata.manufactured_solution
            drawn = record.evaluation_metadata.calibration_config
            for name in ("thresholds", "reference_path", "reference_config", "calibration_config", "solve_only"):
                if name != "calibration_config" or getattr(before.evaluation_metadata, name) is not None:
                    setattr(record.evaluation_metadata, name, getattr(before.evaluation_metadata, name))
            kept = record.evaluation_metadata.calibration_config
            if drawn is not None and kept is not None and set(drawn.settings) - set(kept.settings):
                # a library the record gained since (the generator deals libraries by position):
                # its fresh draw moved by the steps the others took together, which their own
                # baselines were calibrated after; the others as they were
                gained = {
                    name: CalibrationSetting.model_validate(
                        with_shared_steps(setting.model_dump(exclude_none=True), kept.source)
                    )
                    for name, setting in drawn.settings.items()
                    if name not in kept.settings
                }
                settings = {**gained, **kept.settings}
                record.evaluation_metadata.calibration_config = kept.model_copy(update={"settings": settings})


def rewrite_case_file(path: Path, records: list[CaseRecord]) -> None:
    """Write regenerated records, keeping what was built for unchanged ones since."""
    path = Path(path)
    if path.is_file():
        carry_over_built_fields(records, [record for _, record in iter_case_file(path)])
    path.parent.mkdir(parents=True, exist_ok=True)
    write_case_file(path, records)
