"""Fixtures shared by the plugin's tests: the runtimes, the container engine and images,
a Dask cluster, and the tiers the tests are marked with.

The helpers the tests import (toy solvers, case records, calibrations, pytest runs in a
subprocess, the runtime guards) are in ``pytest_pdebench.testing``, importable by name from
tests and benchmarks alike. A missing runtime skips a test, or fails it where the runtime
is required (``testing.missing``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from pytest_pdebench.testing import REQUIRE_CONTAINERS, REQUIRE_RUNTIMES, dask_installed, missing, starter_records


@pytest.fixture(scope="session", autouse=True)
def own_kept_baselines(tmp_path_factory):
    """This machine's kept baselines (--pde-baseline=local) are the user's: the tests, and the
    pytest runs they start (which inherit it), keep theirs in a folder of their own. A fixture,
    not an import-time setting: a benchmark run from the checkout imports this file too."""
    before = os.environ.get("PDEBENCH_BASELINES")
    os.environ["PDEBENCH_BASELINES"] = str(tmp_path_factory.mktemp("kept-baselines"))
    yield
    if before is None:
        os.environ.pop("PDEBENCH_BASELINES", None)
    else:
        os.environ["PDEBENCH_BASELINES"] = before


@pytest.fixture(scope="session")
def bwrap_available():
    if shutil.which("bwrap") is None:
        missing("bubblewrap is not installed")


def _runtime(name: str, required: bool):
    from pytest_pdebench.libraries import RuntimeMissing, detect_runtime

    try:
        return detect_runtime(name)
    except RuntimeMissing as exc:
        if required:
            pytest.fail(f"required runtime missing: {exc}", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def dolfinx_available(bwrap_available):
    return _runtime("dolfinx", REQUIRE_RUNTIMES)


@pytest.fixture(scope="session")
def dealii_available(bwrap_available):
    """deal.II 9.4 with its compiler, CMake and gmsh (apt, installed by `make setup`)."""
    return _runtime("dealii", REQUIRE_RUNTIMES)


@pytest.fixture(scope="session")
def firedrake_available(bwrap_available):
    """The provisioned Firedrake runtime (pdebench provision firedrake, ~20 minutes once).
    Required only with PDEBENCH_REQUIRE_FIREDRAKE=1: `make test` does not provision it."""
    return _runtime("firedrake", os.environ.get("PDEBENCH_REQUIRE_FIREDRAKE") == "1")


@pytest.fixture(scope="session")
def container_engine(tmp_path_factory):
    """An engine for the docker backend: the DOCKER_HOST given, else podman's Docker API
    started here for the session (podman and runc from apt, installed by `make setup`)."""
    from pytest_pdebench.containers import ContainerError, start_podman_service

    if os.environ.get("DOCKER_HOST"):
        yield os.environ["DOCKER_HOST"]
        return
    try:
        service, host = start_podman_service(tmp_path_factory.mktemp("podman"))
    except ContainerError as exc:
        missing(str(exc), REQUIRE_CONTAINERS)
    os.environ["DOCKER_HOST"] = host  # the pytest runs started by tests inherit it
    try:
        yield host
    finally:
        os.environ.pop("DOCKER_HOST", None)
        service.terminate()
        service.wait(timeout=60)


def _image(track: str, shared: Path) -> str:
    """The track's image, built once: xdist's workers take turns (a lock in ``shared``, the
    folder their temporary folders share), the second finds the first's tag."""
    import fcntl

    from pytest_pdebench.containers import ContainerError, build, image_for

    with open(shared / f"image-{track}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            build(track, log=lambda line: None)  # a no-op once the recipe's tag exists
            return image_for(track)[0]
        except ContainerError as exc:
            missing(str(exc), REQUIRE_CONTAINERS)


@pytest.fixture(scope="session")
def dolfinx_image(container_engine, tmp_path_factory):
    """The DOLFINx track's image (built here on first use: a few minutes)."""
    return _image("dolfinx", tmp_path_factory.getbasetemp().parent)


@pytest.fixture(scope="session")
def dealii_image(container_engine, tmp_path_factory):
    return _image("dealii", tmp_path_factory.getbasetemp().parent)


@pytest.fixture(scope="session")
def dask_cluster(tmp_path_factory, dolfinx_available):
    """Two workers on loopback for the whole session (tests that kill workers start their own)."""
    dask_installed()
    from pytest_pdebench.testing.loopback import LoopbackCluster

    cluster = LoopbackCluster(tmp_path_factory.mktemp("dask"))
    yield cluster
    cluster.stop()


# ---- Test tiers (issue 38) ----------------------------------------------------------------
# `make check` runs the quick tier, -m "not (docker or cluster or firedrake or slow)";
# `make test` runs everything. The tier markers (registered in pyproject.toml) are given
# here rather than in the test files, from what a test needs: the fixtures it asks for, the
# backend named in its parametrisation id (tests that ask for their runtime through
# request.getfixturevalue), its module, and what it measured (slow).

TIER_BY_FIXTURE = {"container_engine": "docker", "dolfinx_image": "docker", "dealii_image": "docker",
                   "dask_cluster": "cluster", "firedrake_available": "firedrake"}
TIER_BY_ID_PART = {"docker": "docker", "cluster": "cluster", "firedrake": "firedrake"}  # parts of "dolfinx-docker-cluster"
TIER_BY_MODULE = {"test_cluster.py": "cluster"}  # every test there needs Dask (one Slurm), some through local fixtures

# The slow tier, from what each test's call measured in the last `make test` or `make check`
# (tests/durations.json, rewritten by `make durations`): a test over SLOW_SEC; and, of a test
# parametrised over many records whose parametrisations together take over FAMILY_SEC (each
# case record of the suite: ~0.2 s an item), all but the smoke suite's records. A test not
# measured yet is quick until the next `make durations`.
SLOW_SEC = 3.0  # the quick tier under 3 minutes on 2 cores (measured: make check)
FAMILY_SEC = 30.0
DURATIONS = Path(__file__).with_name("durations.json")


def _measured() -> dict[str, float]:
    try:
        return json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}


def _slow_functions(measured: dict[str, float]) -> set[str]:
    """The test functions whose parametrisations together take over FAMILY_SEC."""
    total: dict[str, float] = {}
    for nodeid, seconds in measured.items():
        if "[" in nodeid:
            total[nodeid.split("[", 1)[0]] = total.get(nodeid.split("[", 1)[0], 0.0) + seconds
    return {function for function, seconds in total.items() if seconds > FAMILY_SEC}


def pytest_collection_modifyitems(config, items):
    measured = _measured()
    slow_functions = _slow_functions(measured)
    for item in items:
        if not isinstance(item, pytest.Function):  # the benchmark's own items, in runs the tests start
            continue
        tiers = {TIER_BY_FIXTURE[name] for name in item.fixturenames if name in TIER_BY_FIXTURE}
        if any(name.startswith("slurm") for name in item.fixturenames):
            tiers.add("cluster")
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            tiers |= {TIER_BY_ID_PART[part] for part in callspec.id.split("-") if part in TIER_BY_ID_PART}
        if item.path.name in TIER_BY_MODULE:
            tiers.add(TIER_BY_MODULE[item.path.name])
        if measured.get(item.nodeid, 0.0) > SLOW_SEC or (
            callspec is not None and item.nodeid.split("[", 1)[0] in slow_functions
            and callspec.id not in starter_records()
        ):
            tiers.add("slow")
        for tier in sorted(tiers):
            item.add_marker(tier)


# ---- What each test cost the machine ------------------------------------------------------
# CPU seconds of the test's process and of the children it waited for (pytest runs, compilers,
# solvers; not containers, which the engine's service runs), beside its wall time in the JSON
# report (user_properties "cpu_sec"): what `-n` can overlap is wall time that is not CPU.


def _cpu_seconds() -> float:
    import resource

    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def pytest_runtest_logstart(nodeid, location):
    _CPU_AT_START[nodeid] = _cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown" and item.nodeid in _CPU_AT_START:  # the JSON report reads teardown's
        outcome.get_result().user_properties.append(("cpu_sec", round(_cpu_seconds() - _CPU_AT_START.pop(item.nodeid), 2)))


_CPU_AT_START: dict[str, float] = {}
