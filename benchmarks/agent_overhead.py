"""What the agent machinery costs per model call and per shell command (issue 14):
prints figures, asserts nothing.

    .venv/bin/python benchmarks/agent_overhead.py [--calls 30] [--actions 10] [--backends bubblewrap,docker]

- a model call straight to an OpenAI-compatible server on loopback, and the same call
  through the metering proxy (pricing, logging, the forward with the real key);
- one mini-swe-agent command (`true`) through the sandbox environment: a fresh sandbox of
  the DOLFINx track per command (docker: a fresh container; needs DOCKER_HOST and the image).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from openai import OpenAI

from pytest_pdebench.llm.registry import ModelSpec
from pytest_pdebench.settings import Settings
from pytest_pdebench.sources.agents.mini_swe import SandboxEnvironment, _quiet_imports
from pytest_pdebench.sources.agents.proxy import MeteringProxy
from pytest_pdebench.testing.llm_server import ScriptedServer

REPO = Path(__file__).resolve().parent.parent

MESSAGES = [{"role": "user", "content": "x" * 4000}]  # a task-sized first message


def call_seconds(client: OpenAI, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        client.chat.completions.create(model="agent-correct", messages=MESSAGES)
        times.append(time.perf_counter() - start)
    return times


def ms(values: list[float]) -> str:
    low, high = 1000 * min(values), 1000 * max(values)
    return f"median {1000 * statistics.median(values):.1f} ms (min {low:.1f}, max {high:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--actions", type=int, default=10)
    parser.add_argument("--backends", default="bubblewrap")
    args = parser.parse_args()

    with ScriptedServer() as server, tempfile.TemporaryDirectory() as scratch:
        direct = call_seconds(OpenAI(base_url=server.url, api_key="k", max_retries=0), args.calls)
        spec = ModelSpec(name="agent-correct", model="agent-correct", base_url=server.url,
                         input_usd_per_mtok=3.0, output_usd_per_mtok=15.0)
        with MeteringProxy(spec, "k", Path(scratch) / "requests.jsonl") as proxy:
            proxied = call_seconds(OpenAI(base_url=proxy.address, api_key=proxy.token, max_retries=0), args.calls)
        print(f"model call, {args.calls} calls, 4,000-character message:")
        print(f"  straight to the server   {ms(direct)}")
        print(f"  through the proxy        {ms(proxied)}")
        print(f"  proxy's share            {1000 * (statistics.median(proxied) - statistics.median(direct)):.1f} ms")

        _quiet_imports(Path(scratch) / "mini-swe-agent-config")
        for backend in args.backends.split(","):
            workspace = Path(scratch) / backend / "workspace"
            workspace.mkdir(parents=True)
            settings = Settings(output_dir=Path(scratch), sandbox=backend)
            environment = SandboxEnvironment(settings, "dolfinx", workspace, action_sec=60)
            environment.execute({"command": "true"})  # a first start warms the page cache
            times = []
            for _ in range(args.actions):
                start = time.perf_counter()
                output = environment.execute({"command": "true"})
                times.append(time.perf_counter() - start)
                assert output["returncode"] == 0, output
            print(f"one agent command (`true`) in a fresh {backend} sandbox, {args.actions} commands: {ms(times)}")


if __name__ == "__main__":
    main()
