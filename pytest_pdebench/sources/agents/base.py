"""What every code agent source shares: the item's workspace and task, the proxy's
lifetime, the harvest of the solver it leaves, the audit files, the limits
(``AgentSource``); the agents themselves are ``mini_swe.py`` and ``command.py``."""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ...cases import CaseRecord, agent_view
from ...llm.cache import SpendLedger
from ...llm.registry import ModelSpec
from ...prompts import agent_answer, agent_feedback_task, single_shot_prompt
from ...run_files import HeldFolder, UnsafeOutput, read_run_file, remove_tree
from .. import Draft, Feedback, ItemView, NotRun, Submission
from ..folder import HELPER_SUFFIXES
from .proxy import MeteringProxy

MINI_SWE_AGENT = "mini-swe-agent"
_random = random.SystemRandom()  # the trial grid must not be predictable from this code
WORKSPACE = "workspace"
SOURCE_CAP_BYTES = 4 * 1024 * 1024  # per solver or helper file
AGENT_CACHE = ".agent-cache"  # the agent's XDG cache (compiled kernels...), per item and run
SPENT_FILE = ".agent-spent.json"  # the item's spending over its attempts (the cost limit is per item)
DRAFT_FILE = "draft.json"  # what --pde-resume replays: the attempt's solver files, usage and audit


def literal(text: str) -> str:
    """``text`` as a RunRequest argument: the backends fill ``{work}``-style placeholders
    with str.format, and an agent's command has braces of its own."""
    return text.replace("{", "{{").replace("}", "}}")


@dataclass(frozen=True)
class AgentLimits:
    wall_sec: float = 1800.0  # the agent's whole run, per attempt
    steps: int = 50  # model calls per attempt (mini-swe-agent; a command agent keeps its own)
    cost_usd: float | None = None  # per item, over all attempts: the proxy refuses beyond it
    action_sec: float = 300.0  # one shell command of mini-swe-agent: long enough for a FEM solve


@dataclass
class AgentEnd:
    """How an agent's run ended."""

    status: str  # "finished", "timeout", "step-limit", "crashed", "refused"
    detail: str = ""
    audit: dict[str, str] | None = None  # its log or trajectory, for the attempt folder

    @property
    def agent_fault(self) -> bool:
        return self.status != "finished"


class AgentSource:
    """What every agent shares: workspace, proxy, harvest, audit. Subclasses run the agent."""

    attempt_folders = True
    name = "agent"
    proxy_on_socket = True  # command agents reach it through the sandbox; mini-swe-agent over loopback TCP

    def __init__(
        self,
        spec: ModelSpec,
        real_key: str,
        ledger: SpendLedger,
        settings,
        *,
        attempts: int = 1,
        limits: AgentLimits = AgentLimits(),
        guides_dir: Path | None = None,
    ):
        self.spec, self._real_key, self.ledger, self.settings = spec, real_key, ledger, settings
        self.attempts, self.limits, self.guides_dir = attempts, limits, guides_dir

    @property
    def label(self) -> str:
        return f"agent:{self.name}:{self.spec.name}"

    @property
    def run_label(self) -> str:  # names the run's output folder
        return "".join(c if c.isalnum() or c in "._-" else "-" for c in f"{self.name}-{self.spec.name}")

    def run_agent(self, workspace: Path, task_file: str, task: str, proxy: MeteringProxy, library: str) -> AgentEnd:
        """Run the agent on ``task`` (also in ``workspace/task_file``) until it ends."""
        raise NotImplementedError

    def task_text(self, view: dict, record: CaseRecord, library: str) -> str:
        return single_shot_prompt(
            view, record.evaluation_config.timeout_sec, self.guides_dir, answer=agent_answer(library)
        )

    def draft(self, item: ItemView, attempt: int, feedback: Feedback | None) -> Draft:
        """The attempt's draft: the agent's run, or under --pde-resume the stored draft of the
        same attempt (same agent, model, case and feedback), so an interrupted run does not
        pay for finished agents again."""
        key = hashlib.sha256(
            json.dumps(
                [
                    self.label,
                    getattr(self, "command", ""),
                    item.case_fingerprint,
                    attempt,
                    feedback.facts if feedback else None,
                ],
                sort_keys=True,
                default=str,
            ).encode()
        ).hexdigest()[:16]
        attempt_dir = item.attempt_dir(attempt)
        if self.settings.resume:
            stored = _stored_draft(attempt_dir, key)
            if stored is not None:
                return stored
        draft = self._run_attempt(item, attempt, feedback)
        draft.audit[DRAFT_FILE] = (
            json.dumps(
                {
                    "key": key,
                    "reason": draft.reason,
                    "usage": draft.usage,
                    "source_failure": draft.source_failure,
                    "solver": draft.submission.solver_name if draft.submission else None,
                    "files": sorted(draft.submission.files) if draft.submission else [],
                    "audit": sorted(draft.audit),
                },
                indent=1,
            )
            + "\n"
        )
        return draft

    def _run_attempt(self, item: ItemView, attempt: int, feedback: Feedback | None) -> Draft:
        if self.ledger.exhausted():  # as for a model: the items after the budget are not run
            raise NotRun(
                f"budget reached: ${self.ledger.spent():.2f} of ${self.ledger.budget:.2f} spent "
                f"(--pde-budget); no new agent runs"
            )
        record, library, item_dir = item.record, item.library, item.item_dir
        workspace = item_dir / WORKSPACE
        if attempt == 1:  # a fresh folder per item; later attempts continue in it
            item_dir.mkdir(parents=True, exist_ok=True)
            remove_tree(item_dir / AGENT_CACHE)  # nothing carried over from an earlier run
            (item_dir / SPENT_FILE).unlink(missing_ok=True)  # (the item folder is the harness's alone)
            view = trial_view(record, library)
            with HeldFolder.make(workspace) as fresh:
                fresh.write("case_spec.json", json.dumps(view, indent=1))
            task = self.task_text(view, record, library)
        else:  # the verdict, as a new task beside the first
            task = agent_feedback_task(attempt, cast(Feedback, feedback).facts, library)  # a later attempt's
        task_file = "TASK.md" if attempt == 1 else f"TASK-{attempt}.md"
        solver = workspace / ("solver.cpp" if library == "dealii" else "solver.py")
        with HeldFolder(workspace) as held:  # the agent's folder: by descriptor, never through its links
            held.write(task_file, task)
            held.remove(solver.name)  # what is judged is what this attempt left
        requests_log = item_dir / f".llm-requests-{attempt}.jsonl"
        requests_log.unlink(missing_ok=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="pdebench-llm-") as sockets:  # short: unix socket paths are
            socket_path = Path(sockets) / "proxy.sock" if self.proxy_on_socket else None  # limited to 107 bytes
            spent_before = self._spent(item_dir)
            limit = None if self.limits.cost_usd is None else max(self.limits.cost_usd - spent_before, 0.0)
            with MeteringProxy(
                self.spec, self._real_key, requests_log, ledger=self.ledger, cost_limit_usd=limit, unix_path=socket_path
            ) as proxy:
                end = self.run_agent(workspace, task_file, task, proxy, library)
            meter = proxy.meter.to_dict()
        if proxy.meter.refused and end.status not in ("finished", "refused"):  # it ended on the refusal
            end = AgentEnd("refused", f"{proxy.refusal() or 'model calls refused'} (then: {end.detail})", end.audit)
        self._add_spent(item_dir, meter["cost_usd"])
        audit = {
            "task.md": task,
            **(end.audit or {}),
            "agent.json": json.dumps(
                {
                    "agent": self.name,
                    "model": self.spec.name,
                    "status": end.status,
                    "detail": end.detail,
                    "seconds": round(time.monotonic() - started, 3),
                    "proxy": meter,
                },
                indent=1,
            )
            + "\n",
        }
        if requests_log.is_file():
            audit["llm-requests.jsonl"] = requests_log.read_text()
            requests_log.unlink()
        usage = {
            "input_tokens": meter["input_tokens"],
            "output_tokens": meter["output_tokens"],
            "cost_usd": meter["cost_usd"],
            "calls": meter["calls"],
            "agent_status": end.status,
        }
        try:
            submission = _harvest(workspace, solver, item.attempt_dir(attempt))
        except UnsafeOutput as exc:
            return Draft(None, reason=f"the files the agent left are refused: {exc}", usage=usage, audit=audit)
        if submission is not None:
            return Draft(submission, usage=usage, audit=audit)
        if end.agent_fault:  # not the solver's fault: counted apart in the report
            return Draft(
                None,
                reason=f"agent {end.status} without leaving {solver.name}: {end.detail}".rstrip(": "),
                usage=usage,
                audit=audit,
                source_failure=True,
            )
        return Draft(None, reason=f"the agent finished without leaving {solver.name}", usage=usage, audit=audit)

    def summary(self, history: list[dict]) -> dict:
        return {
            "agent": self.name,
            "model": self.spec.name,
            "model_id": self.spec.model,
            "base_url": self.spec.base_url,
            "prompt_mode": "agent",
            "attempts": history,
            "calls": sum(h.get("calls", 0) for h in history),
            "cache_hits": 0,
            "input_tokens": sum(h.get("input_tokens", 0) for h in history),
            "output_tokens": sum(h.get("output_tokens", 0) for h in history),
            "cost_usd": sum(h.get("cost_usd", 0.0) for h in history),
        }

    @staticmethod
    def _spent(item_dir: Path) -> float:
        path = item_dir / SPENT_FILE
        return json.loads(path.read_text())["usd"] if path.is_file() else 0.0

    def _add_spent(self, item_dir: Path, usd: float) -> None:
        (item_dir / SPENT_FILE).write_text(json.dumps({"usd": self._spent(item_dir) + usd}))


def trial_view(record: CaseRecord, library: str) -> dict:
    """The agent's view of the case with a trial evaluation grid: each axis 2 to 7 points
    off, at random. The evaluation runs the solver on the case's own grid, so values the
    agent computed in its folder and wrote into its solver have the wrong shape; a solver
    that reads the grid from case_spec, as the contract asks, sees no difference."""
    view = agent_view(record, library)
    grid = view["case_spec"]["eval_grid"]
    for axis in ("nx", "ny", "nz"):
        if grid.get(axis):
            shift = _random.randint(2, 7)
            grid[axis] = grid[axis] + shift if grid[axis] - shift < 8 or _random.random() < 0.5 else grid[axis] - shift
    return view


def _stored_draft(attempt_dir: Path, key: str) -> Draft | None:
    """The draft an earlier run stored for this attempt, if its key matches and its files
    are all there (the gates keep the solver's files in the attempt folder)."""
    try:
        stored = json.loads((attempt_dir / DRAFT_FILE).read_text())
        if stored["key"] != key:
            return None
        files = {name: read_run_file(attempt_dir, name, SOURCE_CAP_BYTES) for name in stored["files"]}
        audit = {name: (attempt_dir / name).read_text() for name in stored["audit"]}
    except (OSError, ValueError, KeyError, UnsafeOutput):
        return None
    if any(content is None for content in files.values()):
        return None
    present = cast("dict[str, bytes]", files)  # none is None (above)
    submission = Submission(stored["solver"], present, str(attempt_dir / stored["solver"])) if files else None
    return Draft(
        submission,
        reason=stored["reason"],
        usage={**stored["usage"], "resumed": True},
        audit=audit,
        source_failure=stored["source_failure"],
    )


def _harvest(workspace: Path, solver: Path, origin_dir: Path) -> Submission | None:
    """The solver the agent left, with its helpers (the same rule as a folder of solvers),
    read as regular files only: the agent wrote them from inside a sandbox, and a link
    there would be followed here, on the host (to a reference, say). UnsafeOutput then."""
    with HeldFolder(workspace) as held:
        content = held.read(solver.name, SOURCE_CAP_BYTES)
        if content is None:
            return None
        files = {solver.name: content}
        for name in held.names():
            if name.startswith("_") and name.endswith(HELPER_SUFFIXES[solver.suffix]):
                # cast: the name was just listed, and no process of the agent is left
                files[name] = cast(bytes, held.read(name, SOURCE_CAP_BYTES))
    return Submission(solver.name, files, str(origin_dir / solver.name))
