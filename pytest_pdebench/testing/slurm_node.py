"""A one-node Slurm cluster for a test: munged, slurmctld and slurmd from Debian's
slurm-wlm, configured in a folder of their own (nothing under /etc touched), started and
stopped by pid. ``SlurmNode.problem()`` says why it cannot run here (then the test skips
with that reason)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sinfo", "sbatch")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SlurmNode:
    """The daemons' files live in a fresh folder under /tmp: munged runs as user munge,
    which must reach it (pytest's own temporary folders are private to root)."""

    def __init__(self):
        import tempfile

        self.folder = Path(tempfile.mkdtemp(prefix="pdebench-slurm-"))
        self.processes: dict[str, subprocess.Popen] = {}
        self.conf = self.folder / "slurm" / "slurm.conf"

    @staticmethod
    def problem() -> str | None:
        missing = [name for name in DAEMONS if shutil.which(name) is None]
        if missing:
            return f"Slurm is not installed ({', '.join(missing)} missing; `apt-get install slurm-wlm munge`)"
        if os.geteuid() != 0:
            return "the one-node Slurm cluster runs its daemons as root (SlurmUser=root): not root here"
        try:
            pwd.getpwnam("munge")
        except KeyError:
            return "no user 'munge' (the munge package creates it)"
        return None

    @property
    def env(self) -> dict[str, str]:
        """What Slurm's commands (sbatch, squeue, scancel) need to find this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def start(self, timeout: float = 60) -> None:
        munge = self.folder / "munge"
        munge.mkdir(parents=True, mode=0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        user = pwd.getpwnam("munge")
        for path in (munge, key):
            os.chown(path, user.pw_uid, user.pw_gid)
        self.folder.chmod(0o755)
        socket_path = munge / "munge.socket.2"
        self._spawn(
            "munged",
            [
                "runuser",
                "-u",
                "munge",
                "--",
                "munged",
                "--foreground",
                "--force",
                f"--socket={socket_path}",
                f"--key-file={key}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--log-file={munge / 'munged.log'}",
                f"--seed-file={munge / 'munged.seed'}",
            ],
        )
        self._wait(lambda: socket_path.exists(), timeout, "munged did not open its socket")
        slurm = self.conf.parent
        for name in ("state", "spool"):
            (slurm / name).mkdir(parents=True)
        host = socket.gethostname().split(".")[0]
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=pdebench",
                    f"SlurmctldHost={host}",
                    "SlurmUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={socket_path}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    f"StateSaveLocation={slurm / 'state'}",
                    f"SlurmdSpoolDir={slurm / 'spool'}",
                    f"SlurmctldPidFile={slurm / 'slurmctld.pid'}",
                    f"SlurmdPidFile={slurm / 'slurmd.pid'}",
                    f"SlurmctldLogFile={slurm / 'slurmctld.log'}",
                    f"SlurmdLogFile={slurm / 'slurmd.log'}",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    f"NodeName={host} CPUs={os.cpu_count()} RealMemory=16000 State=UNKNOWN",
                    f"PartitionName=pdebench Nodes={host} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf)])
        self._wait(
            lambda: self.state() == "idle",
            timeout,
            f"the node did not come up idle (sinfo: {self.state()!r}); see {slurm}/*.log",
        )

    def state(self) -> str:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%t"], env={**os.environ, **self.env}, capture_output=True, text=True, timeout=30
        )
        return done.stdout.strip()

    def log(self, name: str) -> str:
        path = self.conf.parent / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.folder / f"{name}.out", "w") as log:
            self.processes[name] = subprocess.Popen(
                argv, stdout=log, stderr=log, env={**os.environ, **self.env}, start_new_session=True
            )

    def _wait(self, ready, timeout: float, message: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [name for name, process in self.processes.items() if process.poll() is not None]
            if dead:
                raise RuntimeError(
                    f"{', '.join(dead)} exited: "
                    + " | ".join(
                        (self.folder / f"{n}.out").read_text()[-500:]
                        for n in dead
                        if (self.folder / f"{n}.out").exists()
                    )
                )
            time.sleep(0.3)
        raise RuntimeError(message)

    def stop(self) -> None:
        import signal

        if "slurmctld" in self.processes:
            subprocess.run(["scancel", "--user=root"], env={**os.environ, **self.env}, capture_output=True, timeout=30)
        for process in reversed(self.processes.values()):
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=20)
            except ProcessLookupError:
                continue
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
