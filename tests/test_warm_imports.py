"""What a track's warm-runner zygote imports (``zygote_preload``) against what a cold run
imports before its clock starts (``preload``): never more (a module the zygote imported
and a cold run would not would be free inside the timed window of a submission that
imports it), never MPI started, never a file written (the zygote runs outside the
sandbox, with the run's environment)."""

from __future__ import annotations

import fnmatch
import json
import subprocess

import pytest

from pytest_pdebench.libraries import get_track
from pytest_pdebench.sandbox.base import HARNESS_DIR

PROGRAM = """
import importlib, json, sys
deferred, harness = None, set()
if sys.argv[1] == "zygote":  # as the zygote imports: MPI left alone, cache files deferred
    import mpi4py
    mpi4py.rc.initialize = False
    sys.path.insert(0, sys.argv[3])
    before = set(sys.modules)
    import zygote
    deferred = zygote._CacheFilesDeferred(sys.argv[2])
    harness = set(sys.modules) - before  # the zygote's own (runner, resource, ...), not the track's
for module in filter(None, sys.argv[2].split(",")):
    importlib.import_module(module)
if deferred is not None:
    deferred.done()
    zygote._map_libraries(list(filter(None, sys.argv[4].split(","))))
    code = sorted(zygote._ReadCode(list(filter(None, sys.argv[5].split(",")))).codes)
from mpi4py import MPI
mapped = sorted({line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith(".so")})
python = sorted(name for name, module in list(sys.modules.items())
                if str(getattr(module, "__file__", "")).endswith(".py"))
print(json.dumps({"modules": sorted(set(sys.modules) - harness), "mpi": MPI.Is_initialized(), "mapped": mapped,
                  "python": python, "code": code if deferred is not None else []}))
"""


def imported(runtime, modules: str, mode: str, home, libraries: tuple = (), code: tuple = ()) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"), **runtime.env}
    env = {key: value.replace("{cache}", str(home / "cache")) for key, value in env.items()}
    done = subprocess.run([runtime.python, "-I", "-c", PROGRAM, mode, modules, str(HARNESS_DIR), ",".join(libraries),
                           ",".join(code)],
                          env=env, cwd=home, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("library", ["dolfinx", "firedrake"])
def test_the_zygote_imports_a_subset_of_a_cold_run_and_leaves_no_trace(library, request, tmp_path):
    runtime = request.getfixturevalue(f"{library}_available")
    track = get_track(library)
    home = tmp_path / "home"
    home.mkdir()
    zygote = imported(runtime, track.zygote_preload, "zygote", home, track.zygote_libraries, track.zygote_code)
    assert not zygote["mpi"], "the zygote's imports started MPI"
    assert list(home.iterdir()) == [], f"the zygote's imports wrote {sorted(map(str, home.rglob('*')))[:5]}"
    cold = imported(runtime, track.preload, "cold", home)
    assert set(zygote["modules"]) <= set(cold["modules"]), sorted(set(zygote["modules"]) - set(cold["modules"]))[:10]
    # the libraries it only maps: each pattern finds its shared object (a renamed one would
    # silently cost every run its loading again), which a cold run's imports load as well
    for pattern in track.zygote_libraries:
        package, _, name = pattern.partition("/")
        found = [path for path in zygote["mapped"] if f"/{package}/" in path and fnmatch.fnmatch(path, f"*/{pattern}")]
        assert found, f"{pattern} mapped nothing"
        assert set(found) <= set(cold["mapped"]), found
    # the packages whose bytecode it reads (none of it run): every module of theirs that a cold
    # run imports from a .py file is among those read, under the name an import gives it
    for package in track.zygote_code:
        wanted = {name for name in cold["python"] if name == package or name.startswith(package + ".")}
        assert wanted and wanted <= set(zygote["code"]), sorted(wanted - set(zygote["code"]))[:10]
        assert package not in zygote["modules"]


# ---- Runs of a submission that never names the track (issue 50) -----------------------------

# the solvers below name no module of either track (the word search must not see one)
STATE = """
import json, sys, time
TRACKS, MPI_NAME = ("dolf" + "inx", "fire" + "drake"), "mpi4" + "py.MPI"
def state():
    mpi = sys.modules.get(MPI_NAME)
    return {"track": sorted(m for m in TRACKS if m in sys.modules),
            "mpi": mpi.Is_initialized() if mpi is not None else None}
"""
PLAIN = STATE + """
def solve(case_spec):
    json.dump(state(), open("state.json", "w"))
"""
# imports the track under a name the word search cannot see: MPI must start first, inside the window
BUILT_NAME = STATE + """
import importlib
def solve(case_spec):
    before = state()
    first = case_spec["library"] == TRACKS[0]
    started = time.perf_counter()
    modules = [importlib.import_module(name) for name in ([TRACKS[0], TRACKS[0] + ".mesh"] if first else [TRACKS[1]])]
    seconds = time.perf_counter() - started
    comm = sys.modules[MPI_NAME].COMM_WORLD
    if first:
        cells = modules[1].create_unit_square(comm, 4, 4).topology.index_map(2).size_local
    else:
        cells = modules[0].UnitSquareMesh(4, 4).num_cells()
    json.dump({"before": before, "after": state(), "import_sec": seconds, "cells": cells}, open("state.json", "w"))
"""


def run_track(library: str, runtime, tmp_path, body: str, imports_track: bool, runner: str):
    from pytest_pdebench.sandbox import Limits, get_backend

    track = get_track(library)
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir(parents=True)
    cache.mkdir()
    (work / "case_spec.json").write_text(json.dumps({"case_spec": {"library": library}}))
    (work / "solver.py").write_text(body)
    request = track.run_request(runtime, "solver.py", work, cache, Limits(timeout_sec=300), imports_track)
    if runner == "warm":
        request.warm = track.warm_spec("solver.py", imports_track)
    result = get_backend("bubblewrap").run(request)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, json.loads((work / "state.json").read_text())


@pytest.mark.parametrize("runner", ["warm", "cold"])
@pytest.mark.parametrize("library", ["dolfinx", "firedrake"])
def test_only_a_submission_that_names_the_track_gets_it_before_the_clock(library, runner, request, tmp_path):
    runtime = request.getfixturevalue(f"{library}_available")
    track = get_track(library)
    assert not track.imports_track({"solver.py": PLAIN.encode()})
    _, light = run_track(library, runtime, tmp_path / "light", PLAIN, False, runner)
    assert light["track"] == []
    if runner == "warm":  # a cold run starts MPI with mpi4py's import (0.03 s): the zygote's modules, as it is
        assert light["mpi"] is False
    _, full = run_track(library, runtime, tmp_path / "full", PLAIN, True, runner)
    assert full == {"track": [library], "mpi": True}


READ_CODE = """
import json, sys
import firedrake, firedrake.mesh
def solve(case_spec):
    module = sys.modules["firedrake.mesh"]
    json.dump({"loader": type(module.__loader__).__name__, "file": module.__file__,
               "cells": firedrake.UnitSquareMesh(2, 2).num_cells()}, open("state.json", "w"))
"""


@pytest.mark.parametrize("runner", ["warm", "cold"])
def test_a_warm_firedrake_run_imports_the_code_its_zygote_read(runner, request, tmp_path):
    runtime = request.getfixturevalue("firedrake_available")
    _, state = run_track("firedrake", runtime, tmp_path, READ_CODE, True, runner)
    assert state["loader"] == ("Loader" if runner == "warm" else "SourceFileLoader"), state
    assert state["file"].endswith("/firedrake/mesh.py") and state["cells"] == 8


@pytest.mark.parametrize("library", ["dolfinx", "firedrake"])
def test_a_track_imported_under_a_built_name_starts_mpi_first_and_is_timed(library, request, tmp_path):
    runtime = request.getfixturevalue(f"{library}_available")
    assert not get_track(library).imports_track({"solver.py": BUILT_NAME.encode()})
    result, state = run_track(library, runtime, tmp_path, BUILT_NAME, False, "warm")
    assert state["before"] == {"track": [], "mpi": False}
    assert state["after"] == {"track": [library], "mpi": True}
    assert state["cells"] > 0
    # the import was the run's own work: inside its window, and real work (not preloaded)
    assert 0.02 < state["import_sec"] <= result.solve_sec


def test_the_word_search_finds_the_track_wherever_the_submission_names_it():
    from pytest_pdebench.sources.folder import ORACLE

    dolfinx = get_track("dolfinx")
    assert dolfinx.imports_track({"solver.py": b"import numpy as np\n", "helper.py": b"from dolfinx import fem\n"})
    assert dolfinx.imports_track({"solver.py": b"import ufl.algorithms\n"})
    assert not dolfinx.imports_track({"solver.py": b"import numpy\nname = 'dolfinxy'\n"})
    assert not get_track("firedrake").imports_track({"solver.py": b"import dolfinx\n"})
    for library in ("dolfinx", "firedrake"):
        oracle = {path.name: path.read_bytes() for path in (ORACLE / library).rglob("*.py")}
        assert oracle and get_track(library).imports_track(oracle), library
    assert get_track("dealii").imports_track({"solver.cc": b"int main() {}"})
