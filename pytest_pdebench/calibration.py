"""The calibration store: baseline error and time per (case, library, machine), its files
and how they are written into the records (the thresholds they give: thresholds.py).

Runtime baselines only mean something on the machine that measured them, so every
calibration is a file ``calibrations/<library>/<machine>.json`` written by running the
oracle through the plugin (``pytest --pde-calibrate`` / ``pdebench calibrate``). At
run time thresholds come from, in order: the file for this machine, else the
thresholds materialized in the case record (measured elsewhere: a warning says so).
Each calibration entry carries a fingerprint of the case, so an edited case never
silently keeps an old baseline.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from .cases import CaseRecord, Thresholds, case_files, iter_case_file, write_case_file
from .fingerprints import case_fingerprint
from .machine import machine_key
from .thresholds import Alphas, ResolvedThresholds

STRONG_ORACLE_SECTION = "strong_oracle"  # its errors against the references (reference agreement)
REFERENCE_AGREEMENT = 0.1  # the strong oracle must be within this fraction of tau_acc of a reference
ANCHOR_ACC_SHARE = 0.5  # the strong oracle's error on any record: at most this fraction of tau_acc


# how the kernel store was kept when a baseline's first run was timed: "per-item" (empty for
# the gated run, so that it compiles every kernel it uses). A first run timed with a store
# kept across items and sessions (calibrations before it say nothing) found kernels compiled
# already, and is no base for the first-run gate.
KERNEL_STORE = "per-item"


def first_run_base(entry: dict, file_conditions: dict) -> float | None:
    """A calibration entry's first run, if it was timed as a gated run is now."""
    conditions = entry.get("conditions", file_conditions)
    return entry.get("t_first_run") if conditions.get("kernel_store") == KERNEL_STORE else None


def most_common_conditions(entries, fallback: dict) -> dict:
    """The conditions most baselines were measured under (an entry without its own was
    measured under ``fallback``, the file's conditions before entries carried them)."""
    counts = Counter(json.dumps(entry.get("conditions", fallback), sort_keys=True) for entry in entries)
    return json.loads(counts.most_common(1)[0][0]) if counts else dict(fallback)


class CalibrationStore:
    """The calibration files under one directory, for this machine."""

    def __init__(self, directory: Path, machine: str | None = None, runtime_tag=None):
        self.directory = Path(directory)
        self.machine = machine or machine_key()
        # library -> "" (the host's runtime) or e.g. "docker-<image id>": a baseline measured in
        # one runtime never judges runs in another
        self.runtime_tag = runtime_tag or (lambda library: "")
        self._loaded: dict[str, dict] = {}

    def machine_for(self, library: str) -> str:
        tag = self.runtime_tag(library)
        return f"{self.machine}+{tag}" if tag else self.machine

    def path(self, library: str) -> Path:
        return self.directory / library / f"{self.machine_for(library)}.json"

    def _file(self, library: str) -> dict:
        if library not in self._loaded:
            path = self.path(library)
            self._loaded[library] = json.loads(path.read_text()) if path.is_file() else {"cases": {}}
        return self._loaded[library]

    def entries(self, library: str) -> dict:
        return self._file(library)["cases"]

    def thresholds(
        self, record: CaseRecord, library: str, alphas: Alphas, fingerprint: str | None = None
    ) -> ResolvedThresholds | None:
        """Thresholds for one item, or None if no calibration covers it; ``fingerprint``:
        the item's case fingerprint where the caller has it already."""
        factors = alphas.resolve(record)
        entry = self.entries(library).get(record.id)
        if entry and entry.get("fingerprint") == (fingerprint or case_fingerprint(record, library)):
            return ResolvedThresholds.from_baseline(
                entry["e_base"],
                entry["t_base"],
                *factors,
                str(self.path(library)),
                t_first_base=first_run_base(entry, self.conditions(library)),
                compile_base=entry.get("compile_sec"),
            )
        stored = record.evaluation_metadata.thresholds.get(library)
        if stored and stored.machine.partition("+")[2] == self.runtime_tag(library):
            return ResolvedThresholds.from_baseline(
                stored.e_base,
                stored.t_base,
                *factors,
                f"case record (calibrated on {stored.machine})",
                foreign_machine=stored.machine != self.machine_for(library),
                t_first_base=stored.t_first_base,
            )
        return None

    def conditions(self, library: str) -> dict:
        """The conditions the library's baselines were measured under (workers, runs, ...)."""
        return self._file(library).get("conditions", {})

    def write(self, library: str, new_entries: dict[str, dict], conditions: dict | None = None) -> Path:
        """Merge entries into this machine's file for the library (atomic replace)."""
        path = self.path(library)
        path.parent.mkdir(parents=True, exist_ok=True)
        current = json.loads(path.read_text()) if path.is_file() else {"cases": {}}
        if conditions:  # per entry: a partial recalibration under other conditions keeps the others' record
            new_entries = {case_id: {**entry, "conditions": conditions} for case_id, entry in new_entries.items()}
        current["cases"].update(new_entries)
        current.update(library=library, machine=self.machine_for(library), updated=now_iso())
        current["conditions"] = most_common_conditions(current["cases"].values(), current.get("conditions", {}))
        current["cases"] = dict(sorted(current["cases"].items()))
        return self._replace(library, current)

    def write_strong_oracle(self, library: str, new_entries: dict[str, dict]) -> Path:
        """Merge the strong oracle's errors against the references (its own section of the
        library's file, so a new calibration run keeps them)."""
        path = self.path(library)
        path.parent.mkdir(parents=True, exist_ok=True)
        current = json.loads(path.read_text()) if path.is_file() else {"cases": {}}
        current.setdefault(STRONG_ORACLE_SECTION, {}).update(new_entries)
        current[STRONG_ORACLE_SECTION] = dict(sorted(current[STRONG_ORACLE_SECTION].items()))
        current.update(library=library, machine=self.machine_for(library))
        return self._replace(library, current)

    def strong_oracle(self, record: CaseRecord, library: str, oracle: str | None = None) -> dict | None:
        """The strong oracle's figures on the record (e_strong, t_strong, outcome), if
        measured on this version of it (and, given ``oracle``, of the oracle's code)."""
        entry = self._file(library).get(STRONG_ORACLE_SECTION, {}).get(record.id)
        if not entry or entry["fingerprint"] != case_fingerprint(record, library):
            return None
        return entry if oracle is None or entry.get("oracle") == oracle else None

    def _replace(self, library: str, current: dict) -> Path:
        path = self.path(library)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(current, indent=1, sort_keys=False) + "\n")
        tmp.replace(path)
        self._loaded.pop(library, None)
        return path


def write_passing(
    verdicts: list[dict],
    store_for: Callable[[str], CalibrationStore],
    here: str,
    probe_sec: float,
    conditions: Callable[[str], dict],
    by_machine: bool = False,
) -> dict[str, Path]:
    """A calibration session's baselines, from its passing items, each into the store of the
    machine that timed it (a cluster's worker's, or ``here``); the files written, by library
    (and machine, ``by_machine``). ``conditions``: a library's run conditions, kept beside."""
    written = {}
    for library, machine in sorted({(v["library"], v.get("machine") or here) for v in verdicts}):
        entries = {
            v["case_id"]: {
                **baseline_figures(v),
                "fingerprint": v["case_fingerprint"],
                "solver_info": v["solver_info"],
                "runtime_version": v["runtime_version"],
                "speed_probe_sec": probe_sec,
                "calibrated_at": now_iso(),
            }
            for v in verdicts
            if v["library"] == library
            and (v.get("machine") or here) == machine
            and v["outcome"] == "PASS"
            and not v["calibration_problem"]
        }
        if entries:
            name = f"{library} ({machine})" if by_machine else library
            written[name] = store_for(machine).write(library, entries, conditions(library))
    return written


def baseline_figures(verdict: dict) -> dict:
    """What a baseline keeps of the oracle's verdict (a calibration entry, a kept timing).
    After the baseline pass's warm-up (``warmup_runs``: the coarse runs' windows, compiling
    and then not) the first run's time is the gated run's plus what compiling added to the
    coarse one: the gated run found its kernels compiled."""
    first = verdict["t_first_run"]
    warmup = verdict.get("warmup_runs") or []
    derived = first is not None and len(warmup) == 2
    if derived:
        first += max(0.0, warmup[0] - warmup[1])
    return {
        "e_base": verdict["e_base"],
        "t_base": verdict["t_base"],
        "t_first_run": first,
        "timed_runs": verdict["timed_runs"],
        # compiled tracks: the build, where it was not a cache's (the compile flag's base)
        "compile_sec": None if verdict.get("compile_cached") else verdict.get("compile_sec"),
        **({"warmup_runs": warmup} if derived else {}),  # what the first run was derived from
    }


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def materialize(
    record: CaseRecord, library: str, entry: dict, machine: str, alphas: Alphas, conditions: dict | None = None
) -> Thresholds:
    resolved = ResolvedThresholds.from_baseline(entry["e_base"], entry["t_base"], *alphas.resolve(record), source="")
    return Thresholds(
        e_base=resolved.e_base,
        t_base=resolved.t_base,
        tau_acc=resolved.tau_acc,
        tau_time=resolved.tau_time,
        machine=machine,
        calibrated_at=entry.get("calibrated_at"),
        t_first_base=first_run_base(entry, conditions or {}) or None,
    )


def materialize_case_files(
    cases: Path, library: str, calibrations: Path, log=print, machine: str | None = None
) -> None:
    """Write this machine's calibration of ``library`` (or that of the machine class
    ``machine``) into the records' ``evaluation_metadata.thresholds`` (``pdebench
    materialize``, ``calibrate --update-cases``), so that other machines, which have no
    calibration file of their own, still judge with these baselines (marked as measured
    elsewhere). Only records whose fingerprint matches their calibration entry change: an
    edited case never takes a stale baseline along."""
    store = CalibrationStore(calibrations, machine)
    entries = store.entries(library)
    for file in case_files(cases):
        records = [record for _, record in iter_case_file(file)]
        changed = 0
        for record in records:
            entry = entries.get(record.id)
            if entry and entry["fingerprint"] == case_fingerprint(record, library):
                record.evaluation_metadata.thresholds[library] = materialize(
                    record, library, entry, store.machine_for(library), Alphas(), store.conditions(library)
                )
                changed += 1
        write_case_file(file, records)
        log(f"{file}: thresholds for {library} updated on {changed} of {len(records)} records")


def reference_build_gap(record: CaseRecord, library: str) -> dict | None:
    """The strong oracle's error on a reference-based record as its reference build measured
    it (level 1 against level 2, which is the reference) when ``library``'s oracle built it:
    the figure the anchor run would store (``strong_oracle``), known before that run. The
    calibration summary checks it and the coarsening of calibration settings aims by it."""
    config = record.evaluation_metadata.reference_config or {}
    if config.get("oracle") == library and config.get("digest") and config.get("e_base_estimate") is not None:
        return {"e_strong": config["e_base_estimate"]}
    return None
