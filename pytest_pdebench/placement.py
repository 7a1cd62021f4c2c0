"""Where an item's runs go and which thresholds judge it, decided once per item (the
``ItemPlan``): this machine's calibration and runs in this process, or, with
``--pde-cluster``, the workers of the first machine class that has a calibration for the
item, its own before a borrowed one (a baseline is only like for like on the machine that
measured it). Calibrating, an item is planned on the workers of its machine class.

With ``--pde-variants`` the item's record is first replaced by its variant (``vary``, given
by the session). The plan's baseline is one of baselines.py's kinds: stored, kept (this
machine's own timing, ``--pde-baseline=local``), paired (the oracle runs beside the
submission; a calibration's thresholds, where there are any, ride along to be shown
beside) or none (calibrating).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from .baselines import Baseline, Calibrating, Kept, Paired, Stored
from .calibration import CalibrationStore
from .cases import CaseRecord
from .fingerprints import case_fingerprint
from .kept_baselines import KEPT_SOURCE, LocalBaselines
from .libraries import get_track
from .notices import PdeBenchWarning
from .plan import ItemPlan, NoSibling, SiblingCheck
from .reference import missing_case_data
from .settings import Settings, item_directory
from .sources import NotRun, Submission
from .sources.folder import DirectorySource, NoSubmission
from .thresholds import ResolvedThresholds

if TYPE_CHECKING:
    from .cluster.controller import Cluster
    from .execution import Executor


class NoCalibration(Exception):
    """No baseline covers the item where its runs would be timed (the message says how to make one)."""


class NotVaried(Exception):
    """The record has no variant (a numerical reference, a smoke case, not of the suite's designs)."""


# (published record, seed, case folder) -> its variant; raises NotVaried
Vary = Callable[[CaseRecord, int, Path | None], CaseRecord]
SIBLING_SEED = 1_000_000  # --pde-sibling: the second variant's seed is this plus --pde-variants' (or 0)


class Placement:
    def __init__(
        self,
        settings: Settings,
        store: CalibrationStore,
        cluster: Cluster | None = None,
        vary: Vary | None = None,
        local: LocalBaselines | None = None,
    ):
        self.settings, self.store, self.cluster, self.vary = settings, store, cluster, vary
        self.local = local  # --pde-baseline=local: the session's run conditions (speed.RunConditions)
        self._stores: dict[str, CalibrationStore] = {}  # machine -> its calibrations (store_for)

    def calibration_classes(self) -> list[str | None]:
        """The machine classes each record is calibrated on: every class of a cluster's
        workers when there are several (one item per class), else [None] (one item)."""
        if self.cluster is None or not self.settings.calibrate or len(self.cluster.machines()) < 2:
            return [None]
        return list(self.cluster.machines())

    def plan(
        self, record: CaseRecord, library: str, case_dir: Path | None, machine: str | None = None, quiet: bool = False
    ) -> ItemPlan:
        """The item's plan; raises NoCalibration, NotRun when the case's own data file is
        missing, and NotVaried with --pde-variants.
        ``quiet``: no warning now, the plan keeps them as ``notes`` (a plan made ahead of its
        item's turn, for runs sent ahead on a cluster: ``say`` them at the turn)."""
        seed, published = self.settings.variant_seed, record
        if missing := missing_case_data(record, case_dir):
            raise NotRun(missing)
        if seed is not None:
            record = self._variant(record, seed, case_dir)
        fingerprint = case_fingerprint(record, library)
        notes: list[str] = []
        baseline, executor = self._baseline(record, library, fingerprint, machine, notes)
        item_dir = item_directory(self.settings, library, record.id, machine)
        if not quiet:
            say(notes)
            notes = []
        return ItemPlan(
            record,
            library,
            case_dir,
            item_dir,
            fingerprint,
            baseline,
            executor,
            machine,
            sibling=self._sibling_check(published, library, case_dir, machine),
            notes=tuple(notes),
        )

    def _baseline(
        self, record: CaseRecord, library: str, fingerprint: str, machine: str | None, notes: list[str]
    ) -> tuple[Baseline, Executor | None]:
        """Which baseline judges the item, and where its runs go (None: here)."""
        settings, varied = self.settings, self.settings.variant_seed is not None
        if settings.baseline == "local" and not settings.calibrate:
            try:
                return self._local(record, library, fingerprint, beside=not varied), None
            except NoSubmission as exc:  # no oracle to time here: the stored calibration, said as a warning
                thresholds = self._thresholds(record, library, fingerprint, self.store, notes)
                notes.append(f"{record.id}[{library}]: t_base from the {thresholds.source}: {exc}")
                return Stored(thresholds), None
        if varied or settings.baseline == "paired":
            oracle, executor = self._paired(record, library, machine)
            shown = not varied and self.cluster is None  # the stored thresholds, shown beside the paired ones
            beside = self.store.thresholds(record, library, settings.alphas, fingerprint) if shown else None
            return Paired(oracle=oracle, beside=beside), executor
        if self.cluster is None:
            if settings.calibrate:
                return Calibrating(), None
            return Stored(self._thresholds(record, library, fingerprint, self.store, notes)), None
        if settings.calibrate:
            return Calibrating(), self.cluster.executor(machine or next(iter(self.cluster.machines())))
        thresholds, timed_on = self._cluster_thresholds(record, library, fingerprint, notes)
        return Stored(thresholds), self.cluster.executor(timed_on)

    def _local(self, record: CaseRecord, library: str, fingerprint: str, beside: bool) -> Baseline:
        """--pde-baseline=local: a baseline this machine timed that fits (kept, or a stored
        calibration of this machine's), else the oracle paired and why. The session times
        what it lacks before its items run (baseline_pass.py), so an item is paired only
        when that timing was not kept (a timing beside a submission is not kept).
        ``beside``: the stored calibration's thresholds shown beside. Raises NoSubmission."""
        local = cast(LocalBaselines, self.local)  # the session gives one with this option
        oracle = self.oracle(record, library)
        stored = self.store.thresholds(record, library, self.settings.alphas, fingerprint) if beside else None
        found, why = local.local_thresholds(record, library, fingerprint, oracle.fingerprint)
        if found is None:
            return Paired(oracle=oracle, local=True, paired_because=why, beside=stored)
        if found.source.startswith(KEPT_SOURCE):
            return Kept(found, oracle.fingerprint, beside=stored)
        return Stored(found, oracle.fingerprint, beside=stored)

    def _sibling_check(
        self, record: CaseRecord, library: str, case_dir: Path | None, machine: str | None
    ) -> SiblingCheck | None:
        """--pde-sibling: how to plan the published record's second variant, the one no prompt
        showed, paired with the oracle (made only after a PASS: a variant costs a draw)."""
        if not self.settings.sibling:
            return None
        seed = SIBLING_SEED + (self.settings.variant_seed or 0)

        def plan(item_dir: Path) -> ItemPlan:
            try:
                varied = self._variant(record, seed, case_dir)
                oracle, executor = self._paired(varied, library, machine)
            except (NotVaried, NoCalibration) as exc:
                raise NoSibling(str(exc)) from None
            fingerprint = case_fingerprint(varied, library)
            return ItemPlan(varied, library, case_dir, item_dir, fingerprint, Paired(oracle=oracle), executor, machine)

        return SiblingCheck(seed, plan)

    def _variant(self, record: CaseRecord, seed: int, case_dir: Path | None) -> CaseRecord:
        if self.vary is None:
            raise NotVaried(f"{record.id}: no variant maker in this session")
        return self.vary(record, seed, case_dir)

    def _paired(self, record: CaseRecord, library: str, machine: str | None) -> tuple[Submission, Executor | None]:
        """(the oracle that runs beside the submission, the executor of the worker both run on)."""
        try:
            oracle = self.oracle(record, library)
        except NoSubmission as exc:
            raise NoCalibration(f"no paired baseline: {exc}") from None
        if self.cluster is None:
            return oracle, None
        return oracle, self.cluster.executor(machine or next(iter(self.cluster.machines())))

    def oracle(self, record: CaseRecord, library: str) -> Submission:
        """The oracle's solver for the item (paired baselines); raises NoSubmission."""
        folder = self.settings.oracle_dir
        if folder is None:
            raise NoSubmission("no oracle folder given")
        return DirectorySource(folder).submission_for(record, library, get_track(library).suffixes)

    def store_for(self, machine: str) -> CalibrationStore:
        """The calibrations of another kind of machine (a cluster's workers), read once."""
        if machine == self.store.machine:
            return self.store
        if machine not in self._stores:
            self._stores[machine] = CalibrationStore(
                self.store.directory, machine=machine, runtime_tag=self.settings.runtime_tag
            )
        return self._stores[machine]

    def _thresholds(
        self, record: CaseRecord, library: str, fingerprint: str, store: CalibrationStore, notes: list[str]
    ) -> ResolvedThresholds:
        thresholds = store.thresholds(record, library, self.settings.alphas, fingerprint)
        if thresholds is None:
            raise NoCalibration(
                f"no calibration for case {record.id!r} on {library} (machine {store.machine_for(library)}): "
                f"run `pdebench calibrate --library {library}{self.settings.calibrate_hint}` first"
            )
        notes += _foreign(record, library, thresholds, store)
        return thresholds

    def _cluster_thresholds(
        self, record: CaseRecord, library: str, fingerprint: str, notes: list[str]
    ) -> tuple[ResolvedThresholds, str]:
        cluster = cast("Cluster", self.cluster)  # plan() comes here only with a cluster
        classes = cluster.machines()
        candidates = [
            (self.store_for(machine).thresholds(record, library, self.settings.alphas, fingerprint), machine)
            for machine in classes
        ]
        found = sorted(
            ((thresholds, machine) for thresholds, machine in candidates if thresholds is not None),
            key=lambda entry: entry[0].foreign_machine,
        )
        if not found:
            raise NoCalibration(
                f"no calibration for case {record.id!r} on {library} for the machines of the cluster's workers "
                f"({', '.join(self.store_for(m).machine_for(library) for m in classes)}): run "
                f"`pdebench calibrate --library {library} --cluster {cluster.address}` first"
            )
        thresholds, machine = found[0]
        notes += _foreign(record, library, thresholds, self.store_for(machine))
        return thresholds, machine


def _foreign(record: CaseRecord, library: str, thresholds: ResolvedThresholds, store: CalibrationStore) -> list[str]:
    if not thresholds.foreign_machine:
        return []
    return [
        f"{record.id}[{library}]: runtime threshold from the {thresholds.source}, not from the machine "
        f"that times it ({store.machine_for(library)}); `pdebench calibrate --library {library}` measures one there"
    ]


def say(notes) -> None:
    """A plan's warnings, as PdeBenchWarning."""
    for note in notes:
        warnings.warn(PdeBenchWarning(note), stacklevel=3)
