"""pytest's start where the plugin is installed (issue 49): another project's test run pays
for the plugin's options and markers only, and ``pdebench --help`` for the parser only. The
figures (milliseconds side by side with ``-p no:pdebench``) are measured by
``benchmarks/start_cost.py``; these tests keep the imports that set them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# the options (shared_options: those the command shares) and the hooks other plugins implement
LIGHT_PLUGIN = {"pytest_pdebench", "pytest_pdebench.plugin", "pytest_pdebench.vocabulary", "pytest_pdebench.shared_options",
                "pytest_pdebench.hookspecs"}
LIGHT_CLI = {"pytest_pdebench", "pytest_pdebench.cli", "pytest_pdebench.bundled", "pytest_pdebench.vocabulary",
             "pytest_pdebench.shared_options",
             *(f"pytest_pdebench.cli.{group}" for group in ("common", "run", "suite", "calibrate", "audit"))}


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


# what runs items (issue 50): a session imports these when its first item runs, never to collect
RUN_MODULES = {
    "pytest_pdebench.attempts", "pytest_pdebench.evaluation", "pytest_pdebench.execution",
    "pytest_pdebench.baseline_pass", "pytest_pdebench.scheduling", "pytest_pdebench.sources.model",
    "pytest_pdebench.llm", "tabulate", "sympy", "docker", "openai",
}  # fmt: skip


def test_collecting_the_benchmark_imports_none_of_the_runs_modules(tmp_path):
    (tmp_path / "loaded_probe.py").write_text(  # a plugin of its own: the cases' folder has no conftest of ours
        "import json, sys\n\n"
        "def pytest_collection_finish(session):\n"
        "    open('loaded.json', 'w').write(json.dumps(sorted(sys.modules)))\n"
    )
    oracle = REPO / "submissions" / "oracle"
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "-p", "loaded_probe", f"--pde-submissions={oracle}", "--pde-library=dolfinx",
                           str(REPO / "pytest_pdebench" / "data" / "smoke")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": path})  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "[dolfinx]" in done.stdout  # items were collected
    loaded = set(json.loads((tmp_path / "loaded.json").read_text()))
    assert "pytest_pdebench.items" in loaded
    assert not loaded & RUN_MODULES, sorted(loaded & RUN_MODULES)
