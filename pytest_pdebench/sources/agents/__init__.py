"""Code agents as sources of submissions (``--pde-agent``).

An agent gets a working folder per item (``<item>/workspace``: the task as ``TASK.md``
and ``case_spec.json``), works there for up to ``--pde-agent-timeout`` seconds, and
leaves ``solver.py`` / ``solver.cpp``; the harness then evaluates that file like any
submission, in a fresh sandbox. Its model calls all go through the metering proxy
(``proxy.py``), which holds the real key, prices every call with the registry and
enforces the item's cost limit and the run's budget.

- ``mini-swe-agent`` (``mini_swe.py``): the agent loop runs on the host; each shell
  command it issues runs in the item's sandbox.
- any other value is a command line (``command.py``) run *inside* the sandbox, whose only
  way out is the proxy, served on the sandbox's loopback.

Audit, per attempt (``<item>/attempt-<k>/``): ``task.md`` (what the agent was told),
``llm-requests.jsonl`` (every model request: tokens, cost, status, the exchange),
``agent.json`` (how the agent ended), the agent's own log or trajectory, and the gates'
files for the solver it left.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest

from ...llm.cache import SpendLedger
from ...llm.registry import ModelSpec
from ...notices import PdeBenchWarning
from ...visibility import DeclaredFolderRefused, check_declared
from .base import MINI_SWE_AGENT, AgentLimits
from .command import CommandAgent
from .mini_swe import MiniSweAgent


def agent_source(opt, spec: ModelSpec, real_key: str, ledger: SpendLedger, settings, guides_dir: Path | None):
    """The source of ``--pde-agent`` (a UsageError for settings it cannot honour)."""
    limits = AgentLimits(
        wall_sec=opt.pde_agent_timeout,
        steps=opt.pde_agent_steps,
        cost_usd=opt.pde_agent_cost,
        action_sec=opt.pde_agent_action_timeout,
    )
    if min(limits.wall_sec, limits.action_sec) <= 0 or limits.steps < 1:
        raise pytest.UsageError(
            "--pde-agent-timeout, --pde-agent-action-timeout and --pde-agent-steps must be positive"
        )
    common = dict(attempts=opt.pde_attempts, limits=limits, guides_dir=guides_dir)
    if opt.pde_agent == MINI_SWE_AGENT:
        if opt.pde_agent_dir:
            raise pytest.UsageError(
                "--pde-agent-dir is for a command agent: mini-swe-agent's loop runs on the host, its commands "
                "in the sandbox see the workspace and the track's runtime only"
            )
        if importlib.util.find_spec("minisweagent") is None:  # (importing it would print its banner)
            raise pytest.UsageError(
                "--pde-agent=mini-swe-agent needs the package: pip install 'pytest-pdebench[agents]'"
            ) from None
        return MiniSweAgent(spec, real_key, ledger, settings, **common)
    if settings.sandbox == "docker":
        raise pytest.UsageError("a command agent runs in the bubblewrap sandbox for now: drop --pde-sandbox=docker")
    try:
        folders = tuple(check_declared(folder) for folder in opt.pde_agent_dir or ())
    except DeclaredFolderRefused as exc:
        raise pytest.UsageError(f"--pde-agent-dir: {exc}") from None
    agent = CommandAgent(opt.pde_agent, spec, real_key, ledger, settings, folders=folders, **common)
    for word in agent.unseen_paths():
        warnings.warn(
            PdeBenchWarning(
                f"--pde-agent names {word}, which the agent's sandbox does not show: only its workspace, the "
                "track's runtime and the folders given with --pde-agent-dir are visible"
            ),
            stacklevel=1,
        )
    return agent
