"""The controller's side of ``--pde-cluster``, in the pytest session: the workers' facts
checked before any work is sent (one thread each, one runtime, their kinds of machine),
an item's runs sent to a worker of the class its thresholds were measured on, and the
results taken back for judging. Work whose submission is known without generation (a
folder of solvers) is submitted ahead, in item order, so the workers stay busy while the
controller judges; an interrupted controller kills its runs on the workers.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ..execution import Execution, RunTask
from .worker import RunSite, WorkerFacts, abort_runs, machine_resource, run_on_worker, worker_facts

if TYPE_CHECKING:  # the cluster extra (Dask) is imported only once a cluster is used
    from distributed import Future

INSTALL_HINT = "--pde-cluster needs Dask: pip install 'pytest-pdebench[cluster]' (dask, distributed, dask-jobqueue)"
CONNECT_TIMEOUT_SEC = 20
AHEAD_PER_WORKER = 4  # runs sent ahead per worker: enough to keep it busy, few results waiting
WAIT_SLICE_SEC = 1.0  # a wait for a run looks this often for an interrupt whose KeyboardInterrupt was lost


class ClusterError(RuntimeError):
    """The cluster cannot take the run (unreachable, unsuitable workers): the message says why."""


class _Executor:
    """``execution.Executor`` for a cluster: an item's runs on a worker of ``machine`` (the
    class its thresholds were measured on). The worker times every well-formed run; the
    gates drop what a local run would not have timed."""

    def __init__(self, cluster: Cluster, machine: str):
        self.cluster, self.machine = cluster, machine

    def send(self, task: RunTask) -> None:
        self.cluster.submit(task, self.machine)

    def __call__(self, task: RunTask, workspace: Path, time_it) -> Execution:
        done = self.cluster.take(task, self.machine)
        if done.worker and done.machine != self.machine:  # a worker whose resource lies
            raise ClusterError(
                f"{task.case_id}[{task.library}] was timed on a {done.machine} worker "
                f"({done.worker}), but its thresholds are for {self.machine}"
            )
        return done


def connect(address: str):
    """A Dask client for ``address``: tcp://HOST:PORT, or a scheduler file."""
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError(INSTALL_HINT) from None
    target = {"scheduler_file": address} if Path(address).is_file() else {"address": address}
    try:
        return Client(**target, timeout=CONNECT_TIMEOUT_SEC, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"--pde-cluster {address}: no Dask scheduler answers there ({exc})") from None


class Cluster:
    """The controller's side: the workers' facts, work submitted ahead, results."""

    def __init__(self, address: str, libraries: list[str], sandbox: str, images: dict):
        self.address = address
        self.client = connect(address)
        self._lock = threading.Lock()
        self.pending: dict[tuple, tuple[RunTask, Future]] = {}
        self.owner = f"{os.uname().nodename}-{os.getpid()}-{os.urandom(4).hex()}"  # names this session's runs
        self.ahead = 0  # runs sent ahead at most: set from the workers below
        self.interrupted = False  # SIGINT or SIGTERM came (see _note_interrupts)
        self._handlers: dict = {}
        try:
            self.client.register_plugin(RunSite())
            replies = self.client.run(worker_facts, libraries, sandbox, images)
        except Exception:
            self.client.close()
            raise
        self.workers = [WorkerFacts(**facts) for facts in replies.values()]
        if not self.workers:
            self.close()
            raise ClusterError(f"--pde-cluster {address}: the scheduler has no workers")
        self.ahead = AHEAD_PER_WORKER * len(self.workers)
        crowded = [w.address for w in self.workers if w.threads != 1]
        if crowded:
            self.close()
            raise ClusterError(
                f"--pde-cluster {address}: workers {', '.join(crowded)} run more than one task at "
                "a time, so timed runs would share cores; start them with `dask worker --nthreads 1`"
            )
        self._note_interrupts()

    def _note_interrupts(self) -> None:
        """SIGINT and SIGTERM also set ``interrupted``, and ``_result`` waits in slices that look
        at it: a KeyboardInterrupt raised while the main thread runs a finalizer (``__del__``, a
        weakref callback) is printed as "Exception ignored" and lost, and the controller would
        wait out the whole run it takes next. Signals ignored or at their default
        stay so; ``close`` puts the handlers back."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(signum)
            if callable(handler):

                def note(number, frame, handler=handler):
                    self.interrupted = True
                    return handler(number, frame)

                signal.signal(signum, note)
                self._handlers[signum] = (handler, note)

    def machines(self) -> dict[str, int]:
        """Machine key -> how many workers of that kind, the best-staffed class first."""
        counts: dict[str, int] = {}
        for worker in self.workers:
            counts[worker.machine] = counts.get(worker.machine, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: -item[1]))

    @property
    def size(self) -> int:
        """How many runs share one host at most (the ``workers`` condition of a calibration)."""
        hosts: dict[str, int] = {}
        for worker in self.workers:
            hosts[worker.host] = hosts.get(worker.host, 0) + 1
        return max(hosts.values())

    def runtimes(self, libraries) -> tuple:
        """Each library's runtime as the workers report it (``Settings.remote_runtimes``): the
        first worker's that has it, else why none has. Workers that disagree are an error."""
        found = []
        for library in libraries:
            reports = [w.runtimes.get(library, {}) for w in self.workers]
            present = {(r["version"], r["image"]) for r in reports if "missing" not in r}
            if len(present) > 1:
                raise ClusterError(
                    f"the cluster's workers run different {library} runtimes ({sorted(present, key=str)}):"
                    " one run must time one runtime"
                )
            if present:
                version, image = present.pop()
                found.append((library, version, image, None))
            else:
                found.append((library, "", None, reports[0].get("missing", "not reported")))
        return tuple(found)

    def metadata(self) -> dict:
        return {
            "address": self.address,
            "workers": [
                {"address": w.address, "host": w.host, "machine": w.machine, "core": w.core} for w in self.workers
            ],
        }

    @staticmethod
    def _key(task: RunTask, machine: str) -> tuple:
        return task.library, task.case_id, task.submission.fingerprint, machine

    def submit(self, task: RunTask, machine: str) -> None:
        """Send a task ahead of its item (the item collects it when its turn comes)."""
        future = self.client.submit(
            run_on_worker,
            task,
            self.owner,
            resources={machine_resource(machine): 1},
            pure=False,
            key=f"pdebench-{task.library}-{task.case_id}-{os.urandom(4).hex()}",
        )
        with self._lock:
            self.pending[self._key(task, machine)] = (task, future)

    def discard(self, library: str, case_id: str) -> None:
        """Cancel what was sent ahead for an item that is done without taking it."""
        with self._lock:
            keys = [key for key in self.pending if key[:2] == (library, case_id)]
            futures = [self.pending.pop(key)[1] for key in keys]
        for future in futures:
            future.cancel()

    def in_flight(self) -> int:
        with self._lock:
            return len(self.pending)

    def executor(self, machine: str) -> _Executor:
        """The ``execution.Executor`` of items whose runs go to workers of ``machine``."""
        return _Executor(self, machine)

    def take(self, task: RunTask, machine: str) -> Execution:
        """The result of ``task`` on ``machine``: of the one sent ahead, or sent now."""
        key = self._key(task, machine)
        with self._lock:
            sent, future = self.pending.pop(key, (None, None))
        if future is None or sent != task:
            if future is not None:
                future.cancel()
            self.submit(task, machine)
            with self._lock:
                _, future = self.pending.pop(key)
        return self._result(future)

    def _result(self, future) -> Execution:
        from distributed import KilledWorker

        try:
            while True:
                try:
                    return future.result(timeout=WAIT_SLICE_SEC)
                except TimeoutError:
                    if future.done():  # done meanwhile, or the run's own TimeoutError: as it is
                        return future.result()
                    if self.interrupted:  # its KeyboardInterrupt was lost (_note_interrupts)
                        raise KeyboardInterrupt from None
        except KilledWorker as exc:  # the scheduler gave up after the workers running it died
            return Execution(run_failure=f"the run ended every Dask worker that tried it ({exc})")

    def close(self) -> None:
        """Cancel what is queued, kill what runs on the workers, and disconnect."""
        for signum, (handler, note) in self._handlers.items():  # no wait of ours left to look
            if signal.getsignal(signum) is note:
                signal.signal(signum, handler)
        self._handlers.clear()
        with self._lock:
            futures = [future for _, future in self.pending.values()]
            self.pending.clear()
        try:
            if futures:
                self.client.cancel(futures)
            self.client.run(abort_runs, self.owner)
        except Exception:  # a scheduler already gone leaves nothing to cancel
            pass
        self.client.close()
