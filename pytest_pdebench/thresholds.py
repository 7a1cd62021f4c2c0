"""Thresholds from a baseline, and whether a baseline can set them (paper, Eq. 2):

    tau_acc  = min(max(alpha_acc * e_base, tau_min), tau_max)
    tau_time = alpha_time * t_base

tau_max is ours, not the paper's: the paper has no cap and floats one for reference-based cases
in a future version (appendix F). At 8e-3 (it binds on the top 5% of our DOLFINx
baselines) no case accepts an answer 1% off, however coarse its baseline came out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .cases import CaseRecord
from .oracle_settings import calibration_setting

DEFAULT_ALPHA_ACC = 10.0

DEFAULT_ALPHA_TIME = 3.0

DEFAULT_TAU_MIN = 1e-6

DEFAULT_TAU_MAX = 8e-3

# the paper's threshold-sensitivity grid (Appendix E): each varied with the other at its default
SENSITIVITY_ALPHA_ACC = (2.0, 5.0, 10.0, 50.0, 100.0)

SENSITIVITY_ALPHA_TIME = (1.0, 2.0, 3.0, 5.0)


def accuracy_threshold(e_base: float, alpha_acc: float, tau_min: float, tau_max: float) -> float:
    return min(max(alpha_acc * e_base, tau_min), tau_max)


@dataclass(frozen=True)
class Alphas:
    alpha_acc: float | None = None  # None: the case's evaluation_config value
    alpha_time: float | None = None
    tau_min: float | None = None
    tau_max: float | None = None

    def resolve(self, record: CaseRecord) -> tuple[float, float, float, float]:
        """(alpha_acc, alpha_time, tau_min, tau_max): these options where set, else the case's."""
        config = record.evaluation_config
        return (
            self.alpha_acc if self.alpha_acc is not None else config.alpha_acc,
            self.alpha_time if self.alpha_time is not None else config.alpha_time,
            self.tau_min if self.tau_min is not None else config.tau_min,
            self.tau_max if self.tau_max is not None else config.tau_max,
        )


@dataclass(frozen=True)
class ResolvedThresholds:
    e_base: float
    t_base: float
    tau_acc: float
    tau_time: float
    source: str  # which calibration these came from
    foreign_machine: bool = False  # measured on another kind of machine
    factors: dict | None = None  # alpha_acc, alpha_time, tau_min, tau_max: a report re-gates with others
    # the baseline's own first (gated) run, kernels compiled in it; None: not measured
    t_first_base: float | None = None
    compile_base: float | None = None  # compiled tracks: the baseline's build, not from a cache

    @classmethod
    def from_baseline(
        cls,
        e_base: float,
        t_base: float,
        alpha_acc: float,
        alpha_time: float,
        tau_min: float,
        tau_max: float,
        source: str,
        foreign_machine: bool = False,
        t_first_base: float | None = None,
        compile_base: float | None = None,
    ) -> ResolvedThresholds:
        return cls(
            e_base,
            t_base,
            accuracy_threshold(e_base, alpha_acc, tau_min, tau_max),
            alpha_time * t_base,
            source,
            foreign_machine,
            {"alpha_acc": alpha_acc, "alpha_time": alpha_time, "tau_min": tau_min, "tau_max": tau_max},
            t_first_base or None,
            compile_base or None,
        )

    @property
    def tau_first(self) -> float | None:
        """The first-run gate's bound: alpha_time times the baseline's first run."""
        if self.t_first_base is None:
            return None
        return (self.factors or {}).get("alpha_time", 3.0) * self.t_first_base

    def accurate_under_some_sensitivity_alpha(self, error: float) -> bool:
        """Could a looser accuracy multiplier of the sensitivity grid accept this error?
        Such an item's timed runs are taken even though it fails the accuracy gate, so a
        report can re-gate it (Appendix E) from stored numbers."""
        factors = self.factors or {}
        loosest = accuracy_threshold(
            self.e_base,
            max(SENSITIVITY_ALPHA_ACC),
            factors.get("tau_min", DEFAULT_TAU_MIN),
            factors.get("tau_max", DEFAULT_TAU_MAX),
        )
        return math.isfinite(error) and error <= loosest


def check_baseline(
    record: CaseRecord,
    library: str,
    *,
    e_base: float,
    t_base: float,
    solver_info: dict,
    reference_norm: float,
    alphas: Alphas,
) -> str | None:
    """Why a baseline of the item (``record`` on ``library``) cannot be used (pitfalls seen
    in the public harness), or None. It must have run the record's calibration setting."""
    setting = calibration_setting(record, library)
    alpha_acc, alpha_time, tau_min, tau_max = alphas.resolve(record)
    if not math.isfinite(e_base):
        return f"baseline error is not finite ({e_base})"
    degree = solver_info.get("element_degree")
    if setting and degree is not None and degree != setting.get("element_degree"):
        return (
            f"the baseline ran degree {degree}, not its calibration setting's {setting.get('element_degree')}: "
            "the oracle ignores the setting"
        )
    if reference_norm < 1e-8:
        return f"reference field is ~0 (norm {reference_norm:.2e}): a relative error would be noise"
    if solver_info.get("converged") is False:
        return f"the baseline's solver did not converge ({solver_info.get('converged_reason', 'no reason given')})"
    uncapped = max(alpha_acc * e_base, tau_min)  # the cap would hide a baseline this far off
    if uncapped >= 1.0:
        return (
            f"tau_acc {uncapped:.3g} >= 1 before the cap: an all-zero field would pass (e_base {e_base:.3g} too large)"
        )
    timeout = record.evaluation_config.timeout_sec
    if alpha_time * t_base > timeout:
        return f"tau_time {alpha_time * t_base:.1f} s exceeds the case timeout {timeout:.0f} s"
    return None
