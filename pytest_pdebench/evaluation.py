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

The runs themselves are ``execution.py`` (here, or on a cluster worker); this module
holds what judges them: the reference, the thresholds and the gates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from . import gates, metrics
from .calibration import ResolvedThresholds, calibration_setting, check_baseline, warmup_setting
from .cases import CaseRecord, agent_view
from .execution import Execution, RunFacts, RunTask, execute
from .grid import EvalGrid, valid_mask
from .kept_baselines import KEPT_SOURCE
from .plan import ItemPlan, NoSibling, SiblingCheck
from .reference import reference_fields
from .run_files import remove_tree
from .sandbox import Limits
from .settings import Settings
from .sources import Submission

VERDICT_FILE = "verdict.json"
# bumped when what a verdict means changes (2: outputs read without links, kernel store),
# so --pde-resume never reuses a verdict earned under older rules
HARNESS_REVISION = 4  # 3: every timed run judged, sealed runs, neutral folders; 4: the first-run gate
# a timed run whose processes used more CPU than this many cores' worth over its window
# (with CORES_SLACK_SEC for the sandbox's own start) is flagged in its verdict
CORES_FLAG, CORES_SLACK_SEC = 1.2, 0.05
# a compiled track's build over this many times the baseline's (both not from a cache) is
# flagged: work moved into compile-time evaluation (constexpr) is never in t_agent
COMPILE_FLAG = 3.0


class BaselineFailure(Exception):
    """The paired oracle failed or gave a baseline that cannot set thresholds: the item
    has no verdict (it is not the submission's failure)."""


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


def _fingerprint(plan: ItemPlan, submission: Submission, settings: Settings) -> str:
    """What a resumed verdict must have been earned with: harness rules, case, submission,
    thresholds and the settings that change what is timed."""
    library, thresholds = plan.library, plan.thresholds
    if plan.local_oracle is not None:  # this machine's timing of that oracle, paired then or kept now
        baseline: list = ["local", plan.local_oracle]
    elif plan.oracle is not None:  # another oracle is another baseline
        baseline = ["paired", plan.oracle.fingerprint]
    else:
        baseline = [asdict(thresholds) if thresholds else None]
    parts = [
        HARNESS_REVISION,
        plan.case_fingerprint,
        library,
        submission.fingerprint,
        *baseline,
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


def load_verdict(item_dir: Path) -> Verdict | None:
    path = item_dir / VERDICT_FILE
    try:
        return Verdict.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


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
    """What the run site needs for this item: the agent's view, never the answer."""
    record, library = plan.record, plan.library
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
        baseline=None if plan.oracle is None else _oracle_task(plan, plan.oracle, settings),
    )


def baseline_settings(settings: Settings) -> Settings:
    """How the oracle runs for a baseline beside a session's items (paired, or timed first
    and kept): at the record's calibration setting, as a calibration runs it, within the
    case's own time limit (a --pde-timeout bounds the submissions, not their baseline)."""
    return dataclasses.replace(settings, calibrate=True, timeout_sec=None)


def _oracle_task(plan: ItemPlan, oracle: Submission, settings: Settings) -> RunTask:
    """The paired oracle's runs: the item's task with the oracle's solver, given the
    record's calibration setting as a calibration run is (the baseline at the paper's
    difficulty), in the same sandbox and runner."""
    return run_task(dataclasses.replace(plan, oracle=None), oracle, baseline_settings(settings))


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
    record, library, thresholds = plan.record, plan.library, plan.thresholds
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
    )
    verdict.t_base_from = _t_base_from(plan)
    if thresholds is not None:
        verdict.e_base, verdict.t_base = thresholds.e_base, thresholds.t_base
        verdict.tau_acc, verdict.tau_time, verdict.calibration = (
            thresholds.tau_acc,
            thresholds.tau_time,
            thresholds.source,
        )
        verdict.t_first_base, verdict.tau_first = thresholds.t_first_base, thresholds.tau_first
        verdict.alphas = thresholds.factors
    if plan.stored is not None:
        stored_names = ("e_base", "t_base", "tau_acc", "tau_time", "t_first_base", "tau_first")
        verdict.stored = {name: getattr(plan.stored, name) for name in stored_names}
        verdict.stored["source"] = plan.stored.source
    remove_tree(item_dir)  # an agent's workspace may be in it: links removed, never followed
    item_dir.mkdir(parents=True)
    for name, content in {**task.input_files(), **submission.files}.items():  # the audit's inputs
        (item_dir / name).write_bytes(content)
    judge = _Judge(plan, verdict, settings)
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
    if plan.stored is not None and verdict.stored is not None:  # the same runs under the stored thresholds
        verdict.stored["outcome"] = gates.outcome_under(
            verdict.outcome,
            verdict.error,
            verdict.timed_errors,
            verdict.timed_failure,
            verdict.t_agent,
            plan.stored.tau_acc,
            plan.stored.tau_time,
            verdict.t_first_run,
            plan.stored.tau_first,
        )
    if plan.paired_because and verdict.baseline is not None:
        verdict.baseline["paired_because"] = plan.paired_because
    verdict.write(item_dir)
    return verdict


def _t_base_from(plan: ItemPlan) -> str | None:
    if plan.oracle is not None:
        return "paired"
    if plan.thresholds is None:
        return None  # calibrating: the run measures it
    if plan.thresholds.source.startswith(KEPT_SOURCE):
        return "kept"
    return "stored elsewhere" if plan.thresholds.foreign_machine else "stored"


class _Judge:
    """The three gates over an ``Execution`` of the item ``plan``: where its reference and
    thresholds live. With the plan's paired oracle (``plan.oracle``), whose runs beside the
    submission's (``Execution.baseline``) give the thresholds: e_base from its gated run,
    t_base from its timed runs."""

    def __init__(self, plan: ItemPlan, verdict: Verdict, settings: Settings):
        self.record, self.case_dir, self.paired = plan.record, plan.case_dir, plan.oracle
        # None until the paired oracle's runs set it (the gates that read it come after): Any, not Optional
        self.thresholds: Any = plan.thresholds
        self.verdict, self.settings = verdict, settings

    def _pair(self, done: Execution) -> None:
        """Paired baselines: e_base and tau_acc from the oracle's gated run (once)."""
        if self.paired is None or self.thresholds is not None:
            return
        base = cast(Execution, done.baseline)  # a paired task's execution has the oracle's
        failure = base.compile_failure or base.run_failure or base.output_failure
        if failure:
            raise BaselineFailure(f"the paired oracle's gated run failed: {failure}")
        try:
            solution = gates.read_solution(
                cast(bytes, base.solution),
                self.record.case_spec.output.arrays,
                self.grid.axis_names,
                self.grid.shape,
                self.valid,
            )
        except gates.GateFailure as exc:
            raise BaselineFailure(f"the paired oracle's outputs: {exc.reason}") from None
        e_base = metrics.relative_l2_error(solution, self.reference, self.valid)
        self.baseline_info = json.loads(cast(bytes, base.meta)).get("solver_info") or {}
        self._check_baseline(e_base, 0.0)
        self._paired_thresholds(e_base, 0.0)
        self.verdict.baseline = {
            "submission": self.paired.origin,
            "fingerprint": self.paired.fingerprint,
            "error": e_base,
            "t_first_run": base.t_first_run,
            "compile_sec": base.compile_sec,
            "compile_cached": base.compile_cached,
            "solver_info": self.baseline_info,
            "timed_runs": [],
        }

    def _pair_time(self, done: Execution, strict: bool) -> None:
        """Paired baselines: t_base and tau_time from the oracle's timed runs, which
        alternated with the submission's. ``strict``: an oracle whose timed runs failed
        raises (else, for an item the accuracy gate decides, t_base stays unknown)."""
        if self.paired is None:
            return
        base = cast(Execution, done.baseline)
        if base.timed_failure or len(base.timed_runs) != len(done.timed_runs) or not base.timed_runs:
            if strict:
                raise BaselineFailure(f"the paired oracle's {base.timed_failure or 'timed runs are missing'}")
            return
        t_base = statistics.fmean(base.timed_runs)
        e_base = self.thresholds.e_base
        if strict:
            self._check_baseline(e_base, t_base)
        self._paired_thresholds(e_base, t_base, base.t_first_run, None if base.compile_cached else base.compile_sec)
        baseline = cast(dict, self.verdict.baseline)  # set by _pair
        baseline["timed_runs"], baseline["t_base"] = list(base.timed_runs), t_base

    def _check_baseline(self, e_base: float, t_base: float) -> None:
        problem = check_baseline(
            self.record,
            self.verdict.library,
            e_base=e_base,
            t_base=t_base,
            solver_info=self.baseline_info,
            reference_norm=float(np.linalg.norm(self.reference[self.valid])),
            alphas=self.settings.alphas,
        )
        if problem:
            raise BaselineFailure(f"the paired oracle's baseline cannot set thresholds: {problem}")

    def _paired_thresholds(
        self, e_base: float, t_base: float, t_first_base: float | None = None, compile_base: float | None = None
    ) -> None:
        self.thresholds = ResolvedThresholds.from_baseline(
            e_base,
            t_base,
            *self.settings.alphas.resolve(self.record),
            source="paired oracle",
            t_first_base=t_first_base,
            compile_base=compile_base,
        )
        verdict, thresholds = self.verdict, self.thresholds
        verdict.e_base, verdict.tau_acc, verdict.calibration = thresholds.e_base, thresholds.tau_acc, thresholds.source
        verdict.alphas = thresholds.factors
        if t_base:
            verdict.t_base, verdict.tau_time = thresholds.t_base, thresholds.tau_time
            verdict.t_first_base, verdict.tau_first = thresholds.t_first_base, thresholds.tau_first

    def prepare(self) -> None:
        spec = self.record.case_spec_dict()
        self.grid = EvalGrid.from_spec(spec["eval_grid"])
        self.valid = valid_mask(spec, self.grid)
        self.reference = reference_fields(self.record, self.grid, self.case_dir)

    def worth_timing(self, done: Execution) -> bool:
        """Whether the gated run earns timed runs: gates 1 and 2 pass, or the accuracy gate
        fails by a margin some alpha of the sensitivity grid accepts (a near miss)."""
        try:
            self._pair(done)
            self._gated_run(done, dataclasses.replace(self.verdict), None)
        except Exception:  # noqa: BLE001 - a gate's failure, or outputs that break a reader: all_gates says which
            return False
        return True

    def _flag_compile(self, done: Execution) -> None:
        """A build far slower than the baseline's (neither from a cache) is flagged: it is
        outside every timed window, so work done at compile time would go uncounted."""
        base = self.thresholds.compile_base if self.thresholds is not None else None
        if done.compile_sec is None or done.compile_cached or not base:
            return
        if done.compile_sec > COMPILE_FLAG * base:
            self.verdict.flags.append(
                f"the build took {done.compile_sec:.1f} s, {done.compile_sec / base:.1f} x the baseline's "
                f"{base:.1f} s (more than {COMPILE_FLAG:g} x): work done at compile time is not timed"
            )

    def all_gates(self, done: Execution, item_dir: Path) -> None:
        verdict = self.verdict
        verdict.take_facts(done)
        self._pair(done)  # before anything of the submission's is judged: a failed oracle stops here
        if done.compile_log is not None:
            (item_dir / "compile.log").write_text(done.compile_log)
        if done.compile_failure is None:
            (item_dir / "stdout.txt").write_text(done.stdout)
            (item_dir / "stderr.txt").write_text(done.stderr)
        inaccurate = self._gated_run(done, verdict, item_dir)
        # gate 3: runtime, over warm repeated runs, each of them judged as the gated run was
        verdict.timed_runs = list(done.timed_runs)
        if done.timed_failure:
            verdict.timed_failure = done.timed_failure
            raise inaccurate or gates.exec_failure(done.timed_failure)
        try:
            self._timed_runs(done, verdict, inaccurate is None)
        except gates.GateFailure:
            if inaccurate:  # a near miss stays F-Acc, as with a failed timed run above
                raise inaccurate from None
            raise
        verdict.t_agent = statistics.fmean(verdict.timed_runs)
        self._pair_time(done, strict=inaccurate is None)
        self._flag_compile(done)
        if inaccurate:
            raise inaccurate
        if self.settings.calibrate:
            verdict.e_base, verdict.t_base = verdict.error, verdict.t_agent
            verdict.calibration_problem = check_baseline(
                self.record,
                verdict.library,
                e_base=cast(float, verdict.error),  # set by the gated run, as the reference norm
                t_base=verdict.t_agent,
                solver_info=verdict.solver_info,
                reference_norm=cast(float, verdict.reference_norm),
                alphas=self.settings.alphas,
            )
        else:
            gates.time_gate(verdict.t_agent, self.thresholds.tau_time)
            gates.first_run_gate(verdict.t_first_run, self.thresholds.tau_first)

    def _timed_runs(self, done: Execution, verdict: Verdict, accurate: bool) -> None:
        """Each timed run's outputs through gates 1 and 2 as the gated run's went: F-Exec
        for outputs that break the contract, F-Acc for an error over tau_acc where the
        gated run's was under it, the run named in the reason. Records each run's error,
        the largest difference from the gated run's solution and the cores used."""
        names = self.record.case_spec.output.arrays
        norm = verdict.reference_norm or 1.0
        for number, output in enumerate(done.timed_outputs, 1):
            if output.cpu_sec is not None and done.timed_runs[number - 1] > 0:
                window = done.timed_runs[number - 1]
                verdict.cores_used = max(verdict.cores_used or 0.0, output.cpu_sec / window)
                verdict.cores_least = min(verdict.cores_least or float("inf"), output.cpu_sec / window)
                if output.cpu_sec > CORES_FLAG * window + CORES_SLACK_SEC and not verdict.flags:
                    verdict.flags.append(
                        f"timed run {number} used {output.cpu_sec / window:.2f} cores over its "
                        f"window (more than {CORES_FLAG})"
                    )
            if output.solution is None:  # byte for byte the gated run's
                verdict.timed_errors.append(cast(float, verdict.error))  # set by the gated run
                verdict.run_difference = verdict.run_difference or 0.0
                continue
            try:
                solution = gates.read_solution(
                    output.solution, names, self.grid.axis_names, self.grid.shape, self.valid
                )
            except gates.GateFailure as failure:
                raise gates.exec_failure(f"timed run {number}: {failure.reason}") from None
            error = metrics.relative_l2_error(solution, self.reference, self.valid)
            verdict.timed_errors.append(error)
            difference = float(np.linalg.norm((solution - self.gated_solution)[self.valid])) / norm
            verdict.run_difference = max(verdict.run_difference or 0.0, difference)
            if accurate and not self.settings.calibrate:
                try:
                    gates.accuracy_gate(error, self.thresholds.tau_acc)
                except gates.GateFailure as failure:
                    raise gates.GateFailure(
                        "F-Acc", f"timed run {number}: {failure.reason} (the gated run's {verdict.error:.2e})"
                    ) from None

    def _gated_run(self, done: Execution, verdict: Verdict, item_dir: Path | None) -> gates.GateFailure | None:
        """Gates 1 (execution and output format) and 2 (accuracy) on the gated run: raises a
        failure that ends the item, returns a near miss's (the timed runs still follow)."""
        for failure in (done.compile_failure, done.run_failure, done.output_failure):
            if failure:
                raise gates.exec_failure(failure)
        # a run without a failure has its outputs
        solution_bytes, meta_bytes = cast(bytes, done.solution), cast(bytes, done.meta)
        verdict.solver_info = json.loads(meta_bytes).get("solver_info") or {}
        names = self.record.case_spec.output.arrays
        solution = gates.read_solution(solution_bytes, names, self.grid.axis_names, self.grid.shape, self.valid)
        self.gated_solution = solution
        if item_dir is not None:
            (item_dir / "solution.npz").write_bytes(solution_bytes)
            (item_dir / "meta.json").write_bytes(meta_bytes)
        valid = self.valid
        verdict.reference_norm = float(np.linalg.norm(self.reference[valid]))
        verdict.error = metrics.relative_l2_error(solution, self.reference, valid)
        for key, value in metrics.diagnostics(solution, self.reference, valid).items():
            setattr(verdict, key, value)
        if self.settings.calibrate:
            return None
        try:
            gates.accuracy_gate(verdict.error, self.thresholds.tau_acc)
        except gates.GateFailure as failure:
            # timed all the same when a looser alpha_acc of the sensitivity grid would accept
            # it: the report re-gates from stored numbers (costs the timed runs of near misses)
            if not self.thresholds.accurate_under_some_sensitivity_alpha(verdict.error):
                raise
            return failure
        return None
