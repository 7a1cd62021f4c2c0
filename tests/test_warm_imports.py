"""What a track's warm-runner zygote imports (``zygote_preload``) against what a cold run
imports before its clock starts (``preload``): never more (a module the zygote imported
and a cold run would not would be free inside the timed window of a submission that
imports it), never MPI started, never a file written (the zygote runs outside the
sandbox, with the run's environment)."""

from __future__ import annotations

import json
import subprocess

import pytest

from pytest_pdebench.libraries import get_track

PROGRAM = """
import importlib, json, sys
if sys.argv[1] == "zygote":
    import mpi4py
    mpi4py.rc.initialize = False
for module in filter(None, sys.argv[2].split(",")):
    importlib.import_module(module)
from mpi4py import MPI
print(json.dumps({"modules": sorted(sys.modules), "mpi": MPI.Is_initialized()}))
"""


def imported(runtime, modules: str, mode: str, home) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"), **runtime.env}
    env = {key: value.replace("{cache}", str(home / "cache")) for key, value in env.items()}
    done = subprocess.run([runtime.python, "-I", "-c", PROGRAM, mode, modules], env=env, cwd=home,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("library", ["dolfinx", "firedrake"])
def test_the_zygote_imports_a_subset_of_a_cold_run_and_leaves_no_trace(library, request, tmp_path):
    runtime = request.getfixturevalue(f"{library}_available")
    track = get_track(library)
    home = tmp_path / "home"
    home.mkdir()
    zygote = imported(runtime, track.zygote_preload, "zygote", home)
    assert not zygote["mpi"], "the zygote's imports started MPI"
    assert list(home.iterdir()) == [], f"the zygote's imports wrote {sorted(map(str, home.rglob('*')))[:5]}"
    cold = imported(runtime, track.preload, "cold", home)
    assert set(zygote["modules"]) <= set(cold["modules"]), sorted(set(zygote["modules"]) - set(cold["modules"]))[:10]
