"""The three gates over an item's runs (paper, Section 4.2): execution and output format,
accuracy, runtime, in that order, with the flags a reader should see beside them. Every
run is judged: the timed runs' outputs go through the first two gates as the gated run's
did (evaluation.py says what is timed and how the runs are made).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path
from typing import cast

import numpy as np

from . import error_regions, gates, metrics, pictures
from .baselines import Against
from .domains import resolve_geometry
from .execution import Execution
from .grid import EvalGrid, valid_mask
from .plan import ItemPlan
from .reference import reference_fields
from .settings import Settings
from .thresholds import ResolvedThresholds, check_baseline
from .verdict import Verdict

# a timed run whose processes used more CPU than this many cores' worth over its window
# (with CORES_SLACK_SEC for the sandbox's own start) is flagged in its verdict
CORES_FLAG, CORES_SLACK_SEC = 1.2, 0.05
# a compiled track's build over this many times the baseline's (both not from a cache) is
# flagged: work moved into compile-time evaluation (constexpr) is never in t_agent
COMPILE_FLAG = 3.0


def show(verdict: Verdict, thresholds: ResolvedThresholds) -> None:
    """The thresholds the verdict is judged by, as it shows them (t_base once it is known)."""
    verdict.e_base, verdict.tau_acc, verdict.calibration = thresholds.e_base, thresholds.tau_acc, thresholds.source
    verdict.alphas = thresholds.factors
    if thresholds.t_base:
        verdict.t_base, verdict.tau_time = thresholds.t_base, thresholds.tau_time
        verdict.t_first_base, verdict.tau_first = thresholds.t_first_base, thresholds.tau_first


class Judge:
    """The three gates over an ``Execution`` of the item ``plan``: where its reference lives,
    and its baseline (baselines.py), asked for the thresholds after the gated run and after
    the timed runs (a paired oracle's runs, beside the submission's, give them)."""

    def __init__(self, plan: ItemPlan, verdict: Verdict, settings: Settings):
        self.record, self.case_dir, self.baseline = plan.record, plan.case_dir, plan.baseline
        self.verdict, self.settings = verdict, settings
        self.gated: ResolvedThresholds | None = None  # the accuracy gate's (after_gated_run, once)
        self.gated_solution: np.ndarray | None = None  # the gated run's, once its outputs are read
        self.asked = False
        self._regions: error_regions.Regions | None = None  # made at the first run read, kept for the others

    def _after_gated_run(self, done: Execution) -> ResolvedThresholds | None:
        """The baseline's thresholds for the gated run, asked once (a failed oracle raises here)."""
        if not self.asked:
            self.gated = self.baseline.after_gated_run(done, self.against)
            self.asked = True
            self.verdict.baseline = self.baseline.figures(done, self.against, timed=False)
            if self.gated is not None:
                show(self.verdict, self.gated)
        return self.gated

    def prepare(self) -> None:
        spec = self.record.case_spec_dict()
        self.grid = EvalGrid.from_spec(spec["eval_grid"])
        self.geometry = resolve_geometry(spec["domain"])
        self.valid = valid_mask(spec, self.grid, self.geometry)
        self.reference = reference_fields(self.record, self.grid, self.case_dir)
        self.against = Against(
            self.record,
            self.verdict.library,
            self.grid.axis_names,
            self.grid.shape,
            self.valid,
            self.reference,
            self.settings.alphas,
        )

    def draw(self, item_dir: Path) -> list[str]:
        """fields.png of the gated run's solution (pictures.py): its file name, or nothing when
        the run left no solution to draw. A picture never changes a verdict: a failure to draw
        is a line in pictures.log."""
        if self.gated_solution is None:
            return []
        verdict = self.verdict
        title = f"{verdict.case_id} [{verdict.library}]: {verdict.outcome} {verdict.reason[:90]}"
        try:
            drawn = pictures.draw_fields(
                item_dir / pictures.FIELDS_FILE,
                self.gated_solution,
                self.reference,
                self.valid,
                self.grid,
                self.geometry,
                self.record.case_spec.output.arrays,
                title,
            )
        except Exception as exc:  # noqa: BLE001 - a picture is an aid, never a verdict
            (item_dir / "pictures.log").write_text(f"fields.png not drawn: {type(exc).__name__}: {exc}\n")
            return []
        return [drawn.name]

    def worth_timing(self, done: Execution) -> bool:
        """Whether the gated run earns timed runs: gates 1 and 2 pass, or the accuracy gate
        fails by a margin some alpha of the sensitivity grid accepts (a near miss)."""
        try:
            thresholds = self._after_gated_run(done)
            self._gated_run(done, dataclasses.replace(self.verdict), None, thresholds)
        except Exception:  # noqa: BLE001 - a gate's failure, or outputs that break a reader: all_gates says which
            return False
        return True

    def _flag_compile(self, done: Execution, thresholds: ResolvedThresholds | None) -> None:
        """A build far slower than the baseline's (neither from a cache) is flagged: it is
        outside every timed window, so work done at compile time would go uncounted."""
        base = thresholds.compile_base if thresholds is not None else None
        if done.compile_sec is None or done.compile_cached or not base:
            return
        if done.compile_sec > COMPILE_FLAG * base:
            self.verdict.flags.append(
                f"the build took {done.compile_sec:.1f} s, {done.compile_sec / base:.1f} x the baseline's "
                f"{base:.1f} s (more than {COMPILE_FLAG:g} x): work done at compile time is not timed"
            )

    def all_gates(self, done: Execution, item_dir: Path) -> None:
        verdict = self.verdict
        verdict.take_facts(done)
        gated = self._after_gated_run(done)  # before anything of the submission's is judged: a failed oracle stops here
        if done.compile_log is not None:
            (item_dir / "compile.log").write_text(done.compile_log)
        if done.compile_failure is None:
            (item_dir / "stdout.txt").write_text(done.stdout)
            (item_dir / "stderr.txt").write_text(done.stderr)
        inaccurate = self._gated_run(done, verdict, item_dir, gated)
        # gate 3: runtime, over warm repeated runs, each of them judged as the gated run was
        verdict.timed_runs = list(done.timed_runs)
        if done.timed_failure:
            verdict.timed_failure = done.timed_failure
            raise inaccurate or gates.exec_failure(done.timed_failure)
        try:
            self._timed_runs(done, verdict, gated if inaccurate is None else None)
        except gates.GateFailure:
            if inaccurate:  # a near miss stays F-Acc, as with a failed timed run above
                raise inaccurate from None
            raise
        verdict.t_agent = statistics.fmean(verdict.timed_runs)
        timed = self.baseline.after_timed_runs(done, self.against, gated, strict=inaccurate is None)
        if timed is not gated:
            show(verdict, cast(ResolvedThresholds, timed))
            verdict.baseline = self.baseline.figures(done, self.against, timed=True)
        self._flag_compile(done, timed)
        if inaccurate:
            raise inaccurate
        if timed is None:  # no baseline: this run measures one
            verdict.e_base, verdict.t_base = verdict.error, verdict.t_agent
            verdict.calibration_problem = check_baseline(
                self.record,
                verdict.library,
                e_base=cast(float, verdict.error),  # set by the gated run, as the reference norm
                t_base=verdict.t_agent,
                solver_info=verdict.solver_info,
                reference_norm=cast(float, verdict.reference_norm),
                alphas=self.settings.alphas,
            )
        else:
            try:
                gates.time_gate(verdict.t_agent, timed.tau_time)
            except gates.GateFailure as slow:  # what tau_time is, and whose timing t_base is
                raise gates.GateFailure(slow.outcome, f"{slow.reason} ({self._time_bound(timed)})") from None
            gates.first_run_gate(verdict.t_first_run, timed.tau_first)

    def _time_bound(self, timed: ResolvedThresholds) -> str:
        """ "alpha_time 3 x t_base 2.06 s, the oracle paired beside this run (...)"."""
        alpha = (timed.factors or {}).get("alpha_time")
        times = f"alpha_time {alpha:g} x t_base {timed.t_base:.3g} s" if alpha else f"t_base {timed.t_base:.3g} s"
        whose = {
            "stored": "a stored calibration of this kind of machine",
            "stored elsewhere": "a stored calibration of another kind of machine",
            "kept": "this machine's kept timing of the oracle",
            "paired": "the oracle timed beside this run",
        }.get(self.verdict.t_base_from or "", "")
        because = (self.verdict.baseline or {}).get("paired_because", "")
        return ", ".join(part for part in (times, whose, because) if part)

    def _timed_runs(self, done: Execution, verdict: Verdict, accurate: ResolvedThresholds | None) -> None:
        """Each timed run's outputs through gates 1 and 2 as the gated run's went: F-Exec
        for outputs that break the contract, F-Acc for an error over tau_acc where the
        gated run's was under it (``accurate``: the thresholds it passed; None: it missed,
        or none judge it), the run named in the reason. Records each run's error,
        the largest difference from the gated run's solution and the cores used."""
        names = self.record.case_spec.output.arrays
        norm = verdict.reference_norm or 1.0
        for number, output in enumerate(done.timed_outputs, 1):
            if output.cpu_sec is not None and done.timed_runs[number - 1] > 0:
                window = done.timed_runs[number - 1]
                verdict.cores_used = max(verdict.cores_used or 0.0, output.cpu_sec / window)
                verdict.cores_least = min(verdict.cores_least or float("inf"), output.cpu_sec / window)
                if output.cpu_sec > CORES_FLAG * window + CORES_SLACK_SEC and not verdict.flags:
                    verdict.flags.append(
                        f"timed run {number} used {output.cpu_sec / window:.2f} cores over its "
                        f"window (more than {CORES_FLAG})"
                    )
            if output.solution is None:  # byte for byte the gated run's
                verdict.timed_errors.append(cast(float, verdict.error))  # set by the gated run
                verdict.run_difference = verdict.run_difference or 0.0
                continue
            try:
                solution = gates.read_solution(
                    output.solution, names, self.grid.axis_names, self.grid.shape, self.valid
                )
            except gates.GateFailure as failure:
                raise gates.exec_failure(f"timed run {number}: {failure.reason}") from None
            error = metrics.relative_l2_error(solution, self.reference, self.valid)
            verdict.timed_errors.append(error)
            difference = float(np.linalg.norm((solution - self.gated_solution)[self.valid])) / norm
            verdict.run_difference = max(verdict.run_difference or 0.0, difference)
            if accurate is not None:
                try:
                    gates.accuracy_gate(error, accurate.tau_acc)
                except gates.GateFailure as failure:
                    raise gates.GateFailure(
                        "F-Acc", f"timed run {number}: {failure.reason} (the gated run's {verdict.error:.2e})"
                    ) from None

    def _gated_run(
        self, done: Execution, verdict: Verdict, item_dir: Path | None, thresholds: ResolvedThresholds | None
    ) -> gates.GateFailure | None:
        """Gates 1 (execution and output format) and 2 (accuracy) on the gated run: raises a
        failure that ends the item, returns a near miss's (the timed runs still follow).
        ``thresholds`` None: no baseline, the run measures one (no accuracy gate)."""
        for failure in (done.compile_failure, done.run_failure, done.output_failure):
            if failure:
                raise gates.exec_failure(failure)
        # a run without a failure has its outputs
        solution_bytes, meta_bytes = cast(bytes, done.solution), cast(bytes, done.meta)
        verdict.solver_info = json.loads(meta_bytes).get("solver_info") or {}
        names = self.record.case_spec.output.arrays
        solution = gates.read_solution(solution_bytes, names, self.grid.axis_names, self.grid.shape, self.valid)
        self.gated_solution = solution
        if item_dir is not None:
            (item_dir / "solution.npz").write_bytes(solution_bytes)
            (item_dir / "meta.json").write_bytes(meta_bytes)
        valid = self.valid
        verdict.reference_norm = float(np.linalg.norm(self.reference[valid]))
        verdict.error = metrics.relative_l2_error(solution, self.reference, valid)
        for key, value in metrics.diagnostics(solution, self.reference, valid).items():
            setattr(verdict, key, value)
        if self._regions is None:
            self._regions = error_regions.Regions.of(self.record.case_spec_dict(), self.geometry, self.grid, valid)
        verdict.errors_by_region = self._regions.errors(solution, self.reference)
        if thresholds is None:
            return None
        try:
            gates.accuracy_gate(verdict.error, thresholds.tau_acc)
        except gates.GateFailure as missed:
            # the reason says where the error sits (each boundary piece's band, the interior)
            where = error_regions.where_largest(verdict.errors_by_region)
            said = gates.GateFailure(missed.outcome, f"{missed.reason}; {where}" if where else missed.reason)
            # timed all the same when a looser alpha_acc of the sensitivity grid would accept
            # it: the report re-gates from stored numbers (costs the timed runs of near misses)
            if not thresholds.accurate_under_some_sensitivity_alpha(verdict.error):
                raise said from None
            return said
        return None
