"""Which baseline judges an item, one class per kind: what the judge asks of it.

A baseline gives the thresholds (tau_acc from e_base, tau_time from t_base) at two moments
of an item's runs: after the gated run (the accuracy gate) and after the timed runs (the
runtime gates). It also says where t_base came from (the verdict's ``t_base_from``) and
what a resumed verdict must have been judged against (``identity``).

* ``Stored``: a calibration (this kind of machine's, another kind's, the record's own);
  known before any run.
* ``Kept``: this machine's own timing of the oracle, made earlier and kept
  (``--pde-baseline=local``, kept_baselines.py); known before any run.
* ``Paired``: the oracle, run beside the submission: e_base from its gated run, t_base
  from its timed runs, which alternate with the submission's.
* ``Calibrating``: none; the run measures the baseline (``--pde-calibrate``, the oracle
  timed for a kept baseline).

``Placement.plan`` chooses which one (placement.py); the judge (judge.py) asks it.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from . import gates, metrics
from .cases import CaseRecord
from .sources import Submission
from .thresholds import Alphas, ResolvedThresholds, check_baseline

if TYPE_CHECKING:  # an item's collection imports plans, never the runs' modules
    from .execution import Execution


class BaselineFailure(Exception):
    """The paired oracle failed or gave a baseline that cannot set thresholds: the item
    has no verdict (it is not the submission's failure)."""


@dataclass(frozen=True)
class Against:
    """What an oracle's outputs are judged against: the item's reference on its grid."""

    record: CaseRecord
    library: str
    axis_names: tuple[str, ...]
    shape: tuple[int, ...]
    valid: np.ndarray
    reference: np.ndarray
    alphas: Alphas

    def error_of(self, solution: bytes) -> float:
        """The relative L2 error of a solution.npz; raises gates.GateFailure."""
        names = self.record.case_spec.output.arrays
        field_ = gates.read_solution(solution, names, self.axis_names, self.shape, self.valid)
        return metrics.relative_l2_error(field_, self.reference, self.valid)

    @property
    def reference_norm(self) -> float:
        return float(np.linalg.norm(self.reference[self.valid]))


@dataclass(frozen=True)
class Baseline:
    """What every kind answers; the kinds below override what differs."""

    # the stored calibration's thresholds, shown beside a kept or paired baseline's (the
    # verdict's ``stored``: the same runs judged under them too)
    beside: ResolvedThresholds | None = field(default=None, kw_only=True)

    oracle = None  # the oracle that runs beside the submission (Paired only)

    def before_runs(self) -> ResolvedThresholds | None:
        """The thresholds known before any run (None: the runs give them, or none judge)."""
        return None

    def after_gated_run(self, done: Execution, against: Against) -> ResolvedThresholds | None:
        """The thresholds the gated run is judged by (the accuracy gate); raises BaselineFailure."""
        return self.before_runs()

    def after_timed_runs(
        self, done: Execution, against: Against, gated: ResolvedThresholds | None, strict: bool
    ) -> ResolvedThresholds | None:
        """The thresholds the timed runs are judged by (the runtime gates). ``strict``: the
        item is decided by them (a baseline that cannot give t_base then raises)."""
        return gated

    def figures(self, done: Execution, against: Against, timed: bool) -> dict[str, Any] | None:
        """The paired oracle's own figures for the verdict's ``baseline`` (None: no oracle ran)."""
        return None

    def t_base_from(self) -> str | None:
        """The verdict's word on whose timing t_base is."""
        return None

    def identity(self) -> list:
        """What a resumed verdict must have been judged against (the verdict fingerprint's part)."""
        thresholds = self.before_runs()
        return [asdict(thresholds) if thresholds else None]


@dataclass(frozen=True)
class Calibrating(Baseline):
    """No baseline: the run measures one (its verdict's e_base and t_base are its own)."""


@dataclass(frozen=True)
class Stored(Baseline):
    """A calibration's thresholds. ``local_oracle``: under --pde-baseline=local, a calibration
    of this machine that fits today's conditions, named by the oracle's fingerprint (as a
    kept timing of it is: an interrupted session resumes against either)."""

    thresholds: ResolvedThresholds
    local_oracle: str | None = None

    def before_runs(self) -> ResolvedThresholds:
        return self.thresholds

    def t_base_from(self) -> str:
        return "stored elsewhere" if self.thresholds.foreign_machine else "stored"

    def identity(self) -> list:
        return ["local", self.local_oracle] if self.local_oracle is not None else super().identity()


@dataclass(frozen=True)
class Kept(Baseline):
    """This machine's own timing of the oracle, kept from an earlier session's pass."""

    thresholds: ResolvedThresholds
    local_oracle: str  # the oracle's fingerprint

    def before_runs(self) -> ResolvedThresholds:
        return self.thresholds

    def t_base_from(self) -> str:
        return "kept"

    def identity(self) -> list:
        return ["local", self.local_oracle]


@dataclass(frozen=True)
class Paired(Baseline):
    """The oracle run beside the submission. ``paired_because``: under --pde-baseline=local,
    why no baseline of this machine fitted (its timing then is not kept)."""

    oracle: Submission  # type: ignore[assignment]  # (a field here, a class default above)
    local: bool = False  # under --pde-baseline=local: resumed against this machine's timing of the oracle
    paired_because: str = ""

    def after_gated_run(self, done: Execution, against: Against) -> ResolvedThresholds:
        """e_base and tau_acc from the oracle's gated run (t_base not known yet: 0)."""
        base = cast("Execution", done.baseline)  # a paired task's execution has the oracle's
        failure = base.compile_failure or base.run_failure or base.output_failure
        if failure:
            raise BaselineFailure(f"the paired oracle's gated run failed: {failure}")
        try:
            e_base = against.error_of(cast(bytes, base.solution))
        except gates.GateFailure as exc:
            raise BaselineFailure(f"the paired oracle's outputs: {exc.reason}") from None
        self._check(against, e_base, 0.0, _solver_info(base))
        return _thresholds(against, e_base, 0.0)

    def after_timed_runs(
        self, done: Execution, against: Against, gated: ResolvedThresholds | None, strict: bool
    ) -> ResolvedThresholds | None:
        """t_base and tau_time from the oracle's timed runs. An oracle whose timed runs failed
        raises when ``strict``; else (an item the accuracy gate decides) t_base stays unknown."""
        base, gated = cast("Execution", done.baseline), cast(ResolvedThresholds, gated)
        t_base = _t_base(done)
        if t_base is None:
            if strict:
                raise BaselineFailure(f"the paired oracle's {base.timed_failure or 'timed runs are missing'}")
            return gated
        if strict:
            self._check(against, gated.e_base, t_base, _solver_info(base))
        compile_base = None if base.compile_cached else base.compile_sec
        return _thresholds(against, gated.e_base, t_base, base.t_first_run, compile_base)

    def figures(self, done: Execution, against: Against, timed: bool) -> dict[str, Any]:
        base = cast("Execution", done.baseline)
        figures: dict[str, Any] = {
            "submission": self.oracle.origin,
            "fingerprint": self.oracle.fingerprint,
            "error": against.error_of(cast(bytes, base.solution)),
            "t_first_run": base.t_first_run,
            "compile_sec": base.compile_sec,
            "compile_cached": base.compile_cached,
            "solver_info": _solver_info(base),
            "timed_runs": [],
        }
        t_base = _t_base(done) if timed else None
        if t_base is not None:
            figures["timed_runs"], figures["t_base"] = list(base.timed_runs), t_base
        if self.paired_because:
            figures["paired_because"] = self.paired_because
        return figures

    def t_base_from(self) -> str:
        return "paired"

    def identity(self) -> list:
        return ["local" if self.local else "paired", self.oracle.fingerprint]

    def _check(self, against: Against, e_base: float, t_base: float, solver_info: dict) -> None:
        problem = check_baseline(
            against.record,
            against.library,
            e_base=e_base,
            t_base=t_base,
            solver_info=solver_info,
            reference_norm=against.reference_norm,
            alphas=against.alphas,
        )
        if problem:
            raise BaselineFailure(f"the paired oracle's baseline cannot set thresholds: {problem}")


def _solver_info(base: Execution) -> dict:
    return json.loads(cast(bytes, base.meta)).get("solver_info") or {}


def _t_base(done: Execution) -> float | None:
    """The mean of the paired oracle's timed runs, None when they failed or do not match the submission's."""
    base = cast("Execution", done.baseline)
    if base.timed_failure or len(base.timed_runs) != len(done.timed_runs) or not base.timed_runs:
        return None
    return statistics.fmean(base.timed_runs)


def _thresholds(
    against: Against, e_base: float, t_base: float, t_first_base: float | None = None, compile_base: float | None = None
) -> ResolvedThresholds:
    return ResolvedThresholds.from_baseline(
        e_base,
        t_base,
        *against.alphas.resolve(against.record),
        source="paired oracle",
        t_first_base=t_first_base,
        compile_base=compile_base,
    )
