"""Numerical references for cases without an exact solution (paper, Appendix F).

For each such record the oracle runs at three levels of its own resolution (1/2, 1, 2;
see refinement.py). The finest field is the reference. A candidate is kept only if the
coarse-to-fine checks hold:

    e_base estimate  ||u_1 - u_2|| / ||u_2||  < 0.05
    g12 = ||u_1 - u_2||  <  g01 = ||u_0 - u_1||     (the levels converge)

unless the gaps are at rounding level (the elements represent the solution exactly).
A reference that is ~0 is rejected: relative errors against it would be noise. So is
one the strong oracle (level 1) does not reach within REFERENCE_AGREEMENT x tau_max:
no threshold under the cap could then tell the oracle's own error from the reference's
(unresolved layers, for instance), and the strong oracle must PASS every case.

The reference is stored as a compressed float32 ``.npz`` beside the case file under
``references/`` (evaluator-only: never mounted into a sandbox), and the record gets
``reference_path`` and the check figures in ``reference_config``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from ..calibration import REFERENCE_AGREEMENT, CalibrationStore
from ..cases import CaseRecord, iter_case_file, load_cases, write_case_file
from ..evaluation import load_verdict
from ..fingerprints import case_fingerprint
from ..grid import EvalGrid, valid_mask
from ..making.attack import ATTACK_MARGIN, attack, builds_attacker, within_reason
from ..making.refinement import run_oracle
from ..metrics import relative_l2_error

LEVELS = (0.5, 1.0, 2.0)
MAX_BASE_ERROR = 0.05
ROUNDING = 1e-10  # gaps this small (relative) mean the discretization is exact for the case
TINY_NORM = 1e-10  # RMS value below which a reference counts as zero


@dataclass
class ReferenceOutcome:
    case_id: str
    kept: bool
    reason: str
    e_base_estimate: float | None = None
    g01: float | None = None
    g12: float | None = None


def build_reference(
    record: CaseRecord, case_dir: Path, oracle_dir: Path, attacker: ModuleType | None = None
) -> ReferenceOutcome:
    """Compute, check and store one record's reference; updates the record in place. With
    ``attacker`` (attack.load_attacker), a record whose data the attacker fits within
    ATTACK_MARGIN x tau_acc is refused (a load whose solution has a closed form in the
    data's own functions: a polynomial load on a disk, an eigenfunction's)."""
    spec = record.case_spec_dict()
    names = record.case_spec.output.arrays
    grid = EvalGrid.from_spec(spec["eval_grid"])
    valid = valid_mask(spec, grid)
    try:
        runs = [run_oracle(oracle_dir, record.family, spec, names, level) for level in LEVELS]
    except Exception as exc:  # the oracle cannot do this case: discard, with the reason
        return ReferenceOutcome(record.id, False, f"oracle failed: {type(exc).__name__}: {str(exc)[:200]}")
    fields = [field for field, _ in runs]
    dofs: list = [info.get("num_dofs") for _, info in runs]  # the oracle's JSON: checked below
    steps: list = [info.get("num_time_steps") for _, info in runs]
    if not all(isinstance(n, int) for n in dofs):
        return ReferenceOutcome(record.id, False, f"the oracle reported no num_dofs at every level ({dofs})")
    if not (
        dofs[0] < dofs[1] < dofs[2]
        or (dofs[0] <= dofs[1] <= dofs[2] and None not in steps and steps[0] < steps[1] < steps[2])
    ):
        # equal fields at equal resolutions would pass for "resolved exactly" below
        return ReferenceOutcome(
            record.id, False, f"the levels did not refine the discretization (num_dofs {dofs}, time steps {steps})"
        )
    if any(not np.isfinite(f[valid]).all() for f in fields):
        return ReferenceOutcome(record.id, False, "non-finite values on valid grid points")
    coarse, base, fine = fields
    e_base = relative_l2_error(base, fine, valid)
    g01 = float(np.linalg.norm((coarse - base)[valid]))
    g12 = float(np.linalg.norm((base - fine)[valid]))
    norm = float(np.linalg.norm(fine[valid]))
    outcome = ReferenceOutcome(record.id, False, "", e_base, g01, g12)
    resolved_exactly = g12 <= ROUNDING * max(norm, 1.0)  # e.g. Poiseuille flow in P2: gaps are rounding
    if norm <= TINY_NORM * np.sqrt(valid.sum()):
        outcome.reason = f"reference field is ~0 (norm {norm:.2g}): a relative error would be noise"
    elif not e_base < MAX_BASE_ERROR:
        outcome.reason = f"e_base estimate {e_base:.3g} >= {MAX_BASE_ERROR}"
    elif not e_base <= REFERENCE_AGREEMENT * record.evaluation_config.tau_max:
        outcome.reason = (
            f"the strong oracle is {e_base:.3g} from the reference, above "
            f"{REFERENCE_AGREEMENT} x tau_max: no threshold could hold it to its own reference"
        )
    elif not (g12 < g01 or resolved_exactly):
        outcome.reason = f"levels do not converge (g12 {g12:.3g} >= g01 {g01:.3g})"
    else:
        relative = Path("references") / f"{record.id}.npz"
        path = Path(case_dir) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {name: fine[..., i].astype(np.float32) for i, name in enumerate(names)}
        # ignore: to mypy the ** could hold allow_pickle (a bool); the keys are output array names
        # (unused-ignore: NumPy 1.26's stubs have no allow_pickle)
        np.savez_compressed(path, **arrays)  # type: ignore[arg-type,unused-ignore]
        digest = hashlib.sha256(b"".join(arrays[name].tobytes() for name in names)).hexdigest()[:16]
        meta = record.evaluation_metadata
        before = meta.reference_path, meta.reference_config
        meta.reference_path = str(relative)
        meta.reference_config = {
            **(meta.reference_config or {}),
            "oracle": "dolfinx",
            "levels": list(LEVELS),
            "e_base_estimate": e_base,
            "g01": g01,
            "g12": g12,
            "num_dofs": dofs,
            "digest": digest,
        }
        outcome.kept, outcome.reason = True, "kept"
        if attacker is not None and (reason := _within_reach(attacker, record, case_dir)):
            outcome.kept, outcome.reason = False, reason
            meta.reference_path, meta.reference_config = before
            path.unlink()
    return outcome


def _within_reach(attacker: ModuleType, record: CaseRecord, case_dir: Path) -> str | None:
    """Why the attacker is too close to the record's new reference, or None. A record not
    calibrated yet is measured against tau_max, the loosest tau_acc it can get."""
    found = attack(attacker, record, case_dir, record.supported_libraries[0])
    if found.error is None:
        return None  # no judged answer: nothing within reach
    margin = found.margin if found.margin is not None else found.error / record.evaluation_config.tau_max
    record.evaluation_metadata.reference_config = {
        **(record.evaluation_metadata.reference_config or {}),
        "attack_margin": margin,
    }
    return within_reason(margin) if margin < ATTACK_MARGIN else None


def build_references(
    path: Path, oracle_dir: Path, families: list[str] | None = None, rebuild: bool = False, log=print
) -> tuple[int, int]:
    """``pdebench build-references``: build the numerical reference of every record of the
    case file ``path`` that needs one (reference-based, without a reference yet or every one
    with ``rebuild``; only ``families`` when given) and return (kept, tried). The case file is
    written after each record, so an interrupted run keeps what it built (a reference takes
    minutes)."""
    records = [record for _, record in iter_case_file(path)]
    todo = [
        r
        for r in records
        if r.evaluation_metadata.construction_method == "reference_numerical"
        and (rebuild or not r.evaluation_metadata.reference_path)
        and (not families or r.family in families)
    ]
    log(f"{len(todo)} records of {path} need a numerical reference")
    attacker = builds_attacker(log) if todo else None
    kept = 0
    for index, record in enumerate(todo, start=1):
        outcome = build_reference(record, path.parent, oracle_dir, attacker)
        kept += outcome.kept
        figure = f"e_base~{outcome.e_base_estimate:.2e}" if outcome.e_base_estimate is not None else ""
        log(f"[{index}/{len(todo)}] {record.id}: {outcome.reason} {figure}")
        write_case_file(path, records)
    return kept, len(todo)


def store_reference_agreement(
    cases: Path, library: str, output: Path, calibrations: Path, all_records: bool = False
) -> tuple[Path, int]:
    """``pdebench reference-agreement``, after its run of the strong oracle: keep the oracle's
    error and time on the reference-based records (``all_records``: on every record) from the
    verdicts the run left under ``output``, in this machine's calibration file of ``library``
    (``CalibrationStore.write_strong_oracle``). Against a reference, a track's tau_acc should
    measure its own discretization, not the distance between its oracle and the library that
    made the reference; on every record, the strong oracle is the anchor that must pass
    (else a verdict says nothing). Only verdicts of the current version of a case, with a
    finite error, count.
    Returns the file written and how many records it holds figures for."""
    store, measured = CalibrationStore(calibrations), {}
    for _, _, record in load_cases(cases):
        if not all_records and record.evaluation_metadata.construction_method != "reference_numerical":
            continue
        verdict = load_verdict(output / library / record.id)
        fingerprint = case_fingerprint(record, library)
        if (
            verdict
            and verdict.case_fingerprint == fingerprint
            and verdict.error is not None
            and math.isfinite(verdict.error)
        ):
            measured[record.id] = {
                "e_strong": verdict.error,
                "t_strong": verdict.t_agent,
                "outcome": verdict.outcome,
                "fingerprint": fingerprint,
                "oracle": verdict.submission_fingerprint,
            }
    return store.write_strong_oracle(library, measured), len(measured)
