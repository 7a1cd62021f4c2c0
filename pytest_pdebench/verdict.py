"""An item's verdict and its file: the outcome and the figures behind it (verdict.json,
the report's rows, what --pde-resume reads back)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .cases import CaseRecord
from .execution import RunFacts
from .settings import Settings

VERDICT_FILE = "verdict.json"


@dataclass
class Verdict(RunFacts):
    """One item's outcome and the figures behind it (verdict.json, the report's rows); the
    runs' own facts (runtime, compile, timed runs, machine) come from ``RunFacts``."""

    case_id: str
    library: str
    family: str
    math_type: list[str]
    domain: str
    source: str
    outcome: str = "F-Exec"
    reason: str = ""
    error: float | None = None
    tau_acc: float | None = None
    e_base: float | None = None
    t_agent: float | None = None
    t_base: float | None = None
    tau_time: float | None = None
    t_first_base: float | None = None  # the baseline's first run (the first-run gate's base)
    tau_first: float | None = None  # alpha_time x t_first_base: the gated run's bound
    timed_runs: list[float] = field(default_factory=list)
    timed_errors: list[float] = field(default_factory=list)  # each timed run's rel. L2 error
    run_difference: float | None = None  # largest ||u_timed - u_gated|| / ||u_ref|| on the grid
    cores_used: float | None = None  # largest CPU seconds per second of window over the timed runs
    cores_least: float | None = None  # the smallest: under 1 when a run waited for the CPU (or slept)
    flags: list[str] = field(default_factory=list)  # what the verdict does not decide but a reader should see
    rmse: float | None = None
    mae: float | None = None
    r2: float | None = None
    frmse: float | None = None
    total_variation: float | None = None
    # the gated run's error per region: each boundary tag's band, then the interior (error_regions.py)
    errors_by_region: list[dict[str, Any]] = field(default_factory=list)
    pictures: list[str] = field(default_factory=list)  # files of the audit folder: fields.png (pictures.py)
    solver_info: dict[str, Any] = field(default_factory=dict)
    calibration: str | None = None  # where the thresholds came from (a file, a record, a kept or paired baseline)
    # whose timing t_base is: "stored" (a calibration of this kind of machine), "stored elsewhere"
    # (another kind's), "kept" (this machine, an earlier paired item) or "paired" (now, beside the runs)
    t_base_from: str | None = None
    calibration_problem: str | None = None
    reference_norm: float | None = None
    submission: str = ""
    submission_fingerprint: str = ""  # hash of the solver and helpers that ran
    sandbox: str = ""
    runner: str = ""  # warm (forked from a zygote) or cold (a fresh interpreter per run)
    artifacts: str = ""
    fingerprint: str = ""
    case_fingerprint: str = ""
    llm: dict[str, Any] | None = None  # --pde-model: the model, every attempt, tokens and cost
    alphas: dict[str, float] | None = None  # the multipliers and bounds tau_acc and tau_time came from
    gate_options: dict = field(default_factory=dict)  # options that moved a gate from the paper's (settings.py)
    timed_failure: str | None = None  # a timed run that failed (an F-Acc near miss's too)
    source_failure: bool = False  # F-Exec that is not the solver's: an agent crashed or hit a limit
    variant_seed: int | None = None  # --pde-variants: the seed of the variant the item ran on
    variant_of: str | None = None  # ... and the digest of the published record it was drawn from
    baseline: dict[str, Any] | None = None  # --pde-baseline=paired: the oracle's own figures beside these
    stored: dict[str, Any] | None = None  # paired: the stored calibration's thresholds and outcome, if any
    sibling: dict[str, Any] | None = None  # --pde-sibling: the same solver on a variant no prompt showed
    resumed: bool = False  # --pde-resume: read back from the item's folder, earned by an earlier run

    @classmethod
    def for_item(cls, record: CaseRecord, library: str, source: str, settings: Settings, **fields) -> Verdict:
        """A new verdict of ``record`` on ``library``, with the gate options it is judged under."""
        fields = {"gate_options": dict(settings.gate_options), **fields}
        variant = record.evaluation_metadata.variant
        if variant is not None:
            fields = {"variant_seed": variant.seed, "variant_of": variant.of, **fields}
        return cls(
            case_id=record.id,
            library=library,
            family=record.family,
            math_type=list(record.pde_classification.math_type),
            domain=record.domain_type,
            source=source,
            **fields,
        )

    @property
    def passed(self) -> bool:
        return self.outcome == "PASS"

    def to_dict(self) -> dict:
        data = asdict(self)  # the item's own fields first, then the runs' facts: easier to read
        return {**{name: data[name] for name in _OWN_FIELDS}, **data}

    def write(self, folder: Path) -> None:
        """``folder/verdict.json``: what resume, the report and a person read back."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / VERDICT_FILE).write_text(json.dumps(self.to_dict(), indent=1, default=str) + "\n")

    @classmethod
    def from_dict(cls, data: dict) -> Verdict:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


_OWN_FIELDS = [name for name in Verdict.__dataclass_fields__ if name not in RunFacts.__dataclass_fields__]


def load_verdict(item_dir: Path) -> Verdict | None:
    path = item_dir / VERDICT_FILE
    try:
        return Verdict.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
