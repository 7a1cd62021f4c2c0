"""Where an item's runs go and which thresholds judge it, decided once per item (the
``ItemPlan``): this machine's calibration and runs in this process, or, with
``--pde-cluster``, the workers of the first machine class that has a calibration for the
item, its own before a borrowed one (a baseline is only like for like on the machine that
measured it). Calibrating, an item is planned on the workers of its machine class.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, cast

from .calibration import CalibrationStore, ResolvedThresholds, case_fingerprint
from .cases import CaseRecord
from .evaluation import Settings, item_directory
from .plan import ItemPlan

if TYPE_CHECKING:
    from .cluster.controller import Cluster


class PdeBenchWarning(UserWarning):
    pass


class NoCalibration(Exception):
    """No baseline covers the item where its runs would be timed (the message says how to make one)."""


class Placement:
    def __init__(self, settings: Settings, store: CalibrationStore, cluster: Cluster | None = None):
        self.settings, self.store, self.cluster = settings, store, cluster
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
        """The item's plan; raises NoCalibration. ``quiet``: no warning (a run sent ahead of
        its item, which warns itself when its turn comes)."""
        fingerprint = case_fingerprint(record, library)
        thresholds, executor = None, None
        if self.cluster is None:
            if not self.settings.calibrate:
                thresholds = self._thresholds(record, library, fingerprint, self.store, quiet)
        elif self.settings.calibrate:
            executor = self.cluster.executor(machine or next(iter(self.cluster.machines())))
        else:
            thresholds, timed_on = self._cluster_thresholds(record, library, fingerprint, quiet)
            executor = self.cluster.executor(timed_on)
        return ItemPlan(
            record,
            library,
            case_dir,
            item_directory(self.settings, library, record.id, machine),
            fingerprint,
            thresholds,
            executor,
            machine,
        )

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
        self, record: CaseRecord, library: str, fingerprint: str, store: CalibrationStore, quiet: bool
    ) -> ResolvedThresholds:
        thresholds = store.thresholds(record, library, self.settings.alphas, fingerprint)
        if thresholds is None:
            raise NoCalibration(
                f"no calibration for case {record.id!r} on {library} (machine {store.machine_for(library)}): "
                f"run `pdebench calibrate --library {library}{self.settings.calibrate_hint}` first"
            )
        if not quiet:
            _warn_if_foreign(record, library, thresholds, store)
        return thresholds

    def _cluster_thresholds(
        self, record: CaseRecord, library: str, fingerprint: str, quiet: bool
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
        if not quiet:
            _warn_if_foreign(record, library, thresholds, self.store_for(machine))
        return thresholds, machine


def _warn_if_foreign(record: CaseRecord, library: str, thresholds: ResolvedThresholds, store: CalibrationStore) -> None:
    if thresholds.foreign_machine:
        warnings.warn(
            PdeBenchWarning(
                f"{record.id}[{library}]: runtime threshold from the {thresholds.source}, not from the machine "
                f"that times it ({store.machine_for(library)}); `pdebench calibrate --library {library}` measures "
                "one there"
            ),
            stacklevel=2,
        )
