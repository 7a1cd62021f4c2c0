"""What a source of solvers deals in, and nothing else: the submission (solver files), a
source's draft of one attempt, the feedback it may see, the item as a source sees it
(``ItemView``: the item's plan, plan.py, is one) and the ``Source`` protocol that a folder
of solvers (``folder.py``), a model (``model.py``) and a code agent (``agents/``)
implement. The attempt loop that drives them is ``attempts.py``; the gates that judge a
submission never learn which kind of source wrote it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..cases import CaseRecord


@dataclass(frozen=True)
class Submission:
    solver_name: str  # file name inside the working directory
    files: dict[str, bytes] = field(repr=False)  # name -> content, solver included
    origin: str  # where it came from, for the report

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for name in sorted(self.files):
            digest.update(name.encode() + b"\0" + self.files[name] + b"\0")
        return digest.hexdigest()[:16]


@dataclass
class Draft:
    """What a source produced for one attempt."""

    submission: Submission | None
    reason: str = ""  # why there is no submission: the attempt's F-Exec reason
    usage: dict = field(default_factory=dict)  # tokens, cost, ...: merged into the attempt's history line
    audit: dict[str, str] = field(default_factory=dict)  # files for the attempt folder, written after the gates
    final: bool = False  # no further attempt (a model call that failed for good, say)
    source_failure: bool = False  # not the solver's fault (an agent that crashed or hit a limit)


@dataclass(frozen=True)
class Feedback:
    """The previous attempt, as the next one may see it."""

    attempt: int  # the attempt about to be drafted
    code: str | None  # the previous solver's text (None: there was none)
    facts: dict  # prompts.feedback_of: outcome, reason, error / wall time, stderr tail


class ItemView(Protocol):
    """What a source uses of an item's plan (plan.ItemPlan): the record and track, the item's
    audit folder and an attempt's, and the case's fingerprint."""

    @property
    def record(self) -> CaseRecord: ...
    @property
    def library(self) -> str: ...
    @property
    def item_dir(self) -> Path: ...
    @property
    def case_fingerprint(self) -> str: ...
    def attempt_dir(self, attempt: int) -> Path: ...


class Source(Protocol):
    label: str
    attempts: int
    attempt_folders: bool

    def draft(self, item: ItemView, attempt: int, feedback: Feedback | None) -> Draft: ...

    def summary(self, history: list[dict]) -> dict | None: ...


class NotRun(Exception):
    """The item was not attempted (budget reached, or not in the cache under --pde-replay)."""
