"""The state of one pytest run of the benchmark, built from the ``--pde-*`` options (options.py).

Workers of pytest-xdist build the same object from the same options, so nothing here
depends on which process evaluates an item; verdicts travel back on the test reports.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from .bundled import baselines_folder
from .calibration import CalibrationStore
from .cases import CaseRecord
from .kept_baselines import KeptBaselines
from .libraries import RuntimeMissing
from .machine import machine_key
from .placement import SIBLING_SEED, Placement
from .settings import Settings, gates_note
from .shards import Shard
from .sources import Source
from .sources.folder import DirectorySource
from .speed import RunConditions

# the runs' modules (attempts, evaluation, the sandboxes, the baseline pass) are imported where
# items run, not here: pytest's start and the collection of the items need none of them
if TYPE_CHECKING:  # the cluster package imports Dask (optional, and slow to import): only with --pde-cluster
    from .cluster.controller import Cluster
    from .evaluation import Verdict
    from .scheduling import RunAhead


def workers(config: pytest.Config) -> int:
    """How many items run at once (pytest-xdist workers, else 1)."""
    if hasattr(config, "workerinput"):
        return int(config.workerinput.get("workercount", 1))
    count = getattr(config.option, "numprocesses", None)
    return count if isinstance(count, int) and count > 0 else 1


def terminate_as_interrupt() -> None:
    """SIGTERM (Slurm at the time limit, `timeout`, `kill`) ends a run as Ctrl-C does:
    finished verdicts and the JSON report kept, the running solver killed, no container
    left. Only where nobody else has claimed the signal."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, interrupt)


def pin_worker(config: pytest.Config) -> None:
    """One core per xdist worker (when there are enough): a baseline and an evaluation
    then time each solve on a core of its own, whatever else the other workers do."""
    if not hasattr(config, "workerinput") or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    index = int(config.workerinput.get("workerid", "gw0")[2:] or 0)
    if workers(config) <= len(cores):
        os.sched_setaffinity(0, {cores[index]})


@dataclass
class PdeRun:
    """The session: its options as parsed (``options.run_from_config`` makes it), where items
    are placed (``placement``), the runs sent ahead on a cluster (``ahead``), its run
    conditions (``timing``) and the report's metadata. The verdicts are the recorder's
    (hooks.py), which gathers them from the reports."""

    config: pytest.Config
    cases_path: Path
    libraries: tuple[str, ...]
    source: Source  # a folder of solvers, a model or a code agent (sources.py)
    settings: Settings
    store: CalibrationStore
    validate: bool = False
    static_only: bool = False
    libraries_chosen: bool = True  # False: the tracks a folder has solvers for (the header says so)
    case_count: int = 0  # the records under cases_path (the header names both)
    cluster: Cluster | None = None  # --pde-cluster: the runs happen on its workers
    shard: Shard | None = None  # --pde-shard: this run's part of the selection
    shard_info: dict | None = None  # which part, of what selection (shards.merge_reports checks it)
    _pass_folder: Path | None = field(default=None, repr=False)  # xdist controller: the workers' baseline pass

    def __post_init__(self):
        vary = None
        if self.settings.variant_seed is not None or self.settings.sibling:
            from .live_variants import LiveVariants  # sympy: slow to import, only for runs that vary cases

            oracle = self.settings.oracle_dir
            vary = LiveVariants(oracle / "dolfinx" if oracle else None).of
        kept = None
        if self.settings.baseline == "local":
            kept = KeptBaselines(baselines_folder(), self.store.machine_for)
        self.timing = RunConditions(
            self.settings, self.store, self.cluster.size if self.cluster else workers(self.config), kept
        )
        self.placement = Placement(self.settings, self.store, self.cluster, vary=vary, local=self.timing)
        self.ahead: RunAhead | None = None
        if self.cluster is not None:
            from .scheduling import RunAhead

            self.ahead = RunAhead(self.cluster, self.source, self.placement)

    def evaluate(self, record: CaseRecord, library: str, case_dir: Path, machine: str | None = None) -> Verdict:
        """The item's verdict; ``machine``: the class of a cluster's workers it calibrates.
        Raises placement.NoCalibration."""
        from .attempts import run_attempts

        # planned before any model call: no money spent on an item that cannot be judged;
        # an item whose runs were sent ahead on a cluster has its plan already
        plan = self.ahead.plan_of(record.id, library, machine) if self.ahead is not None else None
        if plan is None:
            plan = self.placement.plan(record, library, case_dir, machine)
        if self.ahead is None:
            return run_attempts(self.source, plan, self.settings)
        self.ahead.turn_of(plan)
        try:
            return run_attempts(self.source, plan, self.settings)
        finally:
            self.ahead.done_with(plan)

    def pass_folder(self) -> Path | None:
        """xdist controller: the folder its workers share for the baseline pass (made once)."""
        if self.settings.times_baselines and self._pass_folder is None:
            self._pass_folder = Path(tempfile.mkdtemp(prefix="pytest-pdebench-baselines-"))
        return self._pass_folder

    @contextmanager
    def items_phase(self, session: pytest.Session) -> Iterator[None]:
        """Around the items' loop: first this machine's missing baselines, timed while no
        submission runs (baseline_pass.py); then the items, with this process counted among
        those running submissions on the machine. An xdist controller runs no item: it shows
        its workers' progress on the baselines."""
        from .baseline_pass import BaselinePass, Coordination, ProgressWatch
        from .machine_lock import submissions_running

        writer = self.config.get_terminal_writer()
        if self.config.pluginmanager.hasplugin("dsession"):
            watch = ProgressWatch(self._pass_folder, writer.line) if self._pass_folder else None
            try:
                yield
            finally:
                if watch is not None:
                    watch.stop()
            return
        if self.settings.times_baselines:
            given = getattr(self.config, "workerinput", {})  # an xdist worker's
            shared, coordination = given.get("pdebench_pass"), None
            if shared:
                worker = given.get("workerid", "gw0")
                coordination = Coordination(Path(shared), worker, workers(self.config))
            BaselinePass(self, writer.line, coordination).time_all(session.items)
        with submissions_running(writer.line):  # the oracle's calibration runs load the machine too
            yield

    def prefetch(self, items) -> None:
        """--pde-cluster: send the runs of the collected items ahead (scheduling.py)."""
        if self.ahead is not None:
            self.ahead.prefetch(items)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
        if self._pass_folder is not None:
            shutil.rmtree(self._pass_folder, ignore_errors=True)

    def missing_track(self, library: str) -> str | None:
        """Why a library's items cannot run at all (they are "not run"), or None: its runtime
        is absent here, or the submission folder has no solver for it."""
        try:
            self.settings.runtime(library)
        except RuntimeMissing as exc:
            return str(exc)
        if isinstance(self.source, DirectorySource) and not self.validate and not self.settings.calibrate:
            if library not in cast(DirectorySource, self.source).tracks(self.libraries):
                return f"no solver for {library} in {self.source.directory} (see the solver contract's folder layout)"
        return None

    def present_libraries(self) -> list[str]:
        """The run's libraries whose items can run (``missing_track``: the others are not run)."""
        return [library for library in self.libraries if self.missing_track(library) is None]

    def session_metadata(self) -> dict:
        machine_info: dict = {}
        self.config.hook.pytest_pdebench_machine_info(config=self.config, machine_info=machine_info)
        return {
            "machine": machine_key(),
            **({"machine_info": machine_info} if machine_info else {}),
            **({"cluster": self.cluster.metadata()} if self.cluster else {}),
            **({"shard": self.shard_info} if self.shard_info else {}),
            "source": self.source.label,
            "libraries": list(self.libraries),
            "cases": str(self.cases_path),
            "calibrations": str(self.store.directory),
            "output": str(self.settings.output_dir),
            "runs": self.settings.runs,
            "sandbox": self.settings.sandbox,
            "mode": self.mode,
            "baseline": self.settings.baseline,
            **({"gates": gates_note(dict(self.settings.gate_options))} if self.settings.gate_options else {}),
            **({"oracle": str(self.settings.oracle_dir)} if self.settings.baseline == "paired" else {}),
            **({"variant_seed": self.settings.variant_seed} if self.settings.variant_seed is not None else {}),
            **({"sibling_seed": SIBLING_SEED + (self.settings.variant_seed or 0)} if self.settings.sibling else {}),
            "runner": {library: self.settings.runner_for(library) for library in self.libraries},
            "speed_probe_sec": self.timing.probe_sec(),
            "speed_drift": {library: self.timing.drift(library) for library in self.libraries},
            **_images(self.settings, self.libraries),
        }

    @property
    def mode(self) -> str:
        return "validation" if self.validate else "calibration" if self.settings.calibrate else "evaluation"


def _images(settings: Settings, libraries) -> dict:
    """The container backend: the image id and digest each library ran in."""
    if settings.sandbox != "docker":
        return {}
    from .containers import image_digest

    images = {}
    for library in libraries:
        try:
            image = settings.runtime(library).image
        except RuntimeMissing:
            continue
        images[library] = {"id": image, "digest": image_digest(cast(str, image))}  # a container runtime's
    return {"images": images}
