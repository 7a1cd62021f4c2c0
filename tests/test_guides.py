"""Every code block of a library guide runs, in order, on that library's runtime: the
guides in prompts can never drift from what is installed."""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import REPO

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
