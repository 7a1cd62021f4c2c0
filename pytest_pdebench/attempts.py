"""The attempt loop, written once for every kind of source (a folder of solvers, a model,
a code agent): the source drafts a submission, the gates judge it, and a failed attempt's
facts go back to the source for the next one, up to ``source.attempts`` (paper, Section
4.3: single-shot is one attempt; feedback shows only outcome, reason, error or wall time
and the stderr tail, never thresholds, baselines or references).

A source has ``label``, ``attempts``, ``attempt_folders`` (its audit goes under
``attempt-<k>/`` of the item folder, ``plan.attempt_dir(k)``, or into the item folder
itself), ``draft(plan, attempt, feedback) -> Draft`` and ``summary(history) -> dict | None``
(the verdict's ``llm`` entry: model, tokens, cost, every attempt). The gates are the item's
(``evaluation.evaluate`` of the plan) unless a caller gives its own. The evaluation never
learns which kind of source wrote the code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from .evaluation import Verdict, evaluate
from .plan import ItemPlan
from .prompts import feedback_of
from .settings import Settings
from .sources import Feedback, Source, Submission

Gates = Callable[[Submission, Path], Verdict]  # (submission, folder of the attempt's runs) -> verdict


def run_attempts(source: Source, plan: ItemPlan, settings: Settings, gates: Gates | None = None) -> Verdict:
    """Attempts 1..N of one item; the verdict of the last, with every attempt summarised."""
    record, library, item_dir = plan.record, plan.library, plan.item_dir
    if gates is None:

        def gates(submission: Submission, attempt_dir: Path) -> Verdict:
            return evaluate(plan, submission, source.label, settings, item_dir=attempt_dir)

    history: list[dict] = []
    feedback = None
    for attempt in range(1, source.attempts + 1):
        attempt_dir = plan.attempt_dir(attempt) if source.attempt_folders else item_dir
        draft = source.draft(plan, attempt, feedback)
        if draft.submission is None:
            verdict = Verdict.for_item(
                record,
                library,
                source.label,
                settings,
                reason=draft.reason,
                artifacts=str(attempt_dir),
                source_failure=draft.source_failure,
            )
        else:  # the gates start the attempt folder afresh: the audit files go in after them
            verdict = gates(draft.submission, attempt_dir)
        _write_audit(attempt_dir, draft.audit, verdict if source.attempt_folders and draft.submission is None else None)
        history.append(
            {
                "attempt": attempt,
                "outcome": verdict.outcome,
                "reason": verdict.reason,
                "error": verdict.error,
                "t_agent": verdict.t_agent,
                **draft.usage,
            }
        )
        if verdict.passed or draft.final or attempt == source.attempts:
            break
        feedback = Feedback(
            attempt + 1,
            _solver_text(draft.submission),
            feedback_of(verdict.to_dict(), _stderr_of(verdict, attempt_dir)),
        )
    # the item's verdict: the last attempt's with every attempt summarised, a new one (the
    # attempt's, written in its folder, stays as it was written)
    verdict = dataclasses.replace(verdict, source=source.label, llm=source.summary(history))
    if source.attempt_folders:
        verdict.write(item_dir)
    return verdict


def _solver_text(submission: Submission | None) -> str | None:
    if submission is None:
        return None
    return submission.files[submission.solver_name].decode(errors="replace")


def _stderr_of(verdict: Verdict, attempt_dir: Path) -> str:
    # a compile error is told with the compiler's output, a failed run with its stderr
    name = "compile.log" if verdict.reason.startswith("compile") else "stderr.txt"
    path = attempt_dir / name
    return path.read_text(errors="replace") if path.is_file() else ""


def _write_audit(attempt_dir: Path, files: dict[str, str], verdict: Verdict | None) -> None:
    if not files and verdict is None:
        return
    attempt_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (attempt_dir / name).write_text(text)
    if verdict is not None:
        verdict.write(attempt_dir)
