"""`pdebench calibration-summary`: what this machine's calibration of a library looks like
beside the paper (its Tables 6 and 7) and beside the targets for the paper's difficulty (set
on the DOLFINx track), before any run is judged with it: e_base, tau_acc and t_base per
family and their distribution, when the baselines were measured, and whether the strong
oracle (the anchor that must pass every case) has room under tau_acc and tau_time.
"""

from __future__ import annotations

from pathlib import Path

from ..calibration import CalibrationStore, reference_build_gap
from ..cases import load_cases
from ..report import calibration_tables
from ..sources.folder import oracle_fingerprint
from ..speed import baselines_line
from ..thresholds import Alphas


def strong_figures(entry: dict | None) -> dict:
    """The strong oracle's error, time and outcome from its entry (None where not measured)."""
    entry = entry or {}
    return {
        "e_strong": entry.get("e_strong"),
        "t_strong": entry.get("t_strong"),
        "outcome_strong": entry.get("outcome"),
    }


def calibration_rows(cases: Path, library: str, store: CalibrationStore) -> list[dict]:
    """One row per record under ``cases`` that ``library`` supports and ``store`` (or the
    record's materialized thresholds) calibrates: family, construction method, e_base,
    t_base, tau_acc, tau_time, id, the strong oracle's figures (current only when measured
    with today's oracle code) and the error its reference build measured."""
    rows = []
    for _, _, record in load_cases(cases):
        thresholds = store.thresholds(record, library, Alphas())
        if thresholds is not None and library in record.supported_libraries:
            rows.append(
                {
                    "family": record.family,
                    "method": record.evaluation_metadata.construction_method,
                    "e_base": thresholds.e_base,
                    "t_base": thresholds.t_base,
                    "tau_acc": thresholds.tau_acc,
                    "tau_time": thresholds.tau_time,
                    "id": record.id,
                    **strong_figures(store.strong_oracle(record, library, oracle_fingerprint(record, library))),
                    "e_strong_build": (reference_build_gap(record, library) or {}).get("e_strong"),
                }
            )
    return rows


def calibration_summary(cases: Path, library: str, calibrations: Path, fmt: str = "simple") -> str | None:
    """The summary of this machine's calibration of ``library`` over the records under
    ``cases`` (tabulate format ``fmt``), or None when no record is calibrated for it."""
    store = CalibrationStore(calibrations)
    rows = calibration_rows(cases, library, store)
    if not rows:
        return None
    family_table, distribution, targets = calibration_tables(rows, fmt)
    # a row's thresholds come from this machine's calibration file or, failing that, from
    # the record's stored ones (measured elsewhere: no date or probe of this machine's)
    entries = store.entries(library)
    own = {row["id"]: entries[row["id"]] for row in rows if row["id"] in entries}
    stored = len(rows) - len(own)
    elsewhere = f"; {stored} from the records' stored thresholds, measured elsewhere" if stored else ""
    return (
        f"{library} on {store.machine_for(library)}: {len(rows)} calibrated cases\n\n{family_table}\n\n{distribution}"
        f"\n\n{baselines_line(own)}{elsewhere}"
        f"\n\nagainst the paper (the targets the suite was built to, set for the DOLFINx track):\n{targets}"
    )
