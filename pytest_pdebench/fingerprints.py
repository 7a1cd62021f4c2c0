"""A case's fingerprint on a library: what a baseline and a resumed verdict must match."""

from __future__ import annotations

import hashlib
import json

from .cases import CaseRecord


def case_fingerprint(record: CaseRecord, library: str) -> str:
    """Hash of everything that changes what a solver of `library` computes or is compared with."""
    meta = record.evaluation_metadata
    payload = {
        "case_spec": record.case_spec_dict(),
        "manufactured_solution": meta.manufactured_solution,
        "reference_path": meta.reference_path,
    }
    digest = (meta.reference_config or {}).get("digest")
    if digest:  # a rebuilt reference invalidates the baselines measured against the old one
        payload["reference_digest"] = digest
    setting = meta.calibration_config.settings.get(library) if meta.calibration_config else None
    if setting:  # a new baseline setting invalidates that library's baseline, and only that one
        payload["calibration_setting"] = setting.model_dump(exclude_none=True)
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
