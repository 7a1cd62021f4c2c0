"""Every code block of a library guide runs, in order, on that library's runtime: the
guides in prompts can never drift from what is installed."""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest

from pytest_pdebench.testing import REPO, record_dict

GUIDES = {"dolfinx": REPO / "guides" / "DOLFINX_GUIDE.md", "firedrake": REPO / "guides" / "FIREDRAKE_GUIDE.md"}
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@pytest.mark.parametrize("library", sorted(GUIDES))
def test_guide_code_runs_on_the_runtime(library, tmp_path, request):
    runtime = request.getfixturevalue(f"{library}_available")
    blocks = BLOCK.findall(GUIDES[library].read_text())
    assert len(blocks) >= 7
    script = tmp_path / "guide.py"
    # one interpreter, blocks in order; a marker after each shows how far it got
    script.write_text("\n".join(f"{block}\nprint('block {i} ok', flush=True)\n" for i, block in enumerate(blocks)))
    done = subprocess.run([runtime.python, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**{k: v.replace("{cache}", str(tmp_path / "cache")) for k, v in runtime.env.items()},
                               "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-500:] + done.stderr[-3000:]
    assert done.stdout.count("ok") == len(blocks)
    assert (tmp_path / "solution.npz").is_file() and (tmp_path / "meta.json").is_file()


CPP_BLOCK = re.compile(r"^```cpp\n(.*?)^```", re.S | re.M)


def test_dealii_guide_compiles_and_solves_poisson_basic(tmp_path, dealii_available):
    from pytest_pdebench.libraries.dealii import host_toolchain

    blocks = CPP_BLOCK.findall((REPO / "guides" / "DEALII_GUIDE.md").read_text())
    assert len(blocks) >= 6
    (tmp_path / "guide.cpp").write_text("\n".join(blocks))
    toolchain = host_toolchain()
    # the header is built on first use: this test must not count on another having built it
    command = toolchain.compile_command(["guide.cpp"], "guide", use_pch=toolchain.ensure_pch())
    built = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    record = record_dict(nx=30, ny=20)
    (tmp_path / "case_spec.json").write_text(json.dumps({"case_spec": record["case_spec"]}))
    done = subprocess.run(["./guide", "case_spec.json", "."], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "OMPI_MCA_ess_singleton_isolated": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    u = np.fromfile(tmp_path / "solution_grid.bin").reshape(20, 30)
    x, y = np.meshgrid(np.linspace(0, 1, 30), np.linspace(0, 1, 20))
    assert np.abs(u - np.sin(np.pi * x) * np.sin(np.pi * y)).max() < 1e-4  # poisson_basic's exact solution
    assert json.loads((tmp_path / "meta.json").read_text())["status"] == "success"
