"""The sandboxes (bubblewrap with a fresh interpreter per run, bubblewrap with the warm
runner, and the docker backend through a real engine), exercised with real processes,
files and sockets: all must hold the same contract.

Solvers here are tiny Python files run by the sandbox runner with no library
preloaded, so each run takes a fraction of a second (about a second in a container).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest

from pytest_pdebench.sandbox import WarmSpec, get_backend
from pytest_pdebench.testing.conformance import CHECKS, Harness, check_backend, run_solver

BUBBLEWRAP = functools.partial(get_backend, "bubblewrap")


@pytest.fixture(params=["bubblewrap", "warm", "docker"])
def sandbox(request) -> Harness:
    if request.param in ("bubblewrap", "warm"):
        request.getfixturevalue("bwrap_available")
        return Harness(BUBBLEWRAP, warm=request.param == "warm", marker_jitter=0.005)
    from pytest_pdebench.containers import RECIPES_BY_TRACK

    image = request.getfixturevalue("dolfinx_image")  # any image with a Python will do
    return Harness(functools.partial(get_backend, "docker"), RECIPES_BY_TRACK["dolfinx"].python, [], image=image,
                   own_root=True)  # fmt: skip


# the contract every backend holds (testing/conformance.py: a plugin's backend runs the same)
@pytest.mark.parametrize("check", CHECKS, ids=[check.__name__ for check in CHECKS])
def test_the_backend_holds_the_sandbox_contract(sandbox, tmp_path, check):
    check(sandbox, tmp_path)


def test_the_conformance_suite_names_what_a_backend_fails(bwrap_available, tmp_path):
    """check_backend as a plugin's author calls it: on a backend that runs solvers with no
    isolation at all, it names the checks that fail (and passes the honest ones)."""
    from pytest_pdebench.sandbox import UnsandboxedBackend

    outcomes = check_backend(Harness(UnsandboxedBackend), tmp_path)
    failed = {name for name, failure in outcomes.items() if failure}
    assert {"no_network_not_even_to_the_hosts_loopback", "files_next_to_the_working_directory_are_invisible",
            "runs_as_an_unprivileged_user"} <= failed, outcomes  # fmt: skip
    assert outcomes["a_clean_run_reports_its_solve_time"] is None and outcomes["output_is_capped"] is None, outcomes






















def test_installed_copies_of_the_package_are_hidden(bwrap_available, tmp_path):
    """A wheel carries the suite (cases, references, calibrations, the oracle) inside the
    package: wherever the runtime's mounts hold an installed copy, a run sees an empty
    folder there; a file mounted inside it on purpose (an agent's forwarder) stays."""
    prefix = tmp_path / "prefix"
    package = prefix / "lib" / "python3.12" / "site-packages" / "pytest_pdebench"
    (package / "_bundled" / "cases").mkdir(parents=True)
    (package / "_bundled" / "cases" / "suite.jsonl").write_text("the answers")
    (package / "forwarder.py").write_text("# mounted on purpose")
    (prefix / "lib" / "python3.12" / "site-packages" / "numpy_like").mkdir()
    sandbox = Harness(BUBBLEWRAP, read_only=[Path(sys.prefix), Path(sys.base_prefix), prefix, package / "forwarder.py"])
    result, workdir = run_solver(sandbox, tmp_path, f"""
        import os
        def solve(case_spec):
            seen = {{}}
            for root, folders, files in os.walk({str(prefix)!r}):
                seen[root] = sorted(folders + files)
            open("seen.json", "w").write(__import__("json").dumps(seen))
            try:
                open({str(package / "forwarder.py")!r}, "a").write("changed")
            except OSError as exc:
                open("write.txt", "w").write(type(exc).__name__)
    """)
    assert result.returncode == 0, result.stderr
    seen = json.loads((workdir / "seen.json").read_text())
    assert seen[str(package)] == ["forwarder.py"], seen
    assert "numpy_like" in seen[str(package.parent)]
    assert (workdir / "write.txt").read_text() == "OSError"










def test_missing_bubblewrap_says_how_to_install(monkeypatch):
    from pytest_pdebench.sandbox import BubblewrapBackend

    monkeypatch.setenv("PATH", "/nonexistent")
    message = BubblewrapBackend().available()
    assert message and "apt-get install bubblewrap" in message












def test_a_zygote_whose_imports_initialise_mpi_is_refused(bwrap_available):
    """With MPI deferred, every run initialises its own MPI: a zygote whose imports did it
    already (petsc4py.PETSc starts MPI) would hand one MPI process's state to all its forks."""
    from pytest_pdebench.sandbox import SandboxError
    from pytest_pdebench.sandbox.warm import Zygote

    spec = WarmSpec("solver.py", "", zygote_preload="mpi4py.MPI,petsc4py.PETSc", defer_mpi=True)
    with pytest.raises(SandboxError, match="initialised MPI in the zygote"):
        Zygote(sys.executable, spec, {"PATH": "/usr/bin", "HOME": "/nonexistent"})


def test_answers_built_at_run_time_are_hidden(bwrap_available, tmp_path, monkeypatch):
    """Live variants' solve-only parts live in the answers cache (bundled.answers_cache, visibility.py):
    should a run's mounts hold it, the run sees an empty folder, made before any answer is."""
    cache = tmp_path / "prefix" / "cache"
    monkeypatch.setenv("PDEBENCH_CACHE", str(cache))
    (cache / "toolchain").mkdir(parents=True)
    sandbox = Harness(BUBBLEWRAP, read_only=[Path(sys.prefix), Path(sys.base_prefix), tmp_path / "prefix"])
    (cache / "answers" / "variant-parts").mkdir(parents=True)  # after the mounts were listed: still hidden
    (cache / "answers" / "variant-parts" / "delta.npz").write_text("the answer")
    result, workdir = run_solver(sandbox, tmp_path, f"""
        import os
        def solve(case_spec):
            open("seen.json", "w").write(__import__("json").dumps(sorted(os.listdir({str(cache)!r})) + sorted(os.listdir({str(cache / "answers")!r}))))
    """)
    assert result.returncode == 0, result.stderr
    assert json.loads((workdir / "seen.json").read_text()) == ["answers", "toolchain"]


def test_a_dealii_run_sees_the_precompiled_header_and_not_the_binary_cache(dealii_available, tmp_path):
    """The deal.II runtime used to be the whole toolchain folder, its binary cache included:
    a run could list, and run, every program compiled before it, the oracle's among them."""
    from pytest_pdebench.libraries.dealii import DealiiTrack
    from pytest_pdebench.sandbox import Limits, get_backend

    [header_folder] = map(Path, dealii_available.read_only)  # <toolchain>/pch
    binaries = header_folder.parent / "bin"  # Toolchain.binary_folder
    binaries.mkdir(parents=True, exist_ok=True)
    probe = binaries / "pdebench-probe-program"
    probe.write_text("#!/bin/sh\necho ran\n")
    try:
        work, cache = tmp_path / "work", tmp_path / "cache"
        work.mkdir(), cache.mkdir()
        request = DealiiTrack().run_request(dealii_available, "solver.cpp", work, cache, Limits(timeout_sec=30))
        request.argv = ["/bin/sh", "-c", f"ls {header_folder} >/dev/null && echo header-seen; "
                        f"ls {binaries}; echo listed=$?"]  # fmt: skip
        result = get_backend("bubblewrap").run(request)
    finally:
        probe.unlink()
    assert "header-seen" in result.stdout and "listed=2" in result.stdout, result.stdout + result.stderr
    assert "pdebench-probe-program" not in result.stdout
