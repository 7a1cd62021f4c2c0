"""The workers' side of ``--pde-cluster``: what the controller sends to run in a Dask
worker's process (the functions go by module path, so this module must import on a worker
and needs nothing of the controller).

A worker times one run at a time on a core of its own: workers must have one thread
(``dask worker --nthreads 1``), and each pins itself to a core no other worker of its
host holds when there are cores enough (``RunSite``), and declares its kind of machine as
a Dask resource: an item's runs go only to workers of the class its baselines belong to.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..execution import Execution, RunTask, execute
from ..libraries import RuntimeMissing, detect_runtime
from ..machine import machine_key
from ..sandbox import abort_live_runs, owned_by

try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # the cluster extra is not installed: controller.connect() says so
    # a stand-in base class; unused-ignore: without Dask installed mypy sees no clash
    WorkerPlugin = object  # type: ignore[misc,assignment,unused-ignore]

CORE_LOCKS = Path(tempfile.gettempdir()) / "pdebench-cores"


@dataclass(frozen=True)
class WorkerFacts:
    address: str
    host: str
    machine: str  # calibration.machine_key() there
    threads: int
    runtimes: dict  # library -> {"version", "image"} or {"missing": reason}
    core: int | None  # the core it is pinned to


def machine_resource(machine: str) -> str:
    """The Dask resource a worker of this kind of machine holds (one unit: one run at a time)."""
    return f"pdebench-machine-{machine}"


class RunSite(WorkerPlugin):
    """Worker plugin (also run on workers that join later, restarted ones included): pin
    the worker to a core no other worker of its host holds (a lock file per core, held for
    the worker's life) when the host has a core per worker, and declare the worker's kind
    of machine as a resource, so that an item's runs go only where its baselines belong."""

    name = "pdebench-run-site"

    async def setup(self, worker):
        self._lock = None  # the core's lock file, held open while the worker lives
        self.core = self._pin()
        await worker.set_resources(**{machine_resource(machine_key()): 1})

    def _pin(self) -> int | None:
        import fcntl

        if not hasattr(os, "sched_setaffinity"):
            return None
        CORE_LOCKS.mkdir(exist_ok=True)
        for core in sorted(os.sched_getaffinity(0)):
            handle = open(CORE_LOCKS / f"core-{core}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            os.sched_setaffinity(0, {core})
            self._lock = handle
            return core
        return None

    def teardown(self, worker):
        if self._lock is not None:
            self._lock.close()


def worker_facts(libraries: list[str], sandbox: str, images: dict, dask_worker=None) -> dict:
    """What the controller needs to know about a worker before sending it work."""
    runtimes = {}
    for library in libraries:
        try:
            runtime = detect_runtime(library, sandbox, images.get(library))
            runtimes[library] = {"version": runtime.version, "image": runtime.image}
        except RuntimeMissing as exc:
            runtimes[library] = {"missing": str(exc)}
    pin = dask_worker.plugins.get(RunSite.name)
    return {
        "address": dask_worker.address,
        "host": os.uname().nodename,
        "machine": machine_key(),
        "threads": dask_worker.state.nthreads,
        "runtimes": runtimes,
        "core": getattr(pin, "core", None),
    }


def run_on_worker(task: RunTask, owner: str) -> Execution:
    """A task's runs in a scratch folder of the worker, removed afterwards; they belong to
    ``owner`` (the controller's session), whose abort ends them."""
    from distributed import get_worker

    worker = get_worker()
    root = Path(worker.local_directory) / "pdebench-items"
    root.mkdir(exist_ok=True)
    workspace = Path(tempfile.mkdtemp(prefix=f"{task.library}-{task.case_id}-", dir=root))
    start = time.perf_counter()
    try:
        with owned_by(owner):
            done = execute(task, workspace)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    done.worker, done.site_sec = worker.address, time.perf_counter() - start
    return done


def abort_runs(owner: str) -> int:
    """Kill the runs of ``owner`` going on in this worker (its controller was interrupted)."""
    return abort_live_runs(owner)
