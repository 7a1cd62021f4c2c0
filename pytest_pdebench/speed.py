"""A few-second speed probe of the machine, so a runtime baseline is known to be stale.

The machine key (cpu model, cores, memory) names a kind of machine, not its speed today:
the same key ran the calibration oracle at 0.63 x its committed t_base two days later
(``benchmarks/validity.py --rungs calibration-again``, session 14; the baselines of one
day at 0.58, of the next at 0.84), so tau_time was 1.6x more lenient than the paper's
alpha_time. A calibration stores the probe's time with every baseline; an evaluation
times the probe again and its header (and JSON report) says when the two differ by more
than SPEED_TOLERANCE, since t_agent / t_base then measures the machine as much as the
solver. The probe is a Jacobi sweep over a grid: numpy's elementwise kernels run on one
thread, like a sandboxed solver pinned to its core, and are bound by the memory traffic
that also bounds sparse assembly and solves.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from .calibration import KERNEL_STORE
from .kept_baselines import PASS_RUNS, BaselineKey, KeptBaselines, conditions_key, kept_thresholds
from .thresholds import ResolvedThresholds

if TYPE_CHECKING:
    from .calibration import CalibrationStore
    from .cases import CaseRecord
    from .settings import Settings

SPEED_TOLERANCE = 0.15  # a relative change the probe's own spread (under 5% here) does not reach
_GRID, _SWEEPS, _REPEATS = 400, 60, 9
PROBE_INTERVAL = 60.0  # s: a session's probe is timed again after this, so a load that starts later is seen
# a probe this much slower than at the session's start: a load beside the runs (a busy process
# sharing a worker's core doubles it); the items are paired from then on
LOADED = 1.5
PACE_WINDOW = 200.0  # s: pace() is the fastest probe of this window (about the last three)


def probe_seconds(repeats: int = _REPEATS) -> float:
    """The fastest of ``repeats`` runs of a fixed Jacobi workload (0.025-0.1 s a run on the
    machines seen). The fastest, not the median: on a shared 2-core AMD EPYC the median of 5
    spread 24% over a quiet minute, the fastest of 9 5% (a load that lasts slows every run,
    so it still shows); calibrations before 2026-11-28 stored the median of 5, a few percent
    above."""
    u = np.zeros((_GRID, _GRID))
    f = np.ones_like(u) / _GRID**2
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(_SWEEPS):
            u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] + f[1:-1, 1:-1])
        times.append(time.perf_counter() - start)
    return min(times)


def drift(now: float, then: list[float]) -> float | None:
    """This machine's probe time over the calibration's (median over its baselines); None
    when the baselines carry no probe time."""
    return now / statistics.median(then) if then else None


def drift_problem(library: str, ratio: float | None) -> str | None:
    if ratio is None or abs(ratio - 1) <= SPEED_TOLERANCE:
        return None
    state = "slower" if ratio > 1 else "faster"
    return (
        f"{library}: this machine runs the speed probe in {ratio:.2f} x the time it took when the baselines "
        f"were measured ({state} now): t_agent / t_base is off by about that much; "
        f"`pdebench calibrate --library {library}` measures them again"
    )


def baselines_line(entries: dict) -> str:
    """When and how fast the runtime baselines were measured: the days they span and the
    speed probe's spread over them (a partial recalibration on a faster or slower day
    shows here as a second cluster)."""
    days = sorted({str(e.get("calibrated_at", ""))[:10] for e in entries.values() if e.get("calibrated_at")})
    probes = sorted(e["speed_probe_sec"] for e in entries.values() if e.get("speed_probe_sec"))
    span = f"measured {days[0]} to {days[-1]}" if len(days) > 1 else f"measured {days[0]}" if days else "no dates"
    if not probes:
        return f"runtime baselines: {len(entries)}, {span}; none carries a speed probe time"
    spread = probes[-1] / probes[0] - 1
    state = "within" if spread <= SPEED_TOLERANCE else "NOT within"
    missing = len(entries) - len(probes)
    return (
        f"runtime baselines: {len(entries)}, {span}; speed probe with {len(probes)} of them, median "
        f"{statistics.median(probes):.3f} s, range {probes[0]:.3f}-{probes[-1]:.3f} s ({state} "
        f"{SPEED_TOLERANCE:.0%} of each other)"
        + (f"; {missing} timed before the probe existed: their speed is unknown" if missing else "")
    )


# the option that sets a condition a stored calibration was measured under
CONDITION_OPTIONS = {
    "workers": "-n {}",
    "runs": "--pde-runs={}",
    "sandbox": "--pde-sandbox={}",
    "runner": "--pde-runner={}",
}


@dataclass
class RunConditions:
    """What a runtime baseline depends on besides the machine, for one session: its
    conditions per library (written with each calibration, compared with the stored
    calibration's), and the speed probe, timed once on first use, with its drift since
    the baselines were measured."""

    settings: Settings
    store: CalibrationStore
    workers: int  # items at once: xdist workers, a cluster's size, else 1
    kept: KeptBaselines | None = None  # --pde-baseline=local: this machine's kept baselines
    _probe: float | None = field(default=None, repr=False)
    _probed_at: float = field(default=0.0, repr=False)
    _session_speed: float | None = field(default=None, repr=False)
    _paces: list[tuple[float, float]] = field(default_factory=list, repr=False)  # (when, probe) for pace()

    def of(self, library: str) -> dict:
        return {
            "workers": self.workers,
            "runs": self.settings.runs,
            "sandbox": self.settings.sandbox,
            "runner": self.settings.runner_for(library),
            "kernel_store": KERNEL_STORE,  # first runs timed so are the first-run gate's base
        }

    def probe_sec(self) -> float:
        if self._probe is None:
            self._probe = self._probed(probe_seconds())
        return self._probe

    def _probed(self, seconds: float) -> float:
        self._probed_at = time.monotonic()
        self._paces.append((self._probed_at, seconds))
        return seconds

    def stored_conditions(self, library: str) -> dict:
        """The conditions the stored calibration of ``library`` was measured under (none: {})."""
        measured = self.store.conditions(library)
        return {"runner": "cold", **measured} if measured else {}  # before the warm runner, runs were cold

    def pace(self) -> float:
        """The machine's speed now: the fastest probe of the last PACE_WINDOW seconds, the
        probe timed again once PROBE_INTERVAL has passed since the last. The fastest over a
        few minutes, because one probe depends on what the other workers do at that moment
        (on the 2-core AMD EPYC, 0.024 against 0.032 s beside an honest oracle); a load
        that lasts shows within the window."""
        now = time.monotonic()
        if self._probe is None or now - self._probed_at > PROBE_INTERVAL:
            self._probe = self._probed(probe_seconds())
        self._paces = [(at, sec) for at, sec in self._paces if now - at <= PACE_WINDOW] or self._paces[-1:]
        return min(sec for _, sec in self._paces)

    # ---- --pde-baseline=local: this machine's baselines (kept_baselines.py) ----

    def _key(self, record: CaseRecord, library: str, fingerprint: str, oracle: str) -> BaselineKey:
        conditions = {**self.of(library), "oracle_runs": PASS_RUNS}  # how many runs a kept t_base averages
        return BaselineKey(record.id, fingerprint, oracle, conditions_key(conditions))

    def local_thresholds(
        self, record: CaseRecord, library: str, fingerprint: str, oracle: str
    ) -> tuple[ResolvedThresholds | None, str]:
        """The item's thresholds from a baseline timed on this machine under these
        conditions at about today's speed: kept from an earlier paired item, or a stored
        calibration of this machine that fits (its conditions, its probe); else (None, why
        the item is paired)."""
        kept = cast(KeptBaselines, self.kept)  # the session makes one with --pde-baseline=local
        speed = self.session_speed()
        if (slower := self.pace() / speed) > LOADED:
            return None, f"the machine is loaded now (the speed probe runs in {slower:.2f} x its time at the start)"
        entry, why = kept.lookup(library, self._key(record, library, fingerprint, oracle), speed)
        if entry is not None:
            return kept_thresholds(entry, record, self.settings.alphas, self.store.machine_for(library)), ""
        stored = self.store.entries(library).get(record.id)
        fits = (
            stored is not None
            and stored.get("fingerprint") == fingerprint
            and stored.get("speed_probe_sec")
            and abs(speed / stored["speed_probe_sec"] - 1) <= SPEED_TOLERANCE
            and self.stored_conditions(library) == self.of(library)
        )
        if fits:
            return self.store.thresholds(record, library, self.settings.alphas, fingerprint), ""
        return None, why

    def session_speed(self) -> float:
        """The machine's speed for this session's kept baselines: the probe the baseline pass
        timed on every worker at once at the start (so under the run's load, every core busy:
        on the 2-core AMD EPYC one probe ran 1.45 x slower with the other core busy than idle),
        else the session's first probe."""
        return self._session_speed or self.probe_sec()

    def set_session_speed(self, seconds: float) -> None:
        self._session_speed = seconds

    def local_line(self) -> str:
        """The header's word on --pde-baseline=local."""
        where = cast(KeptBaselines, self.kept).directory
        return (
            f"pdebench: t_base from this machine's own timings of the oracle, kept in {where}; items without "
            "one are timed first, the oracle alone (once: the first session here takes about twice as long)"
        )

    def keep(self, record: CaseRecord, library: str, fingerprint: str, oracle: str, figures: dict) -> str:
        """Keep the oracle's ``figures``, timed alone here (baseline_pass.py), with the session's speed."""
        key = self._key(record, library, fingerprint, oracle)
        return cast(KeptBaselines, self.kept).keep(library, key, figures, self.session_speed())

    def drift(self, library: str) -> float | None:
        """The probe's time now over its time when the library's baselines were measured."""
        then = [e["speed_probe_sec"] for e in self.store.entries(library).values() if e.get("speed_probe_sec")]
        return drift(self.probe_sec(), then)

    def mismatches(self, libraries: list[str]) -> list[str]:
        """The header's warnings: baselines measured under other conditions, or at another speed."""
        if self.settings.calibrate or self.settings.baseline != "stored":
            return []  # paired (or local): the baselines are measured beside the submission, here and now
        differing: dict[tuple, list[str]] = {}  # the same differences on several tracks: one line
        drifts: list[str] = []
        for library in libraries:
            measured = self.stored_conditions(library)
            now = self.of(library)
            differ = tuple((k, v, measured[k]) for k, v in now.items() if k in measured and measured[k] != v)
            if differ:
                differing.setdefault(differ, []).append(library)
            drifts += filter(None, [drift_problem(library, self.drift(library))])
        lines = []
        for differ, tracks in differing.items():
            shown = ", ".join(f"{k} {now} here, {then} in the calibration" for k, now, then in differ)
            remedy = " ".join(CONDITION_OPTIONS[k].format(then) for k, _, then in differ if k in CONDITION_OPTIONS)
            lines.append(
                f"{', '.join(tracks)}: runtime baselines were measured under other conditions ({shown}): "
                "t_agent / t_base is not like for like" + (f"; {remedy} matches them" if remedy else "")
            )
        return lines + drifts
