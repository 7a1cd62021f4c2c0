"""pytest's start where the plugin is installed (issue 49): another project's test run pays
for the plugin's options and markers only, and ``pdebench --help`` for the parser only. The
figures (milliseconds side by side with ``-p no:pdebench``) are measured by
``benchmarks/start_cost.py``; these tests keep the imports that set them."""

from __future__ import annotations

import json
import subprocess
import sys

LIGHT_PLUGIN = {"pytest_pdebench", "pytest_pdebench.plugin", "pytest_pdebench.vocabulary"}
LIGHT_CLI = {"pytest_pdebench", "pytest_pdebench.cli", "pytest_pdebench.bundled", "pytest_pdebench.vocabulary"}


def test_another_projects_run_imports_only_the_plugins_options(tmp_path):
    (tmp_path / "test_one.py").write_text(
        "import json, sys\n\n"
        "def test_one():\n"
        "    loaded = sorted(m for m in sys.modules if m.startswith('pytest_pdebench'))\n"
        "    open('loaded.json', 'w').write(json.dumps(loaded))\n"
    )
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    loaded = set(json.loads((tmp_path / "loaded.json").read_text()))
    assert "pytest_pdebench.plugin" in loaded, loaded  # installed, so loaded
    assert loaded <= LIGHT_PLUGIN, sorted(loaded - LIGHT_PLUGIN)


def test_pdebench_help_imports_no_command():
    probe = (
        "import sys\n"
        "from pytest_pdebench import cli\n"
        "cli._parser().format_help()\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('pytest_pdebench'))))\n"
        "print('pydantic' in sys.modules, 'numpy' in sys.modules, 'pytest' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    modules, heavy = done.stdout.splitlines()
    assert set(modules.split()) <= LIGHT_CLI, modules
    assert heavy == "False False False", heavy


def test_the_plugins_markers_name_every_family_track_and_domain():
    from pytest_pdebench import domains
    from pytest_pdebench.vocabulary import DOMAIN_TYPES, MARKERS

    assert tuple(domains.TEMPLATES) == DOMAIN_TYPES  # the plugin's list is the builders' list
    assert {"poisson", "dealii", "l_shape", "manufactured_solution", "incompressible_flow"} <= set(MARKERS)
