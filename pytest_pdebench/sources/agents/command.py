"""Any agent by command line (``--pde-agent="CMD ..."``), run inside the item's sandbox.

Placeholders: ``{workdir}`` (the working folder, as the agent sees it), ``{prompt_file}``
(the attempt's task in it: ``TASK.md``, then ``TASK-<k>.md`` with the verdict of attempt
k-1) and ``{model}`` (the registry name). The agent sees what every run sees
(visibility.py): its workspace, the track's runtime, and the folders declared with
``--pde-agent-dir`` (its program and installation), each read-only at its own path;
a host path its command names is not made visible for being named. The sandbox has no
network: ``forwarder.py`` serves the metering proxy's socket on its loopback, and the
agent finds it in ``OPENAI_BASE_URL`` / ``LLM_BASE_URL`` with a per-item key in
``OPENAI_API_KEY`` / ``LLM_API_KEY`` (never the provider's key) and ``LLM_MODEL``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ...libraries import get_track
from ...sandbox import Limits, get_backend
from .base import AGENT_CACHE, AgentEnd, AgentSource, literal
from .proxy import MeteringProxy

FORWARDER = Path(__file__).with_name("forwarder.py")
LOOPBACK_PORT = 8377  # inside the sandbox's own network namespace: nothing else listens there
LOG_CHARS = 200_000


INTERPRETERS = {"python", "python3", "sh", "bash", "env", "node", "uv", "uvx", "exec"}


def _program_name(command: str) -> str:
    """Names the agent in reports: the first word that is not an interpreter (its script)."""
    words = [w.rsplit("/", 1)[-1] for w in shlex.split(command) if not w.startswith("-")]
    return next((w for w in words if w not in INTERPRETERS and "=" not in w), words[0] if words else "command")


class CommandAgent(AgentSource):
    def __init__(self, command: str, *args, folders: tuple[Path, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.command, self.folders = command, folders
        self.name = _program_name(command)

    def unseen_paths(self) -> list[str]:
        """Words of the command that name a host path outside the declared folders (the
        agent will not find them: worth a warning)."""
        unseen = []
        for word in shlex.split(self.command):
            path = Path(word)
            if path.is_absolute() and path.exists():
                resolved = path.resolve()
                if not any(resolved == folder or resolved.is_relative_to(folder) for folder in self.folders):
                    unseen.append(word)
        return unseen

    def run_agent(self, workspace, task_file, task, proxy: MeteringProxy, library) -> AgentEnd:
        runtime = self.settings.runtime(library)
        backend = get_backend(self.settings.sandbox)
        if backend.name == "docker":
            raise NotImplementedError("command agents run under --pde-sandbox=bubblewrap (or none) for now")
        cache = workspace.parent / AGENT_CACHE
        cache.mkdir(exist_ok=True)
        limits = Limits(timeout_sec=self.limits.wall_sec, memory_mb=self.settings.memory_mb)
        request = get_track(library).run_request(runtime, "solver", workspace, cache, limits)
        work = backend.paths(request)["work"]
        command = self._command_line(work, f"{work}/{task_file}")
        url = f"http://127.0.0.1:{LOOPBACK_PORT}/v1"
        python = runtime.python or "/usr/bin/python3"
        request.argv = [python, str(FORWARDER), proxy.address, str(LOOPBACK_PORT), "/bin/sh", "-c", literal(command)]
        request.env = {
            **request.env,
            "OPENAI_BASE_URL": url,
            "OPENAI_API_KEY": proxy.token,
            "LLM_BASE_URL": url,
            "LLM_API_KEY": proxy.token,
            "LLM_MODEL": self.spec.name,
            "PDEBENCH_TASK": f"{work}/{task_file}",
        }
        request.read_only = [*request.read_only, FORWARDER, Path(proxy.address).parent, *self.folders]
        result = backend.run(request)
        audit = {"agent-stdout.txt": result.stdout[-LOG_CHARS:], "agent-stderr.txt": result.stderr[-LOG_CHARS:]}
        if result.timed_out:
            return AgentEnd("timeout", f"wall-clock limit of {self.limits.wall_sec:g} s", audit)
        if result.returncode != 0:
            return AgentEnd("crashed", f"exit code {result.returncode}", audit)
        return AgentEnd("finished", "", audit)

    def _command_line(self, work: str, task_path: str) -> str:
        """The command with its placeholders filled."""
        return (
            self.command.replace("{workdir}", work)
            .replace("{prompt_file}", task_path)
            .replace("{model}", self.spec.name)
        )
