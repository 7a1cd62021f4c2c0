"""Fixtures shared by the plugin's tests: the runtimes, the container engine and images,
a Dask cluster, and the tiers the tests are marked with.

The helpers the tests import (toy solvers, case records, calibrations, pytest runs in a
subprocess, the runtime guards) are in ``pytest_pdebench.testing``, importable by name from
tests and benchmarks alike. A missing runtime skips a test, or fails it where the runtime
is required (``testing.missing``).
"""

from __future__ import annotations

import os
import shutil

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


def _image(track: str) -> str:
    from pytest_pdebench.containers import ContainerError, build, image_for

    try:
        build(track, log=lambda line: None)  # a no-op once the recipe's tag exists
        return image_for(track)[0]
    except ContainerError as exc:
        missing(str(exc), REQUIRE_CONTAINERS)


@pytest.fixture(scope="session")
def dolfinx_image(container_engine):
    """The DOLFINx track's image (built here on first use: a few minutes)."""
    return _image("dolfinx")


@pytest.fixture(scope="session")
def dealii_image(container_engine):
    return _image("dealii")


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
# request.getfixturevalue), its module, and the measured lists SLOW and PER_RECORD.

TIER_BY_FIXTURE = {"container_engine": "docker", "dolfinx_image": "docker", "dealii_image": "docker",
                   "dask_cluster": "cluster", "firedrake_available": "firedrake"}
TIER_BY_ID_PART = {"docker": "docker", "cluster": "cluster", "firedrake": "firedrake"}  # parts of "dolfinx-docker-cluster"
TIER_BY_MODULE = {"test_cluster.py": "cluster"}  # every test there needs Dask (one Slurm), some through local fixtures

# Over ~5 s each (whole FEM runs, deal.II compiles, pytest runs in subprocesses): the
# threshold that keeps `make check` under 3 minutes on 2 cores shared with other jobs.
# Measured with `pytest tests/FILE -m "not (docker or cluster or firedrake)" --durations=0
# -q -p no:cacheprovider`, one file at a time, on the development machine's 2 cores at a load
# average of 3.5-8 from other jobs, 2026-11-26; the seconds are those. An entry is a file, a
# test with all its parametrisations, or one parametrisation.
SLOW = (
    "tests/test_agents.py",  # all but one test drive an agent through a pytest run: 6-29 s
    "tests/test_calibration.py::test_calibration_mode_writes_good_baselines_and_rejects_bad_ones",  # 10 s
    "tests/test_calibration.py::test_only_calibration_runs_get_the_calibration_settings",  # 12 s
    "tests/test_calibration.py::test_timeout_option_kills_a_slow_run_as_f_exec",  # 7 s
    "tests/test_cases.py::test_committed_cases_are_the_generated_starter_suite",  # 28 s of sympy
    "tests/test_dealii.py",  # deal.II compiles: 16-60 s
    "tests/test_variants.py::test_the_command_writes_the_variants_and_says_what_it_left",  # 48 records: 30 s
    "tests/test_gates.py::test_regating_stored_numbers_equals_a_real_run_with_other_alphas",  # 24 s
    "tests/test_guides.py",  # 5-14 s
    "tests/test_interrupt.py",  # 11-16 s
    "tests/test_leaks.py::test_built_records_give_nothing_away[poisson_graded_kappa_star_004]",  # 6 s
    "tests/test_llm.py",  # all but one test run the plugin against a scripted model: 4-23 s
    "tests/test_oracle_integration.py",  # 17 s
    "tests/test_paired.py::test_variants_defeat_a_lookup_solver_and_the_sibling_check_catches_it",  # 71 s
    "tests/test_paired.py::test_a_paired_item_takes_its_thresholds_from_the_oracle_beside_it",  # 21 s
    "tests/test_paired.py::test_a_failed_paired_oracle_leaves_the_item_without_a_verdict",  # 8 s
    "tests/test_output_fuzz.py::test_hand_written_npy_members_are_read_or_fail_execution",  # 9 s
    "tests/test_output_fuzz.py::test_meta_json_is_read_or_fails_execution",  # 10 s
    "tests/test_output_fuzz.py::test_mutated_npz_files_are_read_or_fail_execution",  # 7 s
    "tests/test_redteam.py::test_cpp_probes_get_the_honest_verdict",  # 55 s
    "tests/test_redteam.py::test_exploits_of_the_harness_get_the_honest_verdict",  # 51-57 s
    "tests/test_redteam.py::test_python_probes_get_the_honest_verdict",  # 67-82 s
    "tests/test_references.py::test_reference_is_built_checked_and_stored",  # 5 s
    "tests/test_report_page.py::test_the_report_page_loads_cleanly_and_is_not_blank",  # 5 s
    "tests/test_sandbox.py::test_no_network_not_even_to_the_hosts_loopback",  # 60 s: the listener's accept timeout
    "tests/test_scaffolds.py::test_filled_scaffold_passes",  # 6-9 s
    "tests/test_shards.py::test_three_shards_merge_into_the_items_of_one_run",  # 21 s
    "tests/test_upstream.py::test_imported_records_run_through_the_plugin",  # 25 s
    "tests/test_validate.py::test_trial_run_calibrates_the_oracle",  # 14 s
    "tests/test_validity.py::test_dishonest_solvers_fail_through_the_plugin",  # 9-11 s
    "tests/test_validity.py::test_no_dishonest_rung_passes_any_bundled_case",  # 35 s
)
# Tests parametrised over every case record, the id being the case's: ~0.2 s an item, 4 min
# for the 645 records of cases/ together; the quick tier keeps the smoke suite's 53.
PER_RECORD = (
    "tests/test_cases.py::test_boundary_and_initial_data_match_the_exact_solution",
    "tests/test_cases.py::test_manufactured_solution_satisfies_the_stored_pde",
    "tests/test_cases.py::test_shipped_cases_pass_the_static_checks",
)


def _listed(nodeid: str, entries: tuple[str, ...]) -> bool:
    return any(nodeid == entry or nodeid.startswith((f"{entry}[", f"{entry}::")) for entry in entries)


def pytest_collection_modifyitems(config, items):
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
        if _listed(item.nodeid, SLOW) or (_listed(item.nodeid, PER_RECORD) and callspec.id not in starter_records()):
            tiers.add("slow")
        for tier in sorted(tiers):
            item.add_marker(tier)
