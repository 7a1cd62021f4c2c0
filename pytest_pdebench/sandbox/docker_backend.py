"""The container backend (``--pde-sandbox=docker``): each run is a fresh container of the
track's image, through the ``docker`` SDK (Docker, or podman's Docker API; the engine is
``DOCKER_HOST``'s).

The contract is bubblewrap's: a fresh process tree per run, no network, a non-root user
with no capabilities, limits, the same paths inside (``/sandbox/work``, ``/sandbox/cache``,
``/sandbox/kernels``, ``/sandbox/harness``) and the same timed window. What differs:

- Files go in and out as tar archives (``put_archive``/``get_archive``); nothing of the
  host is mounted. Only regular files and folders come back (``_extract``).
- The timed window: the runner cannot inherit a pipe, so it writes a per-run token and
  its CLOCK_MONOTONIC reading to stderr at the moment bubblewrap's runner writes its
  marker byte. The clock starts at that reading when it lies between the container's
  start and the token's arrival (same host, same clock), else at the arrival (an engine
  on another host); it stops when the attached stream ends (the container's process tree
  has exited). The stream delivers the token a few milliseconds late, so the arrival
  alone would shorten the window.
- A timeout kills the container, so every process in it. The engine's ``wait()`` is not
  used: podman 4.3 spins a core inside it (see ``_run``); the run is over when the
  attached stream ends and inspection says the container has stopped.
- No ``auto_remove`` (podman then loses the exit code): every container is removed here,
  and ``sweep()`` removes the leftovers of runs that died, found by label.
"""

from __future__ import annotations

import io
import os
import re
import secrets
import stat
import tarfile
import threading
import time
from pathlib import Path
from typing import IO, cast

from ..run_files import HeldFolder
from ..run_folders import FROZEN_TIME
from .base import RUNNER, Backend
from .processes import CappedLog, live_run
from .runs import RunRequest, RunResult, SandboxError

LABEL = "org.pdebench.run"  # on every container this backend creates: its owner's pid
CASE_LABEL = "org.pdebench.item"
SANDBOX_UID = 65534  # nobody, as in the bubblewrap backend
ENGINE_HINT = (
    "no container engine answers at {where}: start Docker, or podman's Docker API "
    "(`podman system service --time=0 unix:///run/podman/podman.sock` and "
    "DOCKER_HOST=unix:///run/podman/podman.sock); `pdebench containers build` makes the images"
)


class _Attached(threading.Thread):
    """Reads the container's multiplexed output: stdout and stderr capped, the marker
    line (token and the runner's clock reading) taken out, its arrival and the stream's
    end stamped."""

    def __init__(self, frames, token: bytes):
        super().__init__(daemon=True)
        self.frames, self.token = frames, token
        self.streams = {1: CappedLog(), 2: CappedLog()}
        self.marker_time: float | None = None  # the marker line's arrival
        self.marker_stamp: float | None = None  # the runner's reading in it
        self.end_time: float | None = None
        self._window = b""  # stderr bytes not yet searched for the marker line

    def run(self):
        try:
            for stdout, stderr in self.frames:
                now = time.monotonic()
                if stdout:
                    self.streams[1].add(stdout)
                if stderr:
                    self.streams[2].add(self._strip_marker(stderr, now))
        except Exception:  # the engine closed the stream (container killed or removed)
            pass
        self.end_time = time.monotonic()
        self.streams[2].add(self._window)  # the tail held back while looking for a split line
        self._window = b""

    def _strip_marker(self, chunk: bytes, now: float) -> bytes:
        if self.marker_time is not None:
            return chunk
        self._window += chunk
        at = self._window.find(self.token)
        if at < 0:
            keep = len(self.token) - 1  # a token split across frames
            flushed, self._window = self._window[:-keep], self._window[-keep:]
            return flushed
        line_end = self._window.find(b"\n", at)
        if line_end < 0:  # the reading is still to come
            flushed, self._window = self._window[:at], self._window[at:]
            return flushed
        self.marker_time = now
        try:
            self.marker_stamp = float(self._window[at + len(self.token) : line_end])
        except ValueError:
            pass
        before, after = self._window[:at], self._window[line_end + 1 :]
        self._window = b""
        return before + after

    def start_of_window(self, container_start: float) -> float | None:
        """The runner's reading when it is plausible on this host's clock, else the arrival."""
        if self.marker_time is None:
            return None
        if self.marker_stamp is not None and container_start <= self.marker_stamp <= self.marker_time:
            return self.marker_stamp
        return self.marker_time


def _tar_folder(archive: tarfile.TarFile, source: Path | None, name: str, uid: int, writable: bool) -> None:
    """Add ``source``'s tree under ``name`` (an empty folder when None), owned by uid;
    read-only folders are root's and mode 0555/0444."""

    def info(arcname: str, kind: bytes, size: int = 0, mode: int = 0o755) -> tarfile.TarInfo:
        entry = tarfile.TarInfo(arcname)
        entry.type, entry.size, entry.mtime = kind, size, FROZEN_TIME  # the same in every run
        entry.uid = entry.gid = uid if writable else 0
        entry.mode = mode if writable else mode & 0o555
        return entry

    archive.addfile(info(name, tarfile.DIRTYPE, mode=0o755))
    if source is None:
        return
    with HeldFolder(source) as held:  # an agent's workspace between commands: by descriptor only
        for relative, folder, entry_name, found in held.walk():
            arcname = f"{name}/{relative}"
            if stat.S_ISLNK(found.st_mode):  # a kernel store's link: sent as the link it is
                entry = info(arcname, tarfile.SYMTYPE, mode=0o777)
                entry.linkname = folder.read_link(entry_name)
                archive.addfile(entry)
            elif stat.S_ISDIR(found.st_mode):
                archive.addfile(info(arcname, tarfile.DIRTYPE, mode=0o755))
            elif stat.S_ISREG(found.st_mode):
                content = folder.read(entry_name, found.st_size) or b""
                mode = 0o755 if found.st_mode & 0o111 else 0o644
                archive.addfile(info(arcname, tarfile.REGTYPE, len(content), mode), io.BytesIO(content))


class _EmptyArchive(Exception):
    """The engine sent nothing for a folder that exists (podman, while it cleans up a
    container that has just exited)."""


def _extract(chunks, destination: Path, prefix: str, cap_bytes: int) -> None:
    """Unpack a get_archive stream of folder ``prefix`` into ``destination``: regular files
    and folders only (no links, devices or fifos), no name outside, at most cap_bytes."""
    buffer = io.BytesIO()
    for chunk in chunks:
        buffer.write(chunk)
        if buffer.tell() > cap_bytes + (1 << 20):
            raise SandboxError(f"the run wrote more than {cap_bytes >> 20} MB under {prefix}")
    if buffer.tell() == 0:
        raise _EmptyArchive(prefix)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as archive, HeldFolder(destination) as held:
        for member in archive.getmembers():
            parts = Path(member.name).parts
            if not parts or parts[0] != prefix or ".." in parts or Path(member.name).is_absolute():
                continue
            if member.isdir():
                held.descend(parts[1:], create=True).close()
            elif member.isfile():
                # folders made, or found as real folders (a link on the way, such as a kernel
                # store's, is replaced by a folder); the file written anew, never through a link
                member_file = cast(IO[bytes], archive.extractfile(member))  # a regular file's: never None
                mode = 0o755 if member.mode & 0o100 else 0o644  # a compiled program stays runnable
                with member_file as source, held.descend(parts[1:-1], create=True) as folder:
                    folder.write(parts[-1], source.read(), mode)


class DockerBackend(Backend):
    name = "docker"
    work, cache, kernels, harness = "/sandbox/work", "/sandbox/cache", "/sandbox/kernels", "/sandbox/harness"

    def __init__(self, client=None):
        self._client = client

    @property
    def client(self):
        if self._client is None:
            import docker

            self._client = docker.from_env(timeout=120)
        return self._client

    def available(self) -> str | None:
        try:
            import docker  # noqa: F401
        except ImportError:
            return "the docker Python package is missing: pip install docker"
        try:
            self.client.ping()
        except Exception:
            return ENGINE_HINT.format(where=os.environ.get("DOCKER_HOST") or "the default socket")
        return None

    def run(self, request: RunRequest) -> RunResult:
        if not request.image:
            raise SandboxError("the docker backend needs the track's image (see `pdebench containers list`)")
        token = f"PDEBENCH-START-{secrets.token_hex(8)}"
        paths = self.paths(request)
        argv = [arg.format(**paths) for arg in request.argv]
        env = {key: value.format(**paths) for key, value in request.env.items()}
        env["PDEBENCH_MARKER_TOKEN"] = token
        # `env -i`: the solver sees exactly the request's environment, never the image's ENV lines
        argv = ["/usr/bin/env", "-i", *(f"{key}={value}" for key, value in env.items()), *argv]
        container = self._create(request, argv, env)
        try:
            with live_run(lambda: self._kill(container)):
                return self._run(container, request, token.encode())
        finally:  # also on KeyboardInterrupt: no container outlives its run
            self._remove(container)

    def _create(self, request: RunRequest, argv: list[str], env: dict[str, str]):
        import docker

        limits = request.limits
        memory = f"{limits.memory_mb}m"
        size = limits.file_size_mb * 1024 * 1024
        try:
            container = self.client.containers.create(
                request.image,
                argv,
                environment=env,
                working_dir=self.work,
                user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                network_mode="none",  # podman ignores network_disabled
                mem_limit=memory,
                memswap_limit=memory,
                nano_cpus=int(limits.cpu_count * 1e9),
                pids_limit=4096,
                ulimits=[
                    docker.types.Ulimit(name="nofile", soft=20000, hard=20000),  # replaces the defaults
                    docker.types.Ulimit(name="nproc", soft=4096, hard=4096),
                    docker.types.Ulimit(name="cpu", soft=limits.cpu_seconds, hard=limits.cpu_seconds + 5),
                    docker.types.Ulimit(name="fsize", soft=size, hard=size),
                    docker.types.Ulimit(name="core", soft=0, hard=0),
                ],
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                init=True,
                hostname="sandbox",  # not the container's id: the same in every run
                cpuset_cpus=_worker_cores(),
                labels={LABEL: str(os.getpid()), CASE_LABEL: request.item},  # seen by the engine only
                stdin_open=False,
                tty=False,
            )
        except docker.errors.ImageNotFound:
            raise SandboxError(f"image {request.image} is not there: `pdebench containers build`") from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"the engine refused the container: {exc.explanation or exc}") from None
        try:
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as archive:
                _tar_folder(archive, request.workdir, "work", SANDBOX_UID, writable=True)
                _tar_folder(archive, request.cache_dir, "cache", SANDBOX_UID, writable=True)
                _tar_folder(archive, request.kernels, "kernels", 0, writable=False)
                _tar_folder(archive, None, "harness", 0, writable=False)
                runner = tarfile.TarInfo("harness/runner.py")
                runner.size, runner.mode, runner.mtime = RUNNER.stat().st_size, 0o444, FROZEN_TIME
                with RUNNER.open("rb") as handle:
                    archive.addfile(runner, handle)
            if not _put_archive(container, "/sandbox", buffer.getvalue()):
                raise SandboxError("could not copy the run's files into the container")
        except BaseException:
            self._remove(container)
            raise
        return container

    def _run(self, container, request: RunRequest, token: bytes) -> RunResult:
        frames = self.client.api.attach(container.id, stdout=True, stderr=True, stream=True, logs=True, demux=True)
        attached = _Attached(frames, token)
        attached.start()
        start = time.monotonic()
        container.start()
        deadline = start + request.limits.timeout_sec
        # never the engine's wait(): podman 4.3's /containers/{id}/wait keeps a core busy until
        # the container exits (podman#18150; measured: 9.8 s of CPU over an 8 s run), time taken
        # from the solver it times. The stream ends when the process tree's output closes; the
        # exit code is then read by inspecting, a few polls at most.
        attached.join(timeout=max(0.0, deadline - time.monotonic()))
        code = self._exit_code(container, deadline)
        timed_out = code is None
        if timed_out:
            self._kill(container)
        wait_end = time.monotonic()
        attached.join(timeout=30)
        end = attached.end_time if attached.end_time is not None and not timed_out else wait_end
        if not timed_out:
            self._copy_out(container, request)
        marker = attached.start_of_window(start)
        solve = end - marker if marker is not None else None
        return RunResult(code, timed_out, end - start, solve, attached.streams[1].text(), attached.streams[2].text())

    def _exit_code(self, container, deadline: float) -> int | None:
        """The container's exit code once it has stopped, or None if it still runs at the
        deadline (a process that closed its output keeps it running)."""
        pause = 0.005
        while True:
            state = self.client.api.inspect_container(container.id)["State"]
            if not state.get("Running") and state.get("Status") not in ("created", "configured"):
                return int(state.get("ExitCode", -1))
            if time.monotonic() >= deadline:
                return None
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(2 * pause, 0.2)

    def _copy_out(self, container, request: RunRequest) -> None:
        cap = request.limits.file_size_mb * 1024 * 1024
        for inside, outside, name in ((self.work, request.workdir, "work"), (self.cache, request.cache_dir, "cache")):
            for pause in (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, None):
                try:
                    chunks, _ = container.get_archive(inside)
                    _extract(chunks, outside, name, cap)
                    break
                except _EmptyArchive:
                    if pause is None:
                        raise SandboxError(f"the engine returned no files from {inside}") from None
                    time.sleep(pause)

    def _kill(self, container) -> None:
        try:
            container.kill()  # pid 1 (the init) and with it the container's whole pid namespace
        except Exception:
            pass

    def _remove(self, container) -> None:
        try:
            container.remove(force=True)
        except Exception:
            pass

    def sweep(self) -> int:
        """Remove the containers of earlier runs whose process is gone; how many."""
        removed = 0
        for summary in labelled_containers(self.client):
            owner = (summary.get("Labels") or {}).get(LABEL, "")
            if owner.isdigit() and int(owner) != os.getpid() and _alive(int(owner)):
                continue  # a concurrent run (an xdist worker) still owns it
            try:
                self.client.api.remove_container(summary["Id"], force=True)
            except Exception:
                pass  # removed by its own run meanwhile
            removed += 1
        return removed


# podman 4.3 lists a container whose removal was cut short (its caller killed, say) as
# "Removing" with its storage gone, and then fails every listing and inspection naming it
_HALF_REMOVED = re.compile(r'getting container from store "([0-9a-f]{12,64})": container not known')


def labelled_containers(client, rounds: int = 10) -> list[dict]:
    """Summaries (Id, Labels, State) of every container this backend created, in one
    request: the SDK's ``containers.list`` inspects each one afterwards, and podman answers
    500 for a container its run removed in between. A half-removed container that breaks
    the listing is removed (what its remover had asked for) and the listing asked again."""
    import docker

    for attempt in range(1, rounds):
        try:
            return client.api.containers(all=True, filters={"label": LABEL})
        except docker.errors.APIError as exc:
            broken = _HALF_REMOVED.search(str(exc.explanation or exc))
            if broken is None:
                raise
            try:
                client.api.remove_container(broken.group(1), force=True)
            except docker.errors.APIError:
                time.sleep(0.1 * attempt)  # a removal still under way elsewhere: let it end
    return client.api.containers(all=True, filters={"label": LABEL})  # the last try: its error stands


def _worker_cores() -> str | None:
    """The cores this process may use, when that is fewer than the machine's (an xdist or
    cluster worker pinned to one): the container gets them and no others."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    return ",".join(map(str, cores)) if len(cores) < (os.cpu_count() or 1) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _put_archive(container, path: str, data: bytes, attempts: int = 3) -> bool:
    """``put_archive``, again after a transient engine failure: podman extracts the archive
    in a helper process and now and then loses it ("passing bulk input to subprocess: write
    |1: broken pipe", once in a full test run here); the container is fresh and not started,
    so copying again is safe."""
    import docker

    for attempt in range(1, attempts + 1):
        try:
            return container.put_archive(path, data)
        except docker.errors.APIError as exc:
            if "broken pipe" not in str(exc.explanation or exc) or attempt == attempts:
                raise
            time.sleep(0.2 * attempt)
    return False
