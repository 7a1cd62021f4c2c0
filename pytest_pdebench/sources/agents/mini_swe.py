"""mini-swe-agent, built in (``--pde-agent=mini-swe-agent``; ``pip install
pytest-pdebench[agents]``).

Its loop (``DefaultAgent`` with the text-based litellm model: one fenced
``mswea_bash_command`` per reply) runs on the host and talks to the metering proxy on
loopback; every shell command it issues runs in a fresh sandbox of the item's track
(the evaluation's sandbox and runtime: no network, nothing evaluator-only, the memory
limit, ``--pde-agent-action-timeout`` per command) in the item's working folder. Only
files persist between commands. The instructions are this project's; the trajectory is
mini-swe-agent's own format, stored as ``trajectory.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...libraries import get_track
from ...sandbox import Limits, get_backend
from .base import AGENT_CACHE, AgentEnd, AgentSource, literal

DONE_WORD = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent's end-of-task signal
OUTPUT_CHARS = 10_000  # of one command's output, shown to the model

SYSTEM = f"""You solve programming tasks by running shell commands, one per reply.

Each reply: a few sentences of reasoning, then exactly one command in a block fenced as
```mswea_bash_command
...
```
Every command runs in a fresh shell in your working folder (`cd`, variables and
background processes do not carry over; files do). There is no network and no
interactive input. To write a file, use a here-document (cat <<'EOF' > file).

When the task is done, reply with the command `echo {DONE_WORD}` alone; you cannot act
after it."""

STATUS_OF_EXIT = {
    "Submitted": "finished",
    "LimitsExceeded": "step-limit",
    "TimeExceeded": "timeout",
    "RepeatedFormatError": "format-errors",
}


class CallsRefused(RuntimeError):
    """The item's cost limit or the run's budget is reached."""


def _quiet_imports(config_dir: Path) -> None:
    """Before importing mini-swe-agent: no banner, no user config folded into the process
    environment, litellm's price table from the package (no download)."""
    config_dir.mkdir(parents=True, exist_ok=True)
    os.environ["MSWEA_SILENT_STARTUP"] = "1"
    os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = str(config_dir)
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


class SandboxEnvironment:
    """mini-swe-agent's Environment protocol over the harness's sandbox."""

    def __init__(self, settings, library: str, workspace: Path, action_sec: float):
        self.settings, self.library, self.workspace, self.action_sec = settings, library, workspace, action_sec
        self.backend = get_backend(settings.sandbox)
        self.runtime = settings.runtime(library)
        self.config = {"sandbox": self.backend.name, "library": library, "action_timeout_sec": action_sec}
        self.actions = 0

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict:
        from minisweagent.exceptions import Submitted

        command = action.get("command", "")
        self.actions += 1
        cache = self.workspace.parent / AGENT_CACHE
        cache.mkdir(exist_ok=True)
        limits = Limits(timeout_sec=timeout or self.action_sec, memory_mb=self.settings.memory_mb)
        request = get_track(self.library).run_request(self.runtime, "solver", self.workspace, cache, limits)
        request.argv = ["/bin/sh", "-c", literal("exec 2>&1\n" + command)]
        result = self.backend.run(request)
        text = result.stdout + result.stderr
        if len(text) > OUTPUT_CHARS:
            text = (
                text[: OUTPUT_CHARS // 2]
                + f"\n[... {len(text) - OUTPUT_CHARS} characters cut ...]\n"
                + text[-OUTPUT_CHARS // 2 :]
            )
        output = {"output": text, "returncode": result.returncode if not result.timed_out else -1, "exception_info": ""}
        if result.timed_out:
            output["exception_info"] = (
                f"the command was stopped after {limits.timeout_sec:g} s (the time limit of one command)"
            )
        lines = text.lstrip().splitlines()
        if lines and lines[0].strip() == DONE_WORD and output["returncode"] == 0:
            raise Submitted({"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}})
        return output

    def get_template_vars(self, **kwargs) -> dict:
        return {**self.config, **kwargs}

    def serialize(self) -> dict:
        return {
            "info": {"config": {"environment": self.config, "environment_type": "pytest_pdebench.SandboxEnvironment"}}
        }


class MiniSweAgent(AgentSource):
    name = "mini-swe-agent"
    proxy_on_socket = False  # the loop runs on the host: loopback TCP

    def run_agent(self, workspace, task_file, task, proxy, library) -> AgentEnd:
        _quiet_imports(workspace.parent / ".mini-swe-agent-config")
        from minisweagent.agents.default import DefaultAgent
        from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

        model_kwargs = {"api_base": proxy.address, "api_key": proxy.token}
        if self.spec.temperature is not None:
            model_kwargs["temperature"] = self.spec.temperature

        class MeteredModel(LitellmTextbasedModel):
            """Asks the proxy first: a refused call is final (mini-swe-agent would retry it ten times)."""

            abort_exceptions = [*LitellmTextbasedModel.abort_exceptions, CallsRefused]

            def query(self, messages, **kwargs):
                refusal = proxy.refusal()
                if refusal:
                    raise CallsRefused(refusal)
                return super().query(messages, **kwargs)

        model = MeteredModel(
            model_name=f"openai/{self.spec.name}", model_kwargs=model_kwargs, cost_tracking="ignore_errors"
        )
        environment = SandboxEnvironment(self.settings, library, workspace, self.limits.action_sec)
        agent = DefaultAgent(
            model,
            environment,
            system_template=SYSTEM,
            instance_template="{{task}}",
            step_limit=self.limits.steps,
            cost_limit=0,
            wall_time_limit_seconds=int(self.limits.wall_sec),
        )
        try:
            result = agent.run(task)
            status = STATUS_OF_EXIT.get(result.get("exit_status", ""), "crashed")
            detail = "" if status == "finished" else str(result.get("exit_status", ""))
        except CallsRefused as exc:
            status, detail = "refused", str(exc)
        except Exception as exc:  # a model call failed for good, an error in the loop
            status, detail = "crashed", f"{type(exc).__name__}: {exc}"[:500]
        if status == "step-limit":
            detail = f"{self.limits.steps} model calls"
        elif status == "timeout":
            detail = f"wall-clock limit of {self.limits.wall_sec:g} s"
        trajectory = agent.serialize({"info": {"pdebench": {"actions": environment.actions, "status": status}}})
        return AgentEnd(status, detail, {"trajectory.json": json.dumps(trajectory, indent=1, default=str) + "\n"})
