"""The state of one pytest run of the benchmark, built from the ``--pde-*`` options.

Workers of pytest-xdist build the same object from the same options, so nothing here
depends on which process evaluates an item; verdicts travel back on the test reports.
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .calibration import Alphas, CalibrationStore, machine_key, now_iso
from .cases import LIBRARIES, CaseRecord
from .evaluation import Settings, Verdict, evaluate
from .libraries import RuntimeMissing
from .submissions import DirectorySource

if TYPE_CHECKING:
    from .attempts import Source
    from .cluster.controller import Cluster
    from .shards import Shard

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ORACLE = "submissions/oracle"


class PdeBenchWarning(UserWarning):
    pass


def _bundled(rootdir: Path, name: str) -> Path:
    """A top-level folder of the project: the rootdir's if it has one, else the package's checkout."""
    here = rootdir / name
    return here if here.exists() else PACKAGE_ROOT / name


def _libraries(values: list[str] | None) -> tuple[str, ...]:
    if not values:
        return LIBRARIES
    chosen: list[str] = []
    for value in values:
        for name in filter(None, (v.strip().lower() for v in value.split(","))):
            if name not in LIBRARIES:
                raise pytest.UsageError(f"--pde-library: unknown library {name!r}; choose from {', '.join(LIBRARIES)}")
            if name not in chosen:
                chosen.append(name)
    return tuple(chosen)


def _image_overrides(values: list[str]) -> tuple[tuple[str, str], ...]:
    chosen = {}
    for value in values:
        track, sep, image = value.partition("=")
        track = track.strip().lower()
        if not sep or not image.strip() or track not in LIBRARIES:
            raise pytest.UsageError(f"--pde-image {value!r}: expected TRACK=IMAGE with TRACK one of "
                                    f"{', '.join(LIBRARIES)} (e.g. dolfinx=dolfinx/dolfinx:v0.11.0)")
        chosen[track] = image.strip()
    return tuple(sorted(chosen.items()))


def _shard(value: str | None):
    from .shards import Shard, ShardError

    try:
        return Shard.parse(value) if value else None
    except ShardError as exc:
        raise pytest.UsageError(str(exc)) from None


def _cluster(config: pytest.Config, libraries: tuple[str, ...], settings: Settings):
    """The Dask cluster of --pde-cluster (controller only: it replaces pytest-xdist)."""
    from .cluster.controller import Cluster, ClusterError

    if hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None):
        raise pytest.UsageError("--pde-cluster spreads the items over the cluster's workers: leave out -n "
                                "(xdist workers would each be a controller of their own)")
    terminate_as_interrupt()  # before the cluster, which notes SIGTERM as it does SIGINT
    try:
        cluster = Cluster(config.option.pde_cluster, list(libraries), settings.sandbox, dict(settings.images))
    except ClusterError as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        cluster.runtimes(libraries)  # workers that disagree stop the run here
    except ClusterError as exc:
        cluster.close()
        raise pytest.UsageError(str(exc)) from None
    return cluster


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
    import signal

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
    config: pytest.Config
    cases_path: Path
    libraries: tuple[str, ...]
    source: "Source"  # a folder of solvers, a model or a code agent (attempts.py)
    settings: Settings
    store: CalibrationStore
    validate: bool = False
    static_only: bool = False
    verdicts: list[dict] = field(default_factory=list)
    cluster: "Cluster | None" = None  # --pde-cluster: the runs happen on its workers
    _stores: dict = field(default_factory=dict)  # machine -> CalibrationStore (store_for)
    # --pde-cluster: (record, library, machine) of the items sent ahead, in order, and the next to send
    _queued: list = field(default_factory=list)
    _queue_position: dict = field(default_factory=dict)
    _queue_next: int = 0
    shard: "Shard | None" = None  # --pde-shard: this run's part of the selection
    shard_info: dict | None = None  # which part, of what selection (shards.merge_reports checks it)
    _speed_probe: float | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> "PdeRun | None":
        """None unless a source option asks for benchmark items."""
        opt = config.option
        validate = opt.pde_validate is not None
        submissions = opt.pde_submissions
        if opt.pde_agent and not opt.pde_model:
            raise pytest.UsageError("--pde-agent needs --pde-model: the model the agent works with")
        if opt.pde_model and (submissions or opt.pde_calibrate or validate):
            raise pytest.UsageError("--pde-model generates the solvers: it does not go with --pde-submissions, "
                                    "--pde-calibrate or --pde-validate")
        if submissions is None and (opt.pde_calibrate or validate):
            submissions = str(_bundled(config.rootpath, DEFAULT_ORACLE))
        if submissions is None and not opt.pde_model:
            return None
        rootdir = config.rootpath
        cases_path = Path(opt.pde_validate or opt.pde_cases or _bundled(rootdir, "cases"))
        if not cases_path.exists():
            raise pytest.UsageError(f"--pde-cases: no file or directory at {cases_path}")
        if opt.pde_runs < 1:
            raise pytest.UsageError("--pde-runs must be at least 1")
        settings = Settings(
            output_dir=Path("."), runs=opt.pde_runs, timeout_sec=opt.pde_timeout, memory_mb=opt.pde_memory_mb,
            sandbox=opt.pde_sandbox, calibrate=opt.pde_calibrate or validate, resume=opt.pde_resume,
            alphas=Alphas(opt.pde_alpha_acc, opt.pde_alpha_time, opt.pde_tau_min, opt.pde_tau_max),
            images=_image_overrides(opt.pde_image), runner=opt.pde_runner,
        )  # the output folder below, once the source has named the run
        if opt.pde_model:
            from .generation import model_source_from_options

            source = model_source_from_options(opt, rootdir, not hasattr(config, "workerinput"), settings)
            label = source.run_label
        else:
            try:
                source = DirectorySource(Path(submissions))
            except FileNotFoundError as exc:
                raise pytest.UsageError(str(exc)) from None
            label = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(submissions).resolve().name)
        mode = "validation" if validate else "calibration" if opt.pde_calibrate else "runs"
        output = Path(opt.pde_output) if opt.pde_output else rootdir / "reports" / mode / label
        settings = dataclasses.replace(settings, output_dir=output.resolve())
        calibrations = Path(opt.pde_calibrations) if opt.pde_calibrations else _bundled(rootdir, "calibrations")
        libraries = _libraries(opt.pde_library)
        cluster = _cluster(config, libraries, settings) if opt.pde_cluster and not validate else None
        if cluster is not None:
            settings = dataclasses.replace(settings, remote_runtimes=cluster.runtimes(libraries))
        return cls(config, cases_path.resolve(), libraries, source, settings,
                   CalibrationStore(calibrations, runtime_tag=settings.runtime_tag), validate=validate,
                   static_only=opt.pde_validate_static, cluster=cluster, shard=_shard(opt.pde_shard))

    def evaluate(self, record: CaseRecord, library: str, case_dir: Path, machine: str | None = None) -> Verdict:
        """The item's verdict; ``machine``: the class of a cluster's workers it calibrates."""
        from .attempts import run_attempts
        from .evaluation import item_directory

        # before any model call: no money spent on a non-starter
        thresholds, executor = self._thresholds_and_executor(record, library, machine)

        def gates(submission, attempt_dir):
            return evaluate(record, library, submission, self.source.label, thresholds, self.settings, case_dir,
                            item_dir=attempt_dir, executor=executor)

        self._skip_queue_to(record, library, machine)
        try:
            return run_attempts(self.source, record, library,
                                item_directory(self.settings, library, record.id, machine), gates)
        finally:
            if self.cluster is not None:
                self.cluster.discard(library, record.id)  # runs sent ahead that its evaluation never took
                self.top_up()

    def calibration_classes(self) -> list[str | None]:
        """The machine classes each record is calibrated on: every class of a cluster's
        workers when there are several (one item per class), else [None] (one item)."""
        if self.cluster is None or not self.settings.calibrate or len(self.cluster.machines()) < 2:
            return [None]
        return list(self.cluster.machines())

    def _thresholds_and_executor(self, record: CaseRecord, library: str, machine: str | None = None):
        """The item's thresholds and where its runs go: here, or (``--pde-cluster``) the workers
        of the first machine class that has a calibration for it, its own before a borrowed one
        (calibrating: the workers of ``machine``, or of the only class)."""
        if self.cluster is None:
            return self._thresholds(record, library, self.store), None
        classes = self.cluster.machines()
        if self.settings.calibrate:
            return None, self.cluster.executor(machine or next(iter(classes)))
        found = [(self.store_for(machine).thresholds(record, library, self.settings.alphas), machine)
                 for machine in classes]
        found = sorted((entry for entry in found if entry[0] is not None), key=lambda entry: entry[0].foreign_machine)
        if not found:
            pytest.fail(f"no calibration for case {record.id!r} on {library} for the machines of the cluster's "
                        f"workers ({', '.join(self.store_for(m).machine_for(library) for m in classes)}): run "
                        f"`pdebench calibrate --library {library} --cluster {self.cluster.address}` first",
                        pytrace=False)
        thresholds, machine = found[0]
        self._warn_if_foreign(record, library, thresholds, self.store_for(machine))
        return thresholds, self.cluster.executor(machine)

    def store_for(self, machine: str) -> CalibrationStore:
        """The calibrations of another kind of machine (a cluster's workers), read once."""
        if machine == self.store.machine:
            return self.store
        if machine not in self._stores:
            self._stores[machine] = CalibrationStore(self.store.directory, machine=machine,
                                                     runtime_tag=self.settings.runtime_tag)
        return self._stores[machine]

    def _thresholds(self, record: CaseRecord, library: str, store: CalibrationStore):
        thresholds = None
        if not self.settings.calibrate:
            thresholds = store.thresholds(record, library, self.settings.alphas)
            if thresholds is None:
                pytest.fail(
                    f"no calibration for case {record.id!r} on {library} (machine {store.machine_for(library)}): "
                    f"run `pdebench calibrate --library {library}{self.settings.calibrate_hint}` first", pytrace=False)
            self._warn_if_foreign(record, library, thresholds, store)
        return thresholds

    @staticmethod
    def _warn_if_foreign(record: CaseRecord, library: str, thresholds, store: CalibrationStore) -> None:
        if thresholds.foreign_machine:
            warnings.warn(PdeBenchWarning(
                f"{record.id}[{library}]: runtime threshold from the {thresholds.source}, not from the machine "
                f"that times it ({store.machine_for(library)}); `pdebench calibrate --library {library}` measures "
                "one there"))

    def write_calibration(self) -> dict[str, Path]:
        """Store the baselines of the passing calibration items (controller only)."""
        written = {}
        # each baseline goes to the machine that timed it (a cluster's worker, or this one)
        for library, machine in sorted({(v["library"], v.get("machine") or self.store.machine) for v in self.verdicts}):
            store = self.store_for(machine)
            entries = {
                v["case_id"]: {"e_base": v["e_base"], "t_base": v["t_base"], "t_first_run": v["t_first_run"],
                               "timed_runs": v["timed_runs"], "fingerprint": v["case_fingerprint"],
                               "solver_info": v["solver_info"], "runtime_version": v["runtime_version"],
                               "speed_probe_sec": self.speed_probe_sec(), "calibrated_at": now_iso()}
                for v in self.verdicts
                if v["library"] == library and (v.get("machine") or self.store.machine) == machine
                and v["outcome"] == "PASS" and not v["calibration_problem"]
            }
            if entries:
                written[f"{library} ({machine})" if self.cluster else library] = store.write(
                    library, entries, self.conditions(library))
        return written

    def keep_shard(self, items: list) -> tuple[list, list]:
        """--pde-shard: (this shard's items, the others) of the selected items."""
        from .shards import assign, expected_cost, selection_digest

        cases = [item for item in items if hasattr(item, "record")]
        shard_of = assign([(item.nodeid, item.record.family,
                            expected_cost(item.record, item.library, self.settings.runs)) for item in cases],
                          self.shard.count)
        mine = [item for item in items if shard_of.get(item.nodeid, 1) == self.shard.index]
        self.shard_info = {"index": self.shard.index, "count": self.shard.count, "selected": len(items),
                           "selection": selection_digest(item.nodeid for item in items)}
        return mine, [item for item in items if shard_of.get(item.nodeid, 1) != self.shard.index]

    def prefetch(self, items) -> None:
        """--pde-cluster: items whose submission needs no generation (a folder of solvers)
        have their runs sent to the workers ahead of their turn, in item order, keeping
        ``cluster.ahead`` in flight (workers busy, results waiting on them bounded)."""
        if self.cluster is None or not getattr(self.source, "prefetchable", False):
            return
        self._queued = [(item.record, item.library, item.machine) for item in items if hasattr(item, "record")]
        self._queue_position = {(r.id, library, machine): k for k, (r, library, machine) in enumerate(self._queued)}
        self.top_up()

    def _skip_queue_to(self, record: CaseRecord, library: str, machine: str | None) -> None:
        """The item whose turn it is will not be sent ahead again (if it was not yet, its own
        evaluation sends it now); the queue goes on after it."""
        position = self._queue_position.get((record.id, library, machine))
        if position is not None and position >= self._queue_next:
            self._queue_next = position + 1

    def top_up(self) -> int:
        """Send queued items until ``cluster.ahead`` runs are in flight; returns how many."""
        from .evaluation import item_directory, run_task, will_run

        sent = 0
        while self._queue_next < len(self._queued) and self.cluster.in_flight() < self.cluster.ahead:
            record, library, machine = self._queued[self._queue_next]
            self._queue_next += 1
            draft = self.source.draft(record, library, None, 1, None)
            if draft.submission is None:
                continue
            try:
                with warnings.catch_warnings():  # the item warns itself
                    warnings.simplefilter("ignore")
                    thresholds, executor = self._thresholds_and_executor(record, library, machine)
                self.settings.runtime(library)
            except (pytest.fail.Exception, RuntimeMissing):
                continue  # the item says why itself
            if will_run(record, library, draft.submission, thresholds, self.settings,
                        item_directory(self.settings, library, record.id, machine)):
                executor.send(run_task(record, library, draft.submission, self.settings))
                sent += 1
        return sent

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()

    def conditions(self, library: str) -> dict:
        """What a runtime baseline depends on besides the machine: the evaluation's are
        compared with the calibration's (``condition_mismatches``)."""
        return {"workers": self.cluster.size if self.cluster else workers(self.config), "runs": self.settings.runs, "sandbox": self.settings.sandbox,
                "runner": self.settings.runner_for(library)}

    def speed_probe_sec(self) -> float:
        """This session's speed probe (speed.py), timed once, on first use."""
        if self._speed_probe is None:
            from .speed import probe_seconds

            self._speed_probe = probe_seconds()
        return self._speed_probe

    def speed_drift(self, library: str) -> float | None:
        """The probe's time now over its time when the library's baselines were measured."""
        from .speed import drift

        then = [e["speed_probe_sec"] for e in self.store.entries(library).values() if e.get("speed_probe_sec")]
        return drift(self.speed_probe_sec(), then) if then else None

    def condition_mismatches(self) -> list[str]:
        from .speed import drift_problem

        if self.settings.calibrate:
            return []
        lines = []
        for library in self.libraries:
            measured = self.store.conditions(library)
            if measured:  # baselines from before the warm runner were measured cold
                measured = {"runner": "cold", **measured}
            differ = {k: (v, measured[k]) for k, v in self.conditions(library).items()
                      if k in measured and measured[k] != v}
            if differ:
                shown = ", ".join(f"{k} {now} here, {then} in the calibration" for k, (now, then) in differ.items())
                lines.append(f"{library}: runtime baselines were measured under other conditions ({shown}): "
                             "t_agent / t_base is not like for like")
            lines += filter(None, [drift_problem(library, self.speed_drift(library))])
        return lines

    def session_metadata(self) -> dict:
        return {"machine": machine_key(), **({"cluster": self.cluster.metadata()} if self.cluster else {}),
                **({"shard": self.shard_info} if self.shard_info else {}),
                "source": self.source.label, "libraries": list(self.libraries),
                "cases": str(self.cases_path), "calibrations": str(self.store.directory),
                "output": str(self.settings.output_dir), "runs": self.settings.runs,
                "sandbox": self.settings.sandbox, "mode": self.mode,
                "runner": {library: self.settings.runner_for(library) for library in self.libraries},
                "speed_probe_sec": self.speed_probe_sec(),
                "speed_drift": {library: self.speed_drift(library) for library in self.libraries},
                **self._images()}

    def _images(self) -> dict:
        """The container backend: the image id and digest each library ran in."""
        if self.settings.sandbox != "docker":
            return {}
        from .containers import image_digest

        images = {}
        for library in self.libraries:
            try:
                image = self.settings.runtime(library).image
            except RuntimeMissing:
                continue
            images[library] = {"id": image, "digest": image_digest(image)}
        return {"images": images}

    @property
    def mode(self) -> str:
        return "validation" if self.validate else "calibration" if self.settings.calibrate else "evaluation"
