"""What happens where a submission runs: the build, the gated run, the timed runs.

A ``RunTask`` holds only what the agent may see (the agent view of the case, the
submission's files, the limits); an ``Execution`` holds what the runs produced (logs,
the outputs' bytes, timings). Neither knows the reference, the thresholds or the exact
solution: the gates (``judge.py``) judge an ``Execution`` where the answer lives.
``execute`` runs in this process for a local run and on a cluster worker for
``--pde-cluster`` (``cluster/worker.py``); both go through this one function, so what is timed
is the same wherever it runs.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from . import gates
from .grid import EvalGrid
from .kernel_cache import Harvest, KernelCache
from .libraries import detect_runtime, get_track
from .machine import machine_key
from .run_folders import Scratch, freeze_tree, remove_tree, tree_bytes
from .sandbox import RUNNER, Limits, get_backend
from .sources import Submission

# written beside case_spec.json in calibration runs only: the oracle's calibration settings
CALIBRATION_SETTING_FILE = "calibration_config.json"


@dataclass(frozen=True)
class RunTask:
    """One item's runs, as a run site receives them (nothing evaluator-only inside)."""

    library: str
    case_id: str
    case_spec: dict  # the agent view (cases.agent_view)
    output_names: tuple[str, ...]
    submission: Submission
    limits: Limits
    runs: int  # timed runs after the gated one
    sandbox: str
    runner: str  # warm or cold (Settings.runner_for)
    image: str | None = None  # --pde-image for this library
    calibration_setting: dict | None = None  # calibration runs only
    # the baseline pass: a coarser calibration setting, run twice before the gated run (_Side.warm_up)
    warmup_setting: dict | None = None
    # --pde-baseline=paired: the oracle's task for the same case, its runs alternating with these
    baseline: RunTask | None = None

    @property
    def grid(self) -> EvalGrid:
        return EvalGrid.from_spec(self.case_spec["case_spec"]["eval_grid"])

    def input_files(self, setting: dict | None = None) -> dict[str, bytes]:
        """What every run's working folder (and the audit folder) starts with; ``setting``:
        a warm-up run's calibration setting instead of the task's."""
        files = {"case_spec.json": json.dumps(self.case_spec, indent=1).encode()}
        setting = setting or self.calibration_setting
        if setting is not None:
            files[CALIBRATION_SETTING_FILE] = json.dumps(setting).encode()
        return files


@dataclass
class RunOutputs:
    """What a timed run left, read by the rules of the gated run's outputs; judged too."""

    solution: bytes | None  # None: byte for byte the gated run's solution
    meta: bytes
    cpu_sec: float | None = None  # CPU time of the run's processes over its timed window


@dataclass(kw_only=True)
class RunFacts:
    """What the runs measured that a verdict reports as it is: ``Execution`` carries them
    from the runs, ``Verdict`` (verdict.py) takes them over with ``take_facts``. The
    timed runs are not among them: a verdict keeps those only once the gates reach them."""

    runtime_version: str = ""
    runtime_image: str | None = None  # the container backend: the image id the runs used
    compile_sec: float | None = None  # compiled tracks: not part of t_agent
    compile_cached: bool | None = None
    compile_pch: bool | None = None
    t_first_run: float | None = None
    # the baseline pass: the two warm-up runs' windows (kernels compiled, then found), and how
    # many kernels the gated run still compiled after them (0: it ran warm and is timed run 1)
    warmup_runs: list[float] = field(default_factory=list)
    gated_compiled: int | None = None
    cache_dropped: list[str] = field(default_factory=list)  # files the gated run cached that are no kernels
    machine: str = ""  # the kind of machine that timed it (calibration.py)
    worker: str = ""  # --pde-cluster: the Dask worker that ran it

    def take_facts(self, other: RunFacts) -> None:
        for name in RunFacts.__dataclass_fields__:
            value = getattr(other, name)
            setattr(self, name, list(value) if isinstance(value, list) else value)


@dataclass(kw_only=True)
class Execution(RunFacts):
    """What the runs of one task produced; judged by the gates."""

    compile_log: str | None = None
    compile_failure: str | None = None
    stdout: str = ""
    stderr: str = ""
    run_failure: str | None = None  # the gated run did not exit cleanly
    solution: bytes | None = None  # solution.npz as the gated run wrote it (binary outputs packed)
    meta: bytes | None = None
    output_failure: str | None = None  # the gated run's files break the output contract (F-Exec)
    timed: bool = False  # the timed runs were asked for
    timed_runs: list[float] = field(default_factory=list)
    timed_outputs: list[RunOutputs] = field(default_factory=list)  # one per timed run, in order
    timed_failure: str | None = None
    host: str = field(default_factory=socket.gethostname)
    machine: str = field(default_factory=machine_key)
    site_sec: float | None = None  # the whole execution where it ran (a cluster's overhead is the rest)
    baseline: Execution | None = None  # --pde-baseline=paired: what the oracle's runs beside these produced

    @property
    def ran(self) -> bool:
        """The gated run exited cleanly (its outputs are for the gates)."""
        return self.compile_failure is None and self.run_failure is None and self.output_failure is None

    def without_timing(self) -> Execution:
        """The same execution as if the timed runs had not been asked for."""
        self.timed, self.timed_runs, self.timed_outputs, self.timed_failure = False, [], [], None
        if self.baseline is not None:
            self.baseline.without_timing()
        return self


class ItemRun:
    """The runs of one submission on one case, sharing a compile cache.

    Every run sees the same thing: its working folder is ``/sandbox/work`` bound from
    the same host folder (``<scratch>/work``, made anew before each run at the same path,
    in a scratch folder of a random name outside the item's audit folder), its cache
    folder likewise, the inputs and every folder the harness provides with the same
    times (``freeze_tree``). No bind source, path, variable or time names the item, the
    case, the submission or the run's number; the gated run and a timed run cannot tell
    each other apart from what the harness shows them (tests/test_redteam.py compares
    them). What they can differ in is what the kernel store holds: the kernels the gated
    run compiled, which is what the store is for; every run's outputs are judged, so a
    run that knew it was timed would gain nothing."""

    def __init__(self, task: RunTask, workspace: Path):
        self.task, self.workspace = task, workspace
        self.track = get_track(task.library)
        self.runtime = detect_runtime(task.library, task.sandbox, task.image)
        self.backend = get_backend(task.sandbox)
        self._scratch = Scratch()
        self.scratch = self._scratch.path
        self.work, self.cache, self.tmp = self.scratch / "work", self.scratch / "cache", self.scratch / "tmp"
        self.harness = self.scratch / "harness"  # runner.py, as every run sees it
        self.harness.mkdir()
        shutil.copy(RUNNER, self.harness / RUNNER.name)
        freeze_tree(self.harness)
        # one store per item, empty for its gated run: nothing a run leaves there reaches
        # another item, a later session, or the gated run that the first-run gate times
        self.kernels = KernelCache(
            self.scratch / "kernels",
            self.track.kernel_rules,
            self.track.kernel_files_per_run,
            self.track.kernel_bytes_per_run,
        )
        self.kernels.store.mkdir()
        self.count, self.left_bytes = 0, 0
        # a submission that never names the track's libraries: its runs skip their start-up
        self.imports_track = self.track.imports_track(self.task.submission.files)
        self.executable: Path | None = None
        self.harvest: Harvest | None = None

    def _write_inputs(self, directory: Path, setting: dict | None = None) -> None:
        for name, content in self.task.input_files(setting).items():
            (directory / name).write_bytes(content)
        if self.executable is not None:  # compiled tracks run the program, not the sources
            shutil.copy2(self.executable, directory / self.executable.name)
            return
        for name, content in self.task.submission.files.items():
            (directory / name).write_bytes(content)

    def build(self):
        """Compile once per item, in the sandbox, for tracks that have a build step."""
        build_dir = self.scratch / "build"
        build_dir.mkdir()
        submission = self.task.submission
        for name, content in submission.files.items():
            (build_dir / name).write_bytes(content)
        result = self.track.build(
            self.runtime, submission.files, submission.solver_name, build_dir, self.backend, self.task.limits
        )
        if result is not None and result.executable is not None:
            self.executable = result.executable
        return result

    def _fresh(self, folder: Path) -> None:
        """An empty ``folder`` at the same path: the last run's goes to the trash first."""
        if folder.exists():
            folder.rename(self.scratch / f"trash-{self.count}-{folder.name}")
        folder.mkdir()

    def run(self, harvest_kernels: bool = False, setting: dict | None = None):
        """One fresh run: an empty working folder with the inputs, and a cache folder
        holding only the stored kernels (read-only). With ``harvest_kernels`` the kernels
        it compiled are kept for later runs; anything else it wrote is gone with its
        folders; ``setting``: a warm-up run's calibration setting. Returns (RunResult, its
        working directory, read until the next run)."""
        self.count += 1
        for folder in (self.work, self.cache, self.tmp):
            self._fresh(folder)
        for trash in self.scratch.glob("trash-*"):
            remove_tree(trash)
        self._write_inputs(self.work, setting)
        solver_name = self.task.submission.solver_name
        request = self.track.run_request(
            self.runtime, solver_name, self.work, self.cache, self.task.limits, self.imports_track
        )
        request.kernels, request.item = self.kernels.store, str(self.workspace)
        request.tmp_dir, request.harness_dir = self.tmp, self.harness
        if self.task.runner == "warm":
            request.warm = self.track.warm_spec(solver_name, self.imports_track)
        self.kernels.prepare(self.cache, self.backend.paths(request)["kernels"])
        for folder in (self.work, self.cache, self.tmp):
            freeze_tree(folder)
        result = self.backend.run(request)
        self.left_bytes = tree_bytes(self.work, self.cache, self.tmp)
        if harvest_kernels:
            self.harvest = self.kernels.harvest(self.cache)
        return result, self.work

    def over_cap(self) -> str | None:
        """Why the last run left too much in its folders, or None: they live in memory, so
        they count against the run's memory limit (--pde-memory-mb)."""
        cap = self.task.limits.memory_mb << 20
        if self.left_bytes <= cap:
            return None
        return (
            f"the run left {self.left_bytes >> 20} MB in its folders, over its memory limit of "
            f"{cap >> 20} MB (--pde-memory-mb)"
        )

    def clear(self) -> None:
        """Free the last run's folders once its outputs are read, before any other run (the
        other side of a paired item included) starts."""
        for folder in (self.work, self.cache, self.tmp):
            if folder.exists():
                remove_tree(folder)

    def cleanup(self) -> None:
        self._scratch.remove()


def read_outputs(task: RunTask, track, workdir: Path) -> tuple[bytes, bytes]:
    """(solution.npz, meta.json) of a run as the gates read them; GateFailure if they break
    the output contract. Read once, as regular files of the run folder: the audit copy is
    those bytes."""
    solution = gates.read_solution_file(workdir, list(task.output_names), task.grid, track.binary_outputs)
    return solution, gates.read_meta(workdir)[1]


def unreadable(failure: Exception) -> str:
    """Why a run's outputs cannot be judged: the gate's reason, or what a reader raised."""
    if isinstance(failure, gates.GateFailure):
        return failure.reason
    return f"the outputs could not be read ({type(failure).__name__}: {str(failure)[:200]})"


# where an item's runs happen: ``execute`` here, or a cluster's executor (cluster/controller.py)
Executor = Callable[[RunTask, Path, Callable[[Execution], bool]], Execution]


def execute(task: RunTask, workspace: Path, time_it: Callable[[Execution], bool] | None = None) -> Execution:
    """The build, the gated run and, if its outputs are well formed and ``time_it`` agrees
    (None: always), ``task.runs`` timed runs, in a scratch folder (removed at the end).
    Every timed run's outputs are read as the gated run's are, for the gates to judge.

    With ``task.baseline`` (a paired baseline) the oracle's runs happen here too, in
    the same sandbox and runner: its build and gated run first (a failed oracle ends the
    item before the submission runs), then the submission's; the timed runs alternate,
    the submission first in odd rounds and the oracle first in even ones, so that a
    drift in the machine's speed falls on both alike. Its results go to ``baseline``.
    Raises RuntimeMissing and SandboxError (not the solver's fault)."""
    sides = [_Side(task, workspace)]
    try:
        if task.baseline is not None:
            sides.insert(0, _Side(task.baseline, workspace))
        done = sides[-1].done
        done.baseline = sides[0].done if task.baseline is not None else None
        for side in sides:  # the oracle first: nothing of the submission runs for an item it cannot judge
            if not side.gated():
                return done
        if time_it is not None and not time_it(done):
            return done
        for side in sides:
            side.done.timed = True
        for number in range(1, task.runs + 1):
            order = sides[::-1] if number % 2 else sides  # odd rounds: the submission first
            for side in order:
                if not side.timed(number):
                    return done
        return done
    finally:
        for side in sides:
            side.runs.cleanup()


def named(failure: str | None, submission: Submission) -> str | None:
    """A run's failure with the sandbox's name of the solver file (``solver.py, line 3``)
    replaced by the file the submission came from, which is the one its author edits."""
    if failure is None or not submission.origin:
        return failure
    return failure.replace(f"({submission.solver_name}, line", f"({submission.origin}, line")


class _Side:
    """One submission's runs within ``execute``: the submission's, or a paired oracle's."""

    def __init__(self, task: RunTask, workspace: Path):
        self.task = task
        self.runs = ItemRun(task, workspace)
        self.done = Execution(runtime_version=self.runs.runtime.version, runtime_image=self.runs.runtime.image)
        self._warm_gated: tuple[float, float | None] | None = None  # the gated run's window and CPU, if it ran warm

    def warm_up(self) -> None:
        """The baseline pass (``task.warmup_setting``): the oracle twice at a coarse setting
        before its gated run. The same element degree compiles the same kernels on a small
        mesh; the first run keeps them, the second finds them, and the difference of their
        windows is what compiling adds to a cold run (``warmup_runs``). A warm-up that fails
        leaves the store empty again and no figures: the gated run is then a cold first run."""
        runs, windows = self.runs, []
        for harvest in (True, False):
            result, _ = runs.run(harvest_kernels=harvest, setting=self.task.warmup_setting)
            runs.clear()
            if result.failure_reason() or result.solve_sec is None:
                runs.kernels.empty()
                return
            windows.append(result.solve_sec)
        self.done.warmup_runs = windows

    def gated(self) -> bool:
        """The build and the gated run; whether its outputs are there to judge."""
        runs, done = self.runs, self.done
        build = runs.build()
        if build is not None:
            done.compile_sec, done.compile_cached, done.compile_pch = build.seconds, build.cached, build.used_pch
            done.compile_log, done.compile_failure = build.log, build.failure
            if build.failure:
                return False
        if self.task.warmup_setting is not None:
            self.warm_up()
        result, workdir = runs.run(harvest_kernels=True)
        done.stdout, done.stderr, done.t_first_run = result.stdout, result.stderr, result.solve_sec
        harvest = cast(Harvest, runs.harvest)  # set by the run above
        done.cache_dropped = harvest.dropped[:20]
        if done.warmup_runs:
            done.gated_compiled = harvest.kept
            if harvest.kept == 0 and result.solve_sec is not None:  # it ran warm: it times as a timed run does
                self._warm_gated = (result.solve_sec, result.cpu_sec)
        done.run_failure = named(result.failure_reason(), self.task.submission) or runs.over_cap()
        try:
            if done.run_failure:
                return False
            done.solution, done.meta = read_outputs(self.task, runs.track, workdir)
        except Exception as failure:  # noqa: BLE001 - whatever a reader raises, the item keeps a verdict
            done.output_failure = unreadable(failure)
            return False
        finally:
            runs.clear()
        return True

    def timed(self, number: int) -> bool:
        """Timed run ``number``; False (and ``timed_failure`` said) if it failed. After a
        warm-up whose kernels the gated run found complete, that run is timed run 1."""
        runs, done = self.runs, self.done
        if number == 1 and self._warm_gated is not None:
            window, cpu = self._warm_gated
            done.timed_runs.append(window)
            done.timed_outputs.append(RunOutputs(None, cast(bytes, done.meta), cpu))
            return True
        timed, workdir = runs.run()
        reason = named(timed.failure_reason(), self.task.submission) or runs.over_cap()
        reason = reason or (None if timed.solve_sec is not None else "no start marker")
        try:
            if reason:
                done.timed_failure = f"timed run {number} failed: {reason}"
                return False
            solution, meta = read_outputs(self.task, runs.track, workdir)
        except Exception as failure:  # noqa: BLE001 - as the gated run's
            done.timed_failure = f"timed run {number}: {unreadable(failure)}"
            return False
        finally:
            runs.clear()
        done.timed_runs.append(timed.solve_sec)
        done.timed_outputs.append(RunOutputs(None if solution == done.solution else solution, meta, timed.cpu_sec))
        return True
