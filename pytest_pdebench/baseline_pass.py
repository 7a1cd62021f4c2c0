"""This machine's runtime baselines, timed before a session's submissions run, so that no
submission shares the machine with them.

Under ``--pde-baseline=local`` (the default) an item is judged against the oracle's timing
on this machine, kept between sessions (kept_baselines.py). Before the first item runs, the
session times the oracle on every selected item that has none kept, or one kept at another
speed (the speed probe past KEPT_TOLERANCE): the oracle alone, at its calibration setting
with its kernels compiled first on a coarse mesh (settings.Settings.warm_up), on the
session's workers (so under the run's conditions: workers, sandbox, runner), and while no
submission runs on the machine:

- not this session's: its workers share out the items to time (a claim file each) and
  wait for each other before any of them starts an item;
- not another session's: every session holds ``runs.lock`` shared while it runs submissions,
  and a timing is kept only if nobody held it just before and just after it;
- and a submission's processes end with its run (the sandbox ends them).

Each kept timing carries the session's speed (the speed probe, timed by all its workers at
once as the pass starts, ``RunConditions.session_speed``); it judges a later session whose
speed is within KEPT_TOLERANCE of it, and an item while the probe shows no load since
(speed.LOADED). An item whose timing was not kept (the oracle failed, another session ran
meanwhile) is paired: the oracle timed beside the submission, kept by nobody. So the first
session here costs two coarse runs and one oracle run per item more than a plain run, the
next ones nothing, and no submission can slow a timing that later sessions are judged by.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from .baselines import BaselineFailure, Calibrating
from .calibration import baseline_figures
from .evaluation import baseline_settings, evaluate
from .fingerprints import case_fingerprint
from .kept_baselines import PASS_RUNS
from .libraries import RuntimeMissing
from .machine_lock import others_running, timing_alone
from .plan import ItemPlan
from .reference import missing_case_data
from .sources.folder import NoSubmission
from .speed import probe_seconds

if TYPE_CHECKING:
    from .cases import CaseRecord
    from .placement import Placement
    from .settings import Settings
    from .sources import Submission
    from .speed import RunConditions

BARRIER_POLL_SEC = 0.5
READY_SEC = 120.0  # the workers' start: each collects the cases first
WORKER_START_SEC = 600.0  # a worker that has not begun its share by then is not waited for
PROGRESS_EVERY_SEC = 20.0
MIN_CORE_SHARE = 0.9  # of a core, in every timed run of a timing that is kept


@dataclasses.dataclass(frozen=True)
class Wanted:
    """An item whose oracle timing this machine lacks, with the oracle's solver for it."""

    record: CaseRecord
    library: str
    case_dir: Path
    oracle: Submission

    @property
    def name(self) -> str:
        return f"{self.record.id}[{self.library}]"


class PassRun(Protocol):
    """What the pass needs of the session (session.PdeRun)."""

    settings: Settings
    placement: Placement
    timing: RunConditions

    def missing_track(self, library: str) -> str | None: ...


class Coordination:
    """The pass's shared folder for the workers of one xdist session (the controller makes it):
    a claim file per item (its content: what became of the timing), each worker's count of
    wanted items, and a started/done file per worker for the barrier."""

    def __init__(self, folder: Path, worker: str, workers: int):
        self.folder, self.worker, self.workers = folder, worker, workers
        self._started: IO | None = None

    def probe_together(self) -> float:
        """The speed probe, timed by every worker at once (each once all have come this far)."""
        (self.folder / f"ready-{self.worker}").write_text("")
        deadline = time.monotonic() + READY_SEC
        while time.monotonic() < deadline and not all(
            (self.folder / f"ready-gw{n}").exists() for n in range(self.workers)
        ):
            time.sleep(0.05)
        return probe_seconds()

    def begin(self, wanted: int) -> None:
        (self.folder / f"wanted-{self.worker}").write_text(str(wanted))
        self._started = open(self.folder / f"started-{self.worker}", "w")  # held while this worker times
        fcntl.flock(self._started, fcntl.LOCK_EX)

    def claim(self, item: Wanted) -> bool:
        try:
            os.close(os.open(self.folder / f"claim-{item.name}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def record(self, item: Wanted, said: str) -> None:
        (self.folder / f"claim-{item.name}").write_text(said)

    def finish(self, wait: bool = True) -> None:
        """This worker's share is done; with ``wait``, once every worker's is."""
        (self.folder / f"done-{self.worker}").write_text("")
        if self._started is not None:
            self._started.close()
        if not wait:
            return
        deadline = time.monotonic() + WORKER_START_SEC
        while not all(self._finished(f"gw{n}", deadline) for n in range(self.workers)):
            time.sleep(BARRIER_POLL_SEC)

    def _finished(self, worker: str, deadline: float) -> bool:
        """Done, or gone (its started file no longer locked), or never started in time."""
        if (self.folder / f"done-{worker}").exists():
            return True
        started = self.folder / f"started-{worker}"
        if not started.exists():
            return time.monotonic() > deadline
        with open(started) as probe:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
        return True  # its holder is gone without a done file (a crashed worker): not waited for


def progress(folder: Path) -> tuple[int, int, int]:
    """(wanted, timed, kept) so far, from a coordination folder."""
    wanted = max((int(p.read_text() or 0) for p in folder.glob("wanted-*")), default=0)
    said = [p.read_text() for p in folder.glob("claim-*")]
    done = [s for s in said if s]
    return wanted, len(done), sum(s.startswith("kept") for s in done)


def progress_line(wanted: int, timed: int, kept: int, seconds: float) -> str:
    return (
        f"pdebench: this machine's baselines: the oracle timed on {timed} of {wanted} items "
        f"({kept} kept for the next sessions), {seconds / 60:.1f} min"
    )


class ProgressWatch:
    """Controller of an xdist session: a line every PROGRESS_EVERY_SEC while the workers time."""

    def __init__(self, folder: Path, say: Callable[[str], None]):
        self.folder, self.say = folder, say
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        started = last = time.monotonic()
        shown = (0, 0, 0)
        while not self._stop.wait(1.0):
            now = progress(self.folder)
            finished = now[0] and now[1] >= now[0]
            if now[0] and now != shown and (finished or time.monotonic() - last > PROGRESS_EVERY_SEC):
                self.say(progress_line(*now, time.monotonic() - started))
                shown, last = now, time.monotonic()
            if finished:
                return

    def stop(self) -> None:
        self._stop.set()


class BaselinePass:
    """The oracle timed on the session's items that lack a baseline of this machine."""

    def __init__(self, run: PassRun, say: Callable[[str], None], coordination: Coordination | None = None):
        self.run, self.say, self.coordination = run, say, coordination

    def wanted(self, items) -> list[Wanted]:
        found = []
        for item in items:
            record, library = getattr(item, "record", None), getattr(item, "library", None)
            if record is None or library is None or self.run.missing_track(library):
                continue
            if missing_case_data(record, item.path.parent):  # not run: the item says why
                continue
            try:
                oracle = self.run.placement.oracle(record, library)
            except NoSubmission:
                continue  # the item says so when it runs
            thresholds, _ = self.run.timing.local_thresholds(
                record, library, case_fingerprint(record, library), oracle.fingerprint
            )
            if thresholds is None:
                found.append(Wanted(record, library, item.path.parent, oracle))
        return found

    def time_all(self, items) -> None:
        coordination = self.coordination
        self.run.timing.set_session_speed(coordination.probe_together() if coordination else probe_seconds())
        wanted = self.wanted(items)
        if wanted and others_running():  # nothing timed now could be kept: the items are paired instead
            self.say(
                "pdebench: another session runs submissions on this machine: no baseline can be timed alone now; "
                f"{len(wanted)} items without one are paired with the oracle (not kept)"
            )
            wanted = []
        if coordination is not None:
            coordination.begin(len(wanted))
        try:
            if wanted and coordination is None:
                count = f"{len(wanted)} items have" if len(wanted) > 1 else "1 item has"
                self.say(
                    f"pdebench: {count} no baseline of this machine yet: the oracle is timed on them first, "
                    "alone (once; kept for the next sessions)"
                )
            started, last, kept = time.monotonic(), time.monotonic(), 0
            for number, item in enumerate(wanted, 1):
                if coordination is not None and not coordination.claim(item):
                    continue
                said = self.time_one(item)
                kept += said.startswith("kept")
                self._note(item, said)
                if coordination is not None:
                    coordination.record(item, said)
                elif time.monotonic() - last > PROGRESS_EVERY_SEC or number == len(wanted):
                    self.say(progress_line(len(wanted), number, kept, time.monotonic() - started))
                    last = time.monotonic()
        except BaseException:  # Ctrl-C, a crash: nobody waits for the others
            if coordination is not None:
                coordination.finish(wait=False)
            raise
        if coordination is not None:
            coordination.finish()

    def folder(self, item: Wanted) -> Path:
        """The audit folder of the oracle's timing of ``item``."""
        return self.run.settings.output_dir / "baselines" / item.library / item.record.id

    def _note(self, item: Wanted, said: str) -> None:
        folder = self.folder(item)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kept.txt").write_text(said + "\n")

    def time_one(self, item: Wanted) -> str:
        """Time the oracle on ``item`` and keep its figures if nothing else ran; says what became of them."""
        run, record, library, oracle = self.run, item.record, item.library, item.oracle
        fingerprint = case_fingerprint(record, library)
        settings = dataclasses.replace(baseline_settings(run.settings), resume=False, runs=PASS_RUNS, warm_up=True)
        plan = ItemPlan(record, library, item.case_dir, self.folder(item), fingerprint, Calibrating())
        with timing_alone() as alone:  # no submission of any session starts while this runs
            if not alone:
                return "not kept: another session runs submissions on this machine"
            try:
                verdict = evaluate(plan, oracle, "oracle", settings)
            except (RuntimeMissing, BaselineFailure) as exc:
                return f"not timed: {exc}"
            except Exception as exc:  # noqa: BLE001 - a reference or a sandbox that fails here fails its item too, and says so there
                return f"not timed: {type(exc).__name__}: {str(exc)[:200]}"
        if verdict.outcome != "PASS" or verdict.calibration_problem:
            return f"not kept: the oracle's run {verdict.outcome}: {verdict.reason or verdict.calibration_problem}"
        starved = starved_because(verdict.cores_least)
        if starved:
            return f"not kept: {starved}"
        return run.timing.keep(record, library, fingerprint, oracle.fingerprint, baseline_figures(verdict.to_dict()))


def starved_because(cores_least: float | None) -> str | None:
    """Why a timing shows that the oracle did not have its core to itself, or None: it got
    less than MIN_CORE_SHARE of a core in a timed run (CPU seconds over the window; the
    oracle is one process that computes, so a quiet machine gives it about 1). Unmeasured
    (a container's run): the lock alone decides."""
    if cores_least is None or cores_least >= MIN_CORE_SHARE:
        return None
    return (
        f"the oracle got {cores_least:.2f} of a core while timed (at least {MIN_CORE_SHARE} on a quiet machine): "
        "something else ran on its core"
    )
