"""Evaluating one item (case x library x submission): runs, gates, verdict.

What is timed (the same for submissions and for the calibration baseline):

* Every run is a fresh process in a fresh working directory holding only
  ``case_spec.json`` and the solver files.
* The track's libraries are imported before the clock starts; the clock runs from
  the runner's start marker (just before the submission module is imported) to the
  exit of the process. Import-time work of the submission is therefore timed.
* Compiled tracks (deal.II) build the program once per item before any run; that time
  is ``compile_sec``, never part of ``t_agent``.
* The first (gated) run starts with an empty form-compiler cache and warms the item's
  kernel store; its output is what the gates judge. Then ``--pde-runs N`` timed runs
  follow; ``t_agent`` is their mean. The first run's time, compile included, is
  ``t_first_run``: the first-run gate holds it to ``alpha_time`` times the baseline's own
  first run, so work a gated run did cannot be carried to the timed runs for free
  (a kept kernel can hold anything a run wrote).
* No run sees what an earlier run wrote, except compiled kernels: each has fresh
  working and cache folders, and only files the track recognises as kernels pass from
  the first run into the read-only kernel store (``kernel_cache.py``).
* Outputs are read once, as regular files of the run's own folder (``run_files.py``).
* Every run is judged: the timed runs' outputs are read and checked as the gated run's
  are, and each must pass the accuracy gate the gated run passed; a timed run that
  fails it (or whose outputs break the contract) decides the verdict, named in the
  reason. ``run_difference`` keeps the largest difference between a timed run's
  solution and the gated run's. So a run that could tell it was timed, and did less,
  gains nothing.
* The CPU time of a timed run's processes over its window is measured where the
  sandbox allows (bubblewrap); ``cores_used`` is the largest ratio to the window, and a
  run over ``CORES_FLAG`` is flagged (a worker's runs keep to its core; without
  pinning a solver could use the neighbour's).
* Timed runs happen only for submissions that passed the accuracy gate (or nearly: a
  near miss of the sensitivity grid). A cluster worker cannot know (the reference stays
  here), so it times every well-formed run and the timings a local run would not have
  made are dropped before judging.
* Calibration runs (``--pde-calibrate``) also get ``calibration_config.json``: the
  record's calibration settings for the library, which the oracle then uses instead of
  its own strong ones. No evaluation run ever sees that file.

Each item leaves an audit directory: case_spec.json, the solver files, stdout.txt,
stderr.txt, solution.npz, meta.json and verdict.json.

The runs themselves are ``execution.py`` (here, or on a cluster worker), the gates
``judge.py``, the verdict and its file ``verdict.py``; this module makes an item's runs and
its verdict: resumed, judged, with its sibling.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from . import gates, pictures
from .baselines import BaselineFailure
from .cases import CaseRecord, agent_view
from .execution import RunTask, execute
from .judge import Judge, show
from .oracle_settings import calibration_setting, warmup_setting
from .plan import ItemPlan, NoSibling, SiblingCheck
from .run_files import remove_tree
from .sandbox import Limits
from .settings import Settings
from .sources import Submission
from .verdict import VERDICT_FILE, Verdict, load_verdict

__all__ = ["VERDICT_FILE", "Verdict", "baseline_settings", "evaluate", "load_verdict", "run_task", "will_run"]

# bumped when what a verdict means changes (2: outputs read without links, kernel store),
# so --pde-resume never reuses a verdict earned under older rules
HARNESS_REVISION = 4  # 3: every timed run judged, sealed runs, neutral folders; 4: the first-run gate


def _fingerprint(plan: ItemPlan, submission: Submission, settings: Settings) -> str:
    """What a resumed verdict must have been earned with: harness rules, case, submission,
    thresholds and the settings that change what is timed."""
    library = plan.library
    parts = [
        HARNESS_REVISION,
        plan.case_fingerprint,
        library,
        submission.fingerprint,
        *plan.baseline.identity(),
        settings.runs,
        settings.timeout_sec,
        settings.calibrate,
        settings.sandbox,
    ]
    moved = [list(option) for option in settings.gate_options if option[0] != "baseline"]  # (named above)
    if moved:  # a verdict under moved thresholds is no verdict under the paper's
        parts.append(moved)
    if settings.sibling:
        parts.append("sibling")
    if settings.warm_up:
        parts.append("warm-up")
    if settings.sandbox == "docker":  # another image is another runtime
        parts.append(settings.runtime(library).image)
    if settings.runner_for(library) == "warm":  # another timed-window constant
        parts.append("warm")
    payload = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _reusable_verdict(item_dir: Path, fingerprint: str, settings: Settings) -> Verdict | None:
    """--pde-resume: the item's stored verdict, if it was earned with the same inputs."""
    previous = load_verdict(item_dir) if settings.resume else None
    if previous is None or previous.fingerprint != fingerprint:
        return None
    previous.resumed = True
    return previous


def will_run(plan: ItemPlan, submission: Submission, settings: Settings) -> bool:
    """Whether ``evaluate`` would run this submission (not: a verdict to resume from)."""
    return _reusable_verdict(plan.item_dir, _fingerprint(plan, submission, settings), settings) is None


def run_task(plan: ItemPlan, submission: Submission, settings: Settings) -> RunTask:
    """What the run site needs for this item: the agent's view, never the answer. A paired
    oracle's runs are the same task with the oracle's solver, at the record's calibration
    setting (the baseline at the paper's difficulty), in the same sandbox and runner."""
    oracle = plan.baseline.oracle
    return _task(
        plan.record,
        plan.library,
        submission,
        settings,
        None if oracle is None else _task(plan.record, plan.library, oracle, baseline_settings(settings)),
    )


def _task(
    record: CaseRecord, library: str, submission: Submission, settings: Settings, baseline: RunTask | None = None
) -> RunTask:
    timeout = settings.timeout_sec or record.evaluation_config.timeout_sec
    setting = calibration_setting(record, library) if settings.calibrate else None
    return RunTask(
        library=library,
        case_id=record.id,
        case_spec=agent_view(record, library),
        output_names=tuple(record.case_spec.output.arrays),
        submission=submission,
        limits=Limits(timeout_sec=timeout, memory_mb=settings.memory_mb),
        runs=settings.runs,
        sandbox=settings.sandbox,
        runner=settings.runner_for(library),
        image=dict(settings.images).get(library),
        calibration_setting=setting,
        warmup_setting=warmup_setting(setting) if settings.warm_up and setting else None,
        baseline=baseline,
    )


def baseline_settings(settings: Settings) -> Settings:
    """How the oracle runs for a baseline beside a session's items (paired, or timed first
    and kept): at the record's calibration setting, as a calibration runs it, within the
    case's own time limit (a --pde-timeout bounds the submissions, not their baseline)."""
    return dataclasses.replace(settings, calibrate=True, timeout_sec=None)


def evaluate(
    plan: ItemPlan, submission: Submission, source_label: str, settings: Settings, item_dir: Path | None = None
) -> Verdict:
    """Run the gates for one item and write its verdict.json (in ``item_dir``, by default
    the plan's item folder); with a sibling check, a PASS is then judged on the sibling too.
    The runs happen through the plan's executor (default: ``execute`` in this process; a
    cluster's sends the task to a worker). Raises RuntimeMissing."""
    item_dir = item_dir or plan.item_dir
    fingerprint = _fingerprint(plan, submission, settings)
    verdict = _reusable_verdict(item_dir, fingerprint, settings) or _judged(
        plan, submission, source_label, settings, item_dir, fingerprint
    )
    if plan.sibling is not None and verdict.passed and verdict.sibling is None:
        verdict.sibling = _sibling(plan.sibling, submission, source_label, settings, item_dir)
        verdict.write(item_dir)
    return verdict


def _sibling(check: SiblingCheck, submission: Submission, source_label: str, settings: Settings, item_dir: Path):
    """The passing solver, unchanged, on the sibling variant, judged against the oracle
    paired beside it: a column of the report, not a gate."""
    try:
        plan = check.plan(item_dir / "sibling")
        verdict = evaluate(plan, submission, source_label, dataclasses.replace(settings, sibling=False))
    except (NoSibling, BaselineFailure) as exc:
        return {"seed": check.seed, "outcome": None, "reason": str(exc)}
    return {
        "seed": check.seed,
        "outcome": verdict.outcome,
        "reason": verdict.reason,
        "case_fingerprint": verdict.case_fingerprint,
        **{name: getattr(verdict, name) for name in ("error", "tau_acc", "t_agent", "tau_time")},
    }


def _judged(
    plan: ItemPlan, submission: Submission, source_label: str, settings: Settings, item_dir: Path, fingerprint: str
) -> Verdict:
    """The gates over the item's runs; the verdict written into ``item_dir``."""
    record, library, baseline = plan.record, plan.library, plan.baseline
    task = run_task(plan, submission, settings)
    verdict = Verdict.for_item(
        record,
        library,
        source_label,
        settings,
        submission=submission.origin,
        submission_fingerprint=submission.fingerprint,
        sandbox=settings.sandbox,
        runner=task.runner,
        artifacts=str(item_dir),
        fingerprint=fingerprint,
        case_fingerprint=plan.case_fingerprint,
        t_base_from=baseline.t_base_from(),
    )
    if (known := baseline.before_runs()) is not None:
        show(verdict, known)
    if baseline.beside is not None:
        stored_names = ("e_base", "t_base", "tau_acc", "tau_time", "t_first_base", "tau_first")
        verdict.stored = {name: getattr(baseline.beside, name) for name in stored_names}
        verdict.stored["source"] = baseline.beside.source
    remove_tree(item_dir)  # an agent's workspace may be in it: links removed, never followed
    item_dir.mkdir(parents=True)
    for name, content in {**task.input_files(), **submission.files}.items():  # the audit's inputs
        (item_dir / name).write_bytes(content)
    judge = Judge(plan, verdict, settings)
    judge.prepare()  # the reference before any run: a missing one stops here
    done = (plan.executor or execute)(task, item_dir, judge.worth_timing)
    try:
        if done.timed and not judge.worth_timing(done):  # a run site that times everything: as if it had not
            done.without_timing()
        judge.all_gates(done, item_dir)
        verdict.outcome, verdict.reason = "PASS", ""
    except gates.GateFailure as failure:
        verdict.outcome, verdict.reason = failure.outcome, failure.reason
    except BaselineFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the outputs make judging raise, the item keeps a verdict
        verdict.outcome = "F-Exec"
        verdict.reason = f"the outputs could not be judged ({type(exc).__name__}: {str(exc)[:200]})"
    if pictures.wanted(settings.pictures, verdict.outcome):
        verdict.pictures = judge.draw(item_dir)
    if baseline.beside is not None and verdict.stored is not None:  # the same runs under the stored thresholds
        verdict.stored["outcome"] = gates.outcome_under(
            verdict.outcome,
            verdict.error,
            verdict.timed_errors,
            verdict.timed_failure,
            verdict.t_agent,
            baseline.beside.tau_acc,
            baseline.beside.tau_time,
            verdict.t_first_run,
            baseline.beside.tau_first,
        )
    verdict.write(item_dir)
    return verdict
