"""Code-agent sessions for the tests (tests/test_agents.py, tests/test_redteam.py): a toy
case, a model registry whose entries all point at the scripted server on loopback, and a
pytest session in a subprocess with ``--pde-agent``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from . import REPO, outcomes_from_report, record_dict, write_calibration, write_jsonl

SECRET = "sk-the-harness-own-secret-0451"
PRICE_IN, PRICE_OUT = 3.0, 15.0  # USD per million tokens, in the test registry
TINY_AGENT = REPO / "tests" / "data" / "agents" / "tiny_agent.py"


def agent_bench(tmp_path: Path, server_url: str, models, machine: str | None = None) -> Path:
    """One toy case (toy_a, a 20 x 20 grid) with its calibration (under ``machine``'s key if
    given: a container image's), and the models' registry."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    records = [record_dict(new_id="toy_a", nx=20, ny=20)]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", "dolfinx", records, 1e-4, 5.0, machine)
    (tmp_path / "models.toml").write_text(
        "".join(
            f'[models.{name}]\nmodel = "{name}"\nbase_url = "{server_url}"\napi_key_env = "PDEBENCH_TEST_KEY"\n'
            f"input_usd_per_mtok = {PRICE_IN}\noutput_usd_per_mtok = {PRICE_OUT}\n\n"
            for name in models
        )
    )
    return tmp_path


def command_agent(steps: int = 8, *extra: str) -> str:
    """The tiny command agent's command line (its folder is declared with --pde-agent-dir)."""
    return " ".join(["python", str(TINY_AGENT), "{prompt_file}", "--steps", str(steps), *extra])


def agent_options(agent: str) -> list[str]:
    """--pde-agent, and for a command agent the folder of its program."""
    if agent == "mini-swe-agent":
        return [f"--pde-agent={agent}"]
    return [f"--pde-agent={agent}", f"--pde-agent-dir={TINY_AGENT.parent}"]


def run_agent(bench: Path, model: str, agent: str, *extra: str, case: str = "toy_a"):
    """A session of ``agent`` with ``model`` on the bench's case: (its verdict, the item's folder)."""
    report = bench / f"report-{model}.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--pde-library=dolfinx",
            f"--pde-cases={bench / 'cases.jsonl'}",
            f"--pde-model={model}",
            f"--pde-models={bench / 'models.toml'}",
            *agent_options(agent),
            f"--pde-calibrations={bench / 'calibrations'}",
            f"--pde-output={bench / 'out'}",
            f"--pde-llm-cache={bench / 'cache'}",
            "--json-report",
            f"--json-report-file={report}",
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PDEBENCH_TEST_KEY": SECRET},
    )
    outcomes = outcomes_from_report(report) if report.exists() else {}
    assert case in outcomes, done.stdout[-3000:] + done.stderr[-2000:]
    return outcomes[case], bench / "out" / "dolfinx" / case
