"""Container images of the tracks (``containers/<track>/Containerfile``) and the runtime
a track has inside its image.

- Tags name the track, its runtime version and a hash of the recipe folder, so an edited
  recipe is a new image: ``pdebench-dolfinx:0.11.0-<hash12>``.
- Base images: with no registry in reach (this project's CI), ``debootstrap
  --variant=minbase`` of the Debian release, imported through the SDK as
  ``localhost/pdebench-base:<release>``; ``--base-from-registry`` builds ``FROM debian:<release>``.
- ``--pde-image TRACK=IMAGE`` runs a track in another image (an upstream one, say); the
  image must hold the runtime at the path its ``org.pdebench.python`` label names, or
  the track's default path.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .bundled import bundled

RECIPES = bundled("containers")
PACKAGE = Path(__file__).resolve().parent
BASE_REPOSITORY = "localhost/pdebench-base"  # "localhost/": podman would look for a bare name on docker.io
DEBIAN_MIRROR = os.environ.get("PDEBENCH_DEBIAN_MIRROR", "http://deb.debian.org/debian")


@dataclass(frozen=True)
class Recipe:
    track: str
    release: str  # the Debian release the image is built on
    version: str  # the runtime version the recipe pins
    python: str  # the interpreter that runs the runner inside the image
    package_files: tuple[str, ...] = ()  # files of this package the build copies in (paths in it)

    @property
    def folder(self) -> Path:
        return RECIPES / self.track

    def context_files(self) -> dict[str, Path]:
        """Build context: name -> file (the recipe folder, then the package files, flat)."""
        files = {p.relative_to(self.folder).as_posix(): p for p in sorted(self.folder.rglob("*")) if p.is_file()}
        files.update({Path(name).name: PACKAGE / name for name in self.package_files})
        return files

    def recipe_hash(self) -> str:
        digest = hashlib.sha256()
        for name, path in sorted(self.context_files().items()):
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
        return digest.hexdigest()[:12]

    @property
    def tag(self) -> str:
        return f"pdebench-{self.track}:{self.version}-{self.recipe_hash()}"


RECIPE_LIST = (
    Recipe("dolfinx", "trixie", "0.11.0", "/opt/dolfinx/bin/python"),
    Recipe("dealii", "bookworm", "9.4.1", "/usr/bin/python3", ("libraries/cxx_toolchain.py",)),
    Recipe("firedrake", "trixie", "2026.10.0", "/opt/firedrake/venv/bin/python"),
)
RECIPES_BY_TRACK = {recipe.track: recipe for recipe in RECIPE_LIST}
DEFAULT_BUILDS = ("dolfinx", "dealii")  # `pdebench containers build` without tracks: firedrake builds PETSc (~25 min)


class ContainerError(RuntimeError):
    """An image could not be built or found; the message says what to do."""


def client():
    import docker

    try:
        engine = docker.from_env(timeout=3600)  # image builds take minutes
        engine.ping()
    except Exception as exc:
        from .sandbox.docker_backend import ENGINE_HINT

        raise ContainerError(
            ENGINE_HINT.format(where=os.environ.get("DOCKER_HOST") or "the default socket") + f" ({exc})"
        ) from None
    return engine


def _has_image(engine, name: str) -> bool:
    import docker

    try:
        engine.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def build_base(engine, release: str, log=print) -> str:
    """localhost/pdebench-base:<release>, from debootstrap, unless it is there already."""
    name = f"{BASE_REPOSITORY}:{release}"
    if _has_image(engine, name):
        return name
    if not shutil.which("debootstrap"):
        raise ContainerError(
            "debootstrap is missing: apt-get install debootstrap (it builds the base image "
            "where no registry is reachable), or pass --base-from-registry"
        )
    with tempfile.TemporaryDirectory(prefix="pdebench-rootfs-") as scratch:
        rootfs, archive = Path(scratch) / "rootfs", Path(scratch) / "rootfs.tar"
        log(f"debootstrap --variant=minbase {release} from {DEBIAN_MIRROR} (about a minute)")
        done = subprocess.run(
            ["debootstrap", "--variant=minbase", release, str(rootfs), DEBIAN_MIRROR], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise ContainerError(f"debootstrap {release} failed: {done.stderr.strip()[-800:]}")
        shutil.rmtree(rootfs / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        with tarfile.open(archive, "w") as tar:
            tar.add(rootfs, arcname=".")
        engine.api.import_image(src=str(archive), repository=name)  # podman ignores a separate tag= (imports :latest)
    return name


SITE_CA_FOLDER = "site-ca"  # build context folder the recipes install as extra trusted CAs


def _add_site_certificates(folder: Path) -> None:
    """The host's extra CA certificates (PDEBENCH_CA_CERTIFICATES: a file or folder, else
    /usr/local/share/ca-certificates), for pip behind a TLS-inspecting proxy. Site
    configuration, not recipe: they stay out of the image tag's hash."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "README").write_text("extra CA certificates of the building host (*.crt)\n")
    source = Path(os.environ.get("PDEBENCH_CA_CERTIFICATES", "/usr/local/share/ca-certificates"))
    found = [source] if source.is_file() else sorted(source.rglob("*.crt")) if source.is_dir() else []
    for index, certificate in enumerate(found):
        shutil.copy2(certificate, folder / f"site-{index}-{certificate.stem}.crt")


def build(track: str, base_from_registry: bool = False, log=print) -> str:
    """Build the track's image (a no-op when its tag exists); its tag."""
    recipe = RECIPES_BY_TRACK.get(track)
    if recipe is None:
        raise ContainerError(f"no recipe for {track!r}; tracks: {', '.join(RECIPES_BY_TRACK)}")
    engine = client()
    if _has_image(engine, recipe.tag):
        log(f"{recipe.tag}: already built")
        return recipe.tag
    base = f"debian:{recipe.release}" if base_from_registry else build_base(engine, recipe.release, log)
    log(f"building {recipe.tag} from {base} ({recipe.folder})")
    with tempfile.TemporaryDirectory(prefix=f"pdebench-{track}-context-") as context:
        for name, path in recipe.context_files().items():
            (Path(context) / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, Path(context) / name)
        _add_site_certificates(Path(context) / SITE_CA_FOLDER)
        try:
            _, lines = engine.images.build(
                path=context,
                dockerfile="Containerfile",
                tag=recipe.tag,
                buildargs={"BASE": base},
                rm=True,
                forcerm=True,
                labels={"org.pdebench.recipe": recipe.recipe_hash(), "org.pdebench.version": recipe.version},
            )
            for line in lines:
                if "stream" in line and line["stream"].strip():
                    log(line["stream"].rstrip())
        except Exception as exc:  # BuildError carries the build's output: its end says why
            output = "".join(line.get("stream", "") for line in getattr(exc, "build_log", None) or [])
            raise ContainerError(
                f"building {recipe.tag} failed: {getattr(exc, 'msg', exc)}"
                + (f"\n--- end of the build output ---\n{output[-3000:]}" if output else "")
            ) from None
    return recipe.tag


def images() -> list[dict]:
    """The pdebench images the engine holds: tag, id, size, and whether the recipe is current."""
    engine = client()
    current = {recipe.tag for recipe in RECIPE_LIST}
    found = []
    for image in engine.images.list():
        for tag in image.tags:
            if tag.split("/")[-1].startswith("pdebench-"):
                found.append(
                    {
                        "tag": tag,
                        "id": image.short_id,
                        "size_mb": round(image.attrs.get("Size", 0) / 2**20),
                        "current": tag.split("/")[-1] in current or BASE_REPOSITORY in tag,
                    }
                )
    return sorted(found, key=lambda row: row["tag"])


def images_listing() -> str:
    """``pdebench containers list``: the pdebench images the engine holds (those of older
    recipes marked: ``prune`` removes them) and the tags the current recipes build."""
    from tabulate import tabulate  # a command's table: not at every pytest start (libraries imports us)

    rows = [[r["tag"], r["id"], r["size_mb"], "" if r["current"] else "old recipe"] for r in images()]
    return (
        (tabulate(rows, headers=["image", "id", "MB", ""]) if rows else "no pdebench images")
        + "\n\nrecipes: "
        + ", ".join(recipe.tag for recipe in RECIPES_BY_TRACK.values())
    )


def prune() -> list[str]:
    """Remove the track images built from older recipes; their tags."""
    engine = client()
    removed = []
    for row in images():
        if not row["current"]:
            engine.images.remove(row["tag"])
            removed.append(row["tag"])
    return removed


@functools.cache
def image_for(track: str, override: str | None = None) -> tuple[str, dict]:
    """(image id, labels) of the image a track runs in: the override, or the current recipe's tag."""
    import docker

    name = override or RECIPES_BY_TRACK[track].tag
    try:
        image = client().images.get(name)
    except docker.errors.ImageNotFound:
        hint = "" if override else f": build it with `pdebench containers build {track}`"
        raise ContainerError(f"image {name} for the {track} track is not there{hint}") from None
    return image.id, dict(image.labels or {})


def probe(image: str, argv: list[str], timeout: float = 120) -> str:
    """Run one short command in a throw-away container of the image (no network); its stdout."""
    engine = client()
    # a writable home and cache: importing a runtime may create its caches (Firedrake's does)
    container = engine.containers.create(
        image,
        argv,
        network_mode="none",
        user="65534:65534",
        environment={"HOME": "/tmp", "XDG_CACHE_HOME": "/tmp/cache"},
    )
    try:
        container.start()
        code = container.wait(timeout=timeout)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode(errors="replace")
        if code != 0:
            err = container.logs(stdout=False, stderr=True).decode(errors="replace").strip().splitlines()
            raise ContainerError(f"{' '.join(argv[:2])} in {image[:19]} failed: {(err or ['no output'])[-1]}")
        return out
    finally:
        container.remove(force=True)


def python_in(track: str, labels: dict) -> str:
    return labels.get("org.pdebench.python") or RECIPES_BY_TRACK[track].python


def env_in(labels: dict) -> dict[str, str]:
    """The variables an image's runtime needs (label org.pdebench.env, "KEY=value KEY=value")."""
    pairs = (item.split("=", 1) for item in labels.get("org.pdebench.env", "").split() if "=" in item)
    return {key: value for key, value in pairs}


def probe_program(modules: str, version_expr: str) -> str:
    """Python source printing the interpreter's prefixes and a library version as JSON."""
    return (
        "import json, sys\n"
        f"import {modules}\n"
        f"print(json.dumps({{'prefix': sys.prefix, 'base_prefix': sys.base_prefix, 'version': {version_expr}}}))\n"
    )


def probe_python(image: str, python: str, modules: str, version_expr: str) -> dict:
    """The same probe as on the host (``probe_program``), run inside the image."""
    return json.loads(probe(image, [python, "-c", probe_program(modules, version_expr)]).strip().splitlines()[-1])


PODMAN_CONF = """# written by pytest-pdebench: podman as the Docker API for the container backend
[engine]
runtime = "runc"   # crun fails on cgroup-hybrid hosts ("cgroups in hybrid mode")
[containers]
# the SDK's ulimits= replaces these per container; they are what a plain run gets
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
"""


def start_podman_service(folder: Path, timeout: float = 30.0) -> tuple[subprocess.Popen, str]:
    """podman's Docker API on a socket in ``folder`` (podman and runc from apt); returns the
    service process and the DOCKER_HOST value. Stop it with terminate()."""
    podman = shutil.which("podman")
    if not podman:
        raise ContainerError("podman is not installed: apt-get install podman runc (or use Docker)")
    folder.mkdir(parents=True, exist_ok=True)
    conf, socket = folder / "containers.conf", folder / "podman.sock"
    conf.write_text(PODMAN_CONF)
    socket.unlink(missing_ok=True)
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    log = (folder / "service.log").open("ab")
    service = subprocess.Popen(
        [podman, "system", "service", "--time=0", f"unix://{socket}"],
        env=env,
        cwd=folder,  # conmon leaves files (an empty "oom" after a memory kill) in its working folder
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    host = f"unix://{socket}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.poll() is not None:
            raise ContainerError(f"podman system service exited ({service.returncode}); see {folder / 'service.log'}")
        if socket.exists():
            import docker

            try:
                docker.DockerClient(base_url=host, timeout=5).ping()
                return service, host
            except Exception:
                pass
        time.sleep(0.2)
    service.terminate()
    raise ContainerError(f"podman's API did not answer at {host} within {timeout:.0f} s")


def serve_podman(folder: Path, log=print) -> int:
    """``pdebench containers engine``: serve podman's Docker API from ``folder`` until Ctrl-C
    (then stop it and return 0) or until the service exits (its exit code), for machines
    without Docker: the container backend and `pdebench containers` then talk to it
    through the DOCKER_HOST that ``log`` is told."""
    import signal

    signalled: list[int] = []
    started: list[subprocess.Popen] = []  # the service, once there is one

    def stopped(signum, frame):
        # INT (Ctrl-C), TERM (systemd, a CI runner, kill) and HUP stop the service wherever
        # this process is when they come, its start included: a KeyboardInterrupt raised here
        # instead escaped from a signal that landed outside the wait (seen under load: the
        # command died of it), and the default action left the service running
        signalled.append(signum)
        for service in started:
            service.terminate()

    previous = {number: signal.signal(number, stopped) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        service, host = start_podman_service(folder)
        started.append(service)
        if signalled:  # stopped while it started
            return 0
        log(f"podman's Docker API is up; in another shell:\n    export DOCKER_HOST={host}\n(Ctrl-C stops it)")
        code = service.wait()
        return 0 if signalled else code
    finally:  # the service runs in its own session: a signal to this process alone never reaches it
        for service in started:
            if service.poll() is None:
                service.terminate()
                try:
                    service.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    service.kill()
                    service.wait()
        for number, handler in previous.items():
            signal.signal(number, handler)


def image_digest(image: str) -> str | None:
    """The image's repository digest when it came from a registry (locally built images
    have none: their id, a hash of their content, names them)."""
    try:
        digests = client().images.get(image).attrs.get("RepoDigests") or []
    except Exception:
        return None
    return digests[0] if digests else None
