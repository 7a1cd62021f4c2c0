"""Evaluating one item (case x library x submission): runs, gates, verdict.

What is timed (the same for submissions and for the calibration baseline):

* Every run is a fresh process in a fresh working directory holding only
  ``case_spec.json`` and the solver files.
* The track's libraries are imported before the clock starts; the clock runs from
  the runner's start marker (just before the submission module is imported) to the
  exit of the process. Import-time work of the submission is therefore timed.
* Compiled tracks (deal.II) build the program once per item before any run; that time
  is ``compile_sec``, never part of ``t_agent``.
* The first run warms the form-compiler cache (per item; Firedrake: per submission,
  persistent, see ``Track.kernel_store``) and its output is what the gates judge. Then
  ``--pde-runs N`` timed runs follow; ``t_agent`` is their mean. The first run's time
  is reported as ``t_first_run``.
* No run sees what an earlier run wrote, except compiled kernels: each has fresh
  working and cache folders, and only files the track recognises as kernels pass from
  the first run into the read-only kernel store (``kernel_cache.py``).
* Outputs are read once, as regular files of the run's own folder (``run_files.py``).
* Timed runs happen only for submissions that passed the accuracy gate.
* Calibration runs (``--pde-calibrate``) also get ``calibration_config.json``: the
  record's calibration settings for the library, which the oracle then uses instead of
  its own strong ones. No evaluation run ever sees that file.

Each item leaves an audit directory: case_spec.json, the solver files, stdout.txt,
stderr.txt, solution.npz, meta.json and verdict.json.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import gates, metrics
from .calibration import Alphas, ResolvedThresholds, case_fingerprint, check_baseline
from .cases import CaseRecord, agent_view
from .grid import EvalGrid, valid_mask
from .kernel_cache import Harvest, KernelCache, run_cache_folder
from .libraries import Runtime, RuntimeMissing, detect_runtime, get_track
from .reference import reference_fields
from .sandbox import Limits, get_backend
from .submissions import Submission

VERDICT_FILE = "verdict.json"
# written beside case_spec.json in calibration runs only: the oracle's calibration settings
CALIBRATION_SETTING_FILE = "calibration_config.json"
# bumped when what a verdict means changes (2: outputs read without links, kernel store),
# so --pde-resume never reuses a verdict earned under older rules
HARNESS_REVISION = 2


@dataclass(frozen=True)
class Settings:
    output_dir: Path
    runs: int = 1
    timeout_sec: float | None = None  # overrides the case's timeout_sec
    memory_mb: int = 8192
    sandbox: str = "bubblewrap"
    calibrate: bool = False
    resume: bool = False
    alphas: Alphas = field(default_factory=Alphas)
    images: tuple[tuple[str, str], ...] = ()  # --pde-image: (track, image) run instead of the recipe's
    runner: str = "warm"  # --pde-runner: fork runs from a warmed zygote where the track and sandbox allow

    def runner_for(self, library: str) -> str:
        """The runner the library's runs get: warm (sandbox/warm.py) under bubblewrap for
        tracks with imports to share, else cold (a fresh interpreter per run)."""
        warm = self.runner == "warm" and self.sandbox == "bubblewrap" and get_track(library).warm_spec("") is not None
        return "warm" if warm else "cold"

    def runtime(self, library: str) -> Runtime:
        """The track's runtime under this sandbox; raises RuntimeMissing."""
        return detect_runtime(library, self.sandbox, dict(self.images).get(library))

    def runtime_tag(self, library: str) -> str:
        """What, besides the machine, a baseline belongs to: the image of a container run."""
        if self.sandbox != "docker":
            return ""
        try:
            return "docker-" + self.runtime(library).image.removeprefix("sha256:")[:12]
        except RuntimeMissing:  # its items skip and say why; no calibration can match meanwhile
            return "docker-unavailable"

    @property
    def calibrate_hint(self) -> str:
        return "" if self.sandbox == "bubblewrap" else f" -- --pde-sandbox={self.sandbox}"


@dataclass
class Verdict:
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
    t_first_run: float | None = None
    compile_sec: float | None = None  # compiled tracks: not part of t_agent
    compile_cached: bool | None = None
    compile_pch: bool | None = None
    cache_dropped: list[str] = field(default_factory=list)  # files the gated run cached that are no kernels
    timed_runs: list[float] = field(default_factory=list)
    rmse: float | None = None
    mae: float | None = None
    r2: float | None = None
    frmse: float | None = None
    total_variation: float | None = None
    solver_info: dict[str, Any] = field(default_factory=dict)
    calibration: str | None = None
    calibration_problem: str | None = None
    reference_norm: float | None = None
    submission: str = ""
    submission_fingerprint: str = ""  # hash of the solver and helpers that ran
    runtime_version: str = ""
    runtime_image: str | None = None  # the container backend: the image id the runs used
    sandbox: str = ""
    runner: str = ""  # warm (forked from a zygote) or cold (a fresh interpreter per run)
    artifacts: str = ""
    fingerprint: str = ""
    case_fingerprint: str = ""
    llm: dict[str, Any] | None = None  # --pde-model: the model, every attempt, tokens and cost
    alphas: dict[str, float] | None = None  # the multipliers and bounds tau_acc and tau_time came from
    timed_failure: str | None = None  # a timed run that failed (an F-Acc near miss's too)
    source_failure: bool = False  # F-Exec that is not the solver's: an agent crashed or hit a limit

    @classmethod
    def for_item(cls, record: CaseRecord, library: str, source: str, **fields) -> "Verdict":
        return cls(case_id=record.id, library=library, family=record.family,
                   math_type=list(record.pde_classification.math_type), domain=record.domain_type, source=source,
                   **fields)

    @property
    def passed(self) -> bool:
        return self.outcome == "PASS"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Verdict":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def calibration_setting(record: CaseRecord, library: str) -> dict | None:
    """The settings the oracle calibrates this item with, or None (then it uses its own)."""
    config = record.evaluation_metadata.calibration_config
    setting = config.settings.get(library) if config else None
    return setting.model_dump(exclude_none=True) if setting else None


def item_directory(settings: Settings, library: str, case_id: str) -> Path:
    return settings.output_dir / library / case_id


def _fingerprint(record: CaseRecord, library: str, submission: Submission, thresholds, settings: Settings) -> str:
    parts = [HARNESS_REVISION, case_fingerprint(record, library), library, submission.fingerprint,
             asdict(thresholds) if thresholds else None, settings.runs, settings.timeout_sec, settings.calibrate,
             settings.sandbox]
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


class ItemRun:
    """The runs of one submission on one case, sharing a compile cache."""

    def __init__(self, record: CaseRecord, library: str, submission: Submission, item_dir: Path, settings: Settings):
        self.record, self.library, self.submission, self.item_dir = record, library, submission, item_dir
        self.track = get_track(library)
        self.runtime = settings.runtime(library)
        self.backend = get_backend(settings.sandbox)
        self.warm = settings.runner_for(library) == "warm"
        timeout = settings.timeout_sec or record.evaluation_config.timeout_sec
        self.limits = Limits(timeout_sec=timeout, memory_mb=settings.memory_mb)
        store = self.track.kernel_store(self.runtime, submission.fingerprint) or item_dir / ".kernels"
        self.kernels = KernelCache(store, self.track.kernel_rules)
        self.count = 0
        # calibration runs only: the record's calibration baseline settings for this library
        self.calibration_setting = calibration_setting(record, library) if settings.calibrate else None
        self.executable: Path | None = None
        self.harvest: Harvest | None = None

    def prepare_item_dir(self) -> None:
        if self.item_dir.exists():
            shutil.rmtree(self.item_dir)
        self.item_dir.mkdir(parents=True)
        self.kernels.store.mkdir(parents=True, exist_ok=True)  # inside item_dir, or a track's persistent one
        self._write_inputs(self.item_dir)

    def _write_inputs(self, directory: Path) -> None:
        (directory / "case_spec.json").write_text(json.dumps(agent_view(self.record, self.library), indent=1))
        if self.calibration_setting is not None:
            (directory / CALIBRATION_SETTING_FILE).write_text(json.dumps(self.calibration_setting))
        if self.executable is not None:  # compiled tracks run the program, not the sources
            shutil.copy2(self.executable, directory / self.executable.name)
            return
        for name, content in self.submission.files.items():
            (directory / name).write_bytes(content)

    def build(self):
        """Compile once per item, in the sandbox, for tracks that have a build step."""
        build_dir = self.item_dir / ".build"
        build_dir.mkdir()
        for name, content in self.submission.files.items():
            (build_dir / name).write_bytes(content)
        result = self.track.build(self.runtime, self.submission.files, self.submission.solver_name, build_dir,
                                  self.backend, self.limits)
        if result is not None and result.log is not None:
            (self.item_dir / "compile.log").write_text(result.log)
        if result is not None and result.executable is not None:
            self.executable = result.executable
        return result

    def run(self, harvest_kernels: bool = False):
        """One fresh run: its own working folder, and a cache folder holding only the stored
        kernels (read-only). With ``harvest_kernels`` the kernels it compiled are kept for
        later runs; anything else it wrote is gone with its folders. Returns (RunResult,
        its working directory)."""
        self.count += 1
        workdir = self.item_dir / ".work" / str(self.count)
        workdir.mkdir(parents=True)
        cache = run_cache_folder(self.item_dir / ".cache" / str(self.count))
        self._write_inputs(workdir)
        request = self.track.run_request(self.runtime, self.submission.solver_name, workdir, cache, self.limits)
        request.kernels = self.kernels.store
        if self.warm:
            request.warm = self.track.warm_spec(self.submission.solver_name)
        try:
            self.kernels.prepare(cache, self.backend.paths(request)["kernels"])
            result = self.backend.run(request)
            if harvest_kernels:
                self.harvest = self.kernels.harvest(cache)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        return result, workdir

    def cleanup(self) -> None:
        for scratch in (".work", ".build", ".cache", ".kernels"):
            shutil.rmtree(self.item_dir / scratch, ignore_errors=True)


def evaluate(record: CaseRecord, library: str, submission: Submission, source_label: str,
             thresholds: ResolvedThresholds | None, settings: Settings, case_dir: Path | None,
             item_dir: Path | None = None) -> Verdict:
    """Run the gates for one item and write its verdict.json (in ``item_dir``, by default
    the item's folder). Raises RuntimeMissing."""
    item_dir = item_dir or item_directory(settings, library, record.id)
    fingerprint = _fingerprint(record, library, submission, thresholds, settings)
    if settings.resume:
        previous = load_verdict(item_dir)
        if previous and previous.fingerprint == fingerprint:
            return previous
    runs = ItemRun(record, library, submission, item_dir, settings)
    verdict = Verdict.for_item(
        record, library, source_label, submission=submission.origin, submission_fingerprint=submission.fingerprint,
        runtime_version=runs.runtime.version,
        runtime_image=runs.runtime.image,
        sandbox=runs.backend.name, runner=settings.runner_for(library), artifacts=str(item_dir), fingerprint=fingerprint,
        case_fingerprint=case_fingerprint(record, library),
    )
    if thresholds is not None:
        verdict.e_base, verdict.t_base = thresholds.e_base, thresholds.t_base
        verdict.tau_acc, verdict.tau_time, verdict.calibration = thresholds.tau_acc, thresholds.tau_time, thresholds.source
        verdict.alphas = thresholds.factors
    runs.prepare_item_dir()
    try:
        _run_gates(record, runs, verdict, thresholds, settings, case_dir)
        verdict.outcome, verdict.reason = "PASS", ""
    except gates.GateFailure as failure:
        verdict.outcome, verdict.reason = failure.outcome, failure.reason
    finally:
        runs.cleanup()
    (item_dir / VERDICT_FILE).write_text(json.dumps(verdict.to_dict(), indent=1, default=str) + "\n")
    return verdict


def _keep_logs(result, item_dir: Path) -> None:
    (item_dir / "stdout.txt").write_text(result.stdout)
    (item_dir / "stderr.txt").write_text(result.stderr)


def _run_gates(record, runs: ItemRun, verdict: Verdict, thresholds, settings: Settings, case_dir) -> None:
    spec = record.case_spec_dict()
    grid = EvalGrid.from_spec(spec["eval_grid"])
    valid = valid_mask(spec, grid)
    reference = reference_fields(record, grid, case_dir)  # before any run: a missing reference stops here

    # gate 1: execution and output format (compiled tracks: compilation first, timed apart)
    build = runs.build()
    if build is not None:
        verdict.compile_sec, verdict.compile_cached, verdict.compile_pch = build.seconds, build.cached, build.used_pch
        if build.failure:
            raise gates.exec_failure(build.failure)
    result, workdir = runs.run(harvest_kernels=True)
    _keep_logs(result, runs.item_dir)
    verdict.t_first_run = result.solve_sec
    verdict.cache_dropped = runs.harvest.dropped[:20]
    failure = result.failure_reason()
    if failure:
        raise gates.exec_failure(failure)
    # outputs are read once, as regular files of the run folder; the audit copy is those bytes
    names = record.case_spec.output.arrays
    solution_bytes = gates.read_solution_file(workdir, names, grid, runs.track.binary_outputs)
    meta, meta_bytes = gates.read_meta(workdir)
    verdict.solver_info = meta.get("solver_info") or {}
    solution = gates.read_solution(solution_bytes, names, grid.axis_names, grid.shape, valid)
    (runs.item_dir / "solution.npz").write_bytes(solution_bytes)
    (runs.item_dir / "meta.json").write_bytes(meta_bytes)

    # gate 2: accuracy against the reference
    verdict.reference_norm = float(np.linalg.norm(reference[valid]))
    verdict.error = metrics.relative_l2_error(solution, reference, valid)
    for key, value in metrics.diagnostics(solution, reference, valid).items():
        setattr(verdict, key, value)
    inaccurate = None
    if not settings.calibrate:
        try:
            gates.accuracy_gate(verdict.error, thresholds.tau_acc)
        except gates.GateFailure as failure:
            # timed all the same when a looser alpha_acc of the sensitivity grid would accept
            # it: the report re-gates from stored numbers (costs the timed runs of near misses)
            if not thresholds.accurate_under_some_sensitivity_alpha(verdict.error):
                raise
            inaccurate = failure

    # gate 3: runtime, over warm repeated runs
    for index in range(settings.runs):
        timed, _ = runs.run()
        failure = timed.failure_reason() or (None if timed.solve_sec is not None else "no start marker")
        if failure:
            verdict.timed_failure = f"timed run {index + 1} failed: {failure}"
            raise inaccurate or gates.exec_failure(verdict.timed_failure)
        verdict.timed_runs.append(timed.solve_sec)
    verdict.t_agent = statistics.fmean(verdict.timed_runs)
    if inaccurate:
        raise inaccurate
    if settings.calibrate:
        verdict.e_base, verdict.t_base = verdict.error, verdict.t_agent
        verdict.calibration_problem = check_baseline(record, verdict.error, verdict.t_agent, verdict.solver_info,
                                                     verdict.reference_norm, settings.alphas, runs.calibration_setting)
    else:
        gates.time_gate(verdict.t_agent, thresholds.tau_time)
