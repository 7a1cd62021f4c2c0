"""One item's plan: what an item (case x library, on a cluster of several machine classes
also x class) needs that does not depend on the submission, worked out once before any
model call or run (``placement.py`` makes it) and then passed along to the attempts, the
gates and the run site, so that none of them looks it up again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .baselines import Baseline
from .cases import CaseRecord

if TYPE_CHECKING:  # the runs' modules: a plan only names where they happen
    from .execution import Executor


class NoSibling(Exception):
    """The item's sibling cannot be judged (no variant, no oracle for it); the message says why."""


@dataclass(frozen=True)
class SiblingCheck:
    """--pde-sibling: the published record's second variant, the one no prompt showed, judged
    with a passing submission; ``plan(folder)`` makes its plan (paired with the oracle), or
    raises NoSibling."""

    seed: int
    plan: Callable[[Path], ItemPlan]


@dataclass(frozen=True)
class ItemPlan:
    record: CaseRecord
    library: str
    case_dir: Path | None  # the case file's folder: references and meshes are found beside it
    item_dir: Path  # the item's audit folder (an attempt's runs go under it, see attempts.py)
    case_fingerprint: str  # calibration.case_fingerprint: what a baseline and a resumed verdict must match
    baseline: Baseline  # which baseline judges the item: stored, kept, paired or none (calibrating)
    executor: Executor | None = None  # where the runs happen; None: here, in this process
    machine: str | None = None  # the cluster machine class the item is calibrated on (several classes)
    sibling: SiblingCheck | None = None  # --pde-sibling: judged after a PASS (evaluation.py)
    notes: tuple[str, ...] = ()  # warnings of a plan made quietly (ahead of its turn), said at its turn

    def attempt_dir(self, attempt: int) -> Path:
        """The folder of attempt ``attempt`` of a source that keeps one per attempt."""
        return self.item_dir / f"attempt-{attempt}"

    @property
    def key(self) -> tuple[str, str, str | None]:
        return self.record.id, self.library, self.machine
