"""A Dask cluster on 127.0.0.1 for the tests and ``benchmarks/``: real `dask scheduler` and
`dask worker` processes, so that ``--pde-cluster`` is tried as it runs on a cluster (workers
in other processes, tasks pickled by module path, workers that die), not in-process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


class LoopbackCluster:
    """A Dask scheduler and ``workers`` one-thread workers (under one nanny process each)
    on loopback, started as `dask scheduler` / `dask worker` are on a cluster;
    ``stop()`` ends them by process group. ``machines``: one worker per name, each
    claiming to be that kind of machine (``PDEBENCH_MACHINE``), for tests of clusters
    with several machine classes."""

    def __init__(self, folder: Path, workers: int = 2, env: dict | None = None, machines: list[str] | None = None):
        self.folder, self.scheduler_file = folder, folder / "scheduler.json"
        self.processes: list[subprocess.Popen] = []
        logs = folder / "logs"
        logs.mkdir(parents=True, exist_ok=True)

        def start(name: str, *argv: str, extra_env: dict | None = None):
            with open(logs / f"{name}.log", "w") as log:
                self.processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", *argv],
                        stdout=log,
                        stderr=log,
                        env={**os.environ, **(env or {}), **(extra_env or {})},
                        start_new_session=True,
                    )
                )

        start(
            "scheduler",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(self.scheduler_file),
        )
        deadline = time.monotonic() + 60
        while not self.scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        worker = (
            "distributed.cli.dask_worker",
            "--scheduler-file",
            str(self.scheduler_file),
            "--nthreads",
            "1",
            "--no-dashboard",
            "--host",
            "127.0.0.1",
            "--local-directory",
            str(folder / "workers"),
        )
        if machines:
            workers = len(machines)
            for machine in machines:
                start(f"worker-{machine}", *worker, "--nworkers", "1", extra_env={"PDEBENCH_MACHINE": machine})
        else:
            start("workers", *worker, "--nworkers", str(workers))
        from distributed import Client

        with Client(scheduler_file=str(self.scheduler_file), timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        self.address = json.loads(self.scheduler_file.read_text())["address"]

    def log(self, name: str) -> str:
        return (self.folder / "logs" / f"{name}.log").read_text(errors="replace")

    def stop(self) -> None:
        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                process.wait(timeout=20)
            except Exception:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        time.sleep(0.5)


@contextlib.contextmanager
def scheduler_address(address: str | None, folder: Path, workers: int = 2):
    """``address`` if one is given, else that of a loopback cluster of ``workers`` started
    in ``folder`` for the block (``benchmarks/``)."""
    if address:
        yield address
        return
    local = LoopbackCluster(folder, workers=workers)
    try:
        yield local.address
    finally:
        local.stop()
