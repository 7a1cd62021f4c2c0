"""Runtime baselines of this machine, kept between sessions (issue 48).

A stored calibration is timed on another instance of the machine class, on another day:
1.4-2.9x lenient on this one. With ``--pde-baseline=local`` (the default) an item whose
baseline is not yet known here is paired (the oracle timed beside the submission, on the
same worker), and the oracle's figures are kept in ``<cache>/baselines/<library>/<machine>.json``
for the next sessions, keyed by what makes a timing comparable: the case (its
fingerprint), the oracle (its solvers' fingerprint), the machine (with a container's
image), and the run conditions (workers, timed runs, sandbox, runner, kernel store). A
kept entry judges a later item only while the speed probe (speed.py) runs within
SPEED_TOLERANCE of its time when the entry was kept; else the item is paired again.

A kept timing serves every later submission, so none may inflate it: a paired oracle's
timing is kept only when the speed probe, run on the item's worker right after the
oracle's timed runs, is within QUIET_SPREAD of the quietest probe this machine has
recorded for those conditions (a neighbour loading the machine slows the probe as it slows
the oracle), and an entry is only ever replaced by a faster one under the same key.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .calibration import Alphas, ResolvedThresholds, now_iso
from .cases import CaseRecord

SPEED_TOLERANCE = 0.15  # as speed.SPEED_TOLERANCE: the probe's own spread stays under 5% here
QUIET_SPREAD = 0.10  # a timing is kept only with the probe within this of the machine's quietest
KEPT_SOURCE = "kept baseline"  # how a kept entry's thresholds name their source


def conditions_key(conditions: dict) -> str:
    return json.dumps(conditions, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class BaselineKey:
    """What a kept timing is comparable with: one case, oracle and set of run conditions."""

    case_id: str
    case_fingerprint: str
    oracle: str  # the oracle submission's fingerprint
    conditions: str  # conditions_key of speed.RunConditions.of(library)

    @property
    def name(self) -> str:
        return f"{self.case_id}|{self.case_fingerprint}|{self.oracle}|{self.conditions}"


class KeptBaselines:
    """The kept baselines of one machine (``machine_for(library)`` names the file, as a
    calibration's does), under ``directory``; safe for several workers at once (each
    write re-reads the file under a lock)."""

    def __init__(self, directory: Path, machine_for):
        self.directory, self.machine_for = Path(directory), machine_for

    def path(self, library: str) -> Path:
        return self.directory / library / f"{self.machine_for(library)}.json"

    def _read(self, library: str) -> dict:
        path = self.path(library)
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):  # none yet, or a damaged file: its entries are lost, not the run
            return {"entries": {}, "quietest_probe": {}}

    def find(self, library: str, key: BaselineKey, probe_sec: float) -> dict | None:
        """The kept entry for ``key`` if the machine runs the probe within SPEED_TOLERANCE
        of its time when the entry was kept; else None."""
        return self.lookup(library, key, probe_sec)[0]

    def lookup(self, library: str, key: BaselineKey, probe_sec: float) -> tuple[dict | None, str]:
        """(the fitting entry or None, why none fits)."""
        entry = self._read(library)["entries"].get(key.name)
        if entry is None or not entry.get("probe_sec"):
            return None, "no baseline of this machine for this case, oracle and run conditions yet"
        ratio = probe_sec / entry["probe_sec"]
        if abs(ratio - 1) > SPEED_TOLERANCE:
            return None, f"the kept baseline was timed at another speed (the probe runs in {ratio:.2f} x its time now)"
        return entry, ""

    def quietest(self, library: str, conditions: str) -> float | None:
        return self._read(library)["quietest_probe"].get(conditions)

    def keep(self, library: str, key: BaselineKey, figures: dict, probe_after: float, probe_quiet: float) -> str:
        """Keep a paired oracle's ``figures`` (e_base, t_base, timed_runs, t_first_run,
        compile_sec) timed on this machine, if the probe after its runs (``probe_after``) is
        within QUIET_SPREAD of the quietest the machine has recorded for these conditions (or
        of ``probe_quiet``, this session's quietest). Returns what happened, for the verdict."""
        path = self.path(library)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._read(library)
            recorded = data["quietest_probe"].get(key.conditions)
            quietest = min(p for p in (recorded, probe_quiet, probe_after) if p)
            data["quietest_probe"][key.conditions] = quietest
            if probe_after > (1 + QUIET_SPREAD) * quietest:
                self._write(path, data)
                return (
                    f"not kept: the speed probe ran in {probe_after / quietest:.2f} x the machine's quietest "
                    "time after these runs (something loaded the machine)"
                )
            before = data["entries"].get(key.name)
            if (
                before
                and before["t_base"] <= figures["t_base"]
                and abs(before["probe_sec"] / probe_after - 1) <= (SPEED_TOLERANCE)
            ):
                return "not kept: a faster timing is kept already"
            data["entries"][key.name] = {**figures, "probe_sec": probe_after, "timed_at": now_iso()}
            self._write(path, data)
        return "kept for the next sessions"

    @staticmethod
    def _write(path: Path, data: dict) -> None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)


def kept_thresholds(entry: dict, record: CaseRecord, alphas: Alphas, machine: str) -> ResolvedThresholds:
    """An item's thresholds from a kept entry: e_base and t_base as the paired oracle measured them."""
    return ResolvedThresholds.from_baseline(
        entry["e_base"],
        entry["t_base"],
        *alphas.resolve(record),
        source=f"{KEPT_SOURCE} (paired on {machine}, {entry['timed_at'][:16]})",
        t_first_base=entry.get("t_first_run"),
        compile_base=entry.get("compile_sec"),
    )


class LocalBaselines(Protocol):
    """What placement asks of the session's run conditions (speed.RunConditions) under
    ``--pde-baseline=local``."""

    def local_thresholds(
        self, record: CaseRecord, library: str, fingerprint: str, oracle: str
    ) -> tuple[ResolvedThresholds | None, str]: ...

    def keeper(self, record: CaseRecord, library: str, fingerprint: str, oracle: str) -> Callable[[dict], str]: ...
