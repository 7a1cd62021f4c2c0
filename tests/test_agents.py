"""Code agents as sources (issue 14), over real processes: the scripted OpenAI-compatible
server on loopback plays the model (``pytest_pdebench.testing.llm_server``, models
``agent-*``), and a real mini-swe-agent loop or a real command agent
(tests/data/agents/tiny_agent.py, run inside the sandbox with the openai client) does what
it is told. Each containment script checks that the action ran and was contained, not just
that the verdict failed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_pdebench.testing import REPO, missing, outcomes_from_report, record_dict, write_calibration, write_jsonl
from pytest_pdebench.testing.agent_runs import (PRICE_IN, PRICE_OUT, SECRET, agent_bench, agent_options, command_agent,
                                                run_agent)
from pytest_pdebench.testing.llm_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("dolfinx_available")

MODELS = ("agent-correct", "agent-stale-output", "agent-embed", "agent-network", "agent-env", "agent-snoop", "agent-link",
          "agent-loop", "agent-sleep", "agent-repair")


@pytest.fixture(scope="module")
def server():
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def bench(tmp_path, server):
    return agent_bench(tmp_path, server.url, MODELS)


run = run_agent


AGENTS = {"mini-swe-agent": "mini-swe-agent", "command": command_agent()}


def server_usage(server, model: str) -> tuple[int, int]:
    answered = [r for r in server.for_model(model) if r.get("usage")]
    return (sum(r["usage"]["prompt_tokens"] for r in answered), sum(r["usage"]["completion_tokens"] for r in answered))


@pytest.fixture(params=sorted(AGENTS))
def agent(request):
    if request.param == "mini-swe-agent":
        import importlib.util

        if importlib.util.find_spec("minisweagent") is None:
            missing("mini-swe-agent: pip install 'pytest-pdebench[agents]' (make setup does)")
    return AGENTS[request.param]


def test_an_agent_that_writes_and_tries_a_correct_solver_passes_metered(bench, server, agent):
    before = server_usage(server, "agent-correct")
    verdict, folder = run(bench, "agent-correct", agent)
    assert verdict["outcome"] == "PASS", verdict
    assert verdict["source"].startswith("agent:") and not verdict["source_failure"]
    attempt = folder / "attempt-1"
    requests = [json.loads(line) for line in (attempt / "llm-requests.jsonl").read_text().splitlines()]
    assert [r["status"] for r in requests] == [200, 200, 200]
    after = server_usage(server, "agent-correct")
    tokens_in, tokens_out = after[0] - before[0], after[1] - before[1]
    llm = verdict["llm"]
    assert (llm["input_tokens"], llm["output_tokens"], llm["calls"]) == (tokens_in, tokens_out, 3)
    assert llm["cost_usd"] == pytest.approx((tokens_in * PRICE_IN + tokens_out * PRICE_OUT) / 1e6)
    assert json.loads((attempt / "agent.json").read_text())["status"] == "finished"
    assert (folder / "workspace" / "solution.npz").is_file()
    trail = (attempt / ("trajectory.json" if agent == "mini-swe-agent" else "agent-stdout.txt")).read_text()
    assert "solution.npz" in trail  # the agent's own trial run, recorded
    # the provider got the real key from the proxy (the agent had only its per-item one)
    assert all(r["authorization"] == f"Bearer {SECRET}" for r in server.for_model("agent-correct"))


def test_the_evaluation_judges_the_solver_not_what_the_agent_left_beside_it(bench, agent):
    verdict, folder = run(bench, "agent-stale-output", agent)
    assert (folder / "workspace" / "solution.npz").is_file()  # a correct field, from the agent's trial
    assert verdict["outcome"] == "F-Exec" and not verdict["source_failure"], verdict


def test_values_computed_in_the_folder_and_written_into_the_solver_do_not_pass(bench, agent):
    verdict, folder = run(bench, "agent-embed", agent)
    solver = (folder / "workspace" / "solver.py").read_text()
    assert "b64decode" in solver and "case_spec[" not in solver  # the solver writes stored values only
    trial = json.loads((folder / "workspace" / "case_spec.json").read_text())["case_spec"]["eval_grid"]
    assert (trial["nx"], trial["ny"]) != (20, 20)  # the agent's trial grid is not the evaluation's
    assert verdict["outcome"] == "F-Exec" and "shape" in verdict["reason"], verdict["reason"]


def test_the_agent_has_no_network(bench, agent):
    verdict, folder = run(bench, "agent-network", agent)
    trail = _trail(folder, agent)
    assert "exit=1" in trail and "URLError" in trail, trail[-2000:]
    assert verdict["outcome"] == "F-Exec" and verdict["reason"] == "the agent finished without leaving solver.py"


def test_the_agent_never_sees_the_provider_key(bench, agent):
    verdict, folder = run(bench, "agent-env", agent)
    trail = _trail(folder, agent)
    assert "ENV-END" in trail and "HOME=" in trail, trail[-2000:]  # env did run
    assert SECRET not in trail and "PDEBENCH_TEST_KEY" not in trail
    if agent != "mini-swe-agent":  # the command agent's own endpoint and per-item key
        assert "OPENAI_BASE_URL=http://127.0.0.1:" in trail and "OPENAI_API_KEY=pdebench-item-" in trail


def test_the_agent_cannot_read_what_only_the_evaluator_may(bench, agent):
    assert (REPO / "cases" / "suite.jsonl").is_file()  # there to be found, on the host
    verdict, folder = run(bench, "agent-snoop", agent)
    trail = _trail(folder, agent)
    assert "snoop=2" in trail and "find-done" in trail, trail[-2000:]  # ls found nothing; find ran
    assert "cases/suite.jsonl" not in trail and "No such file" in trail


def test_a_link_the_agent_leaves_is_not_followed_on_the_host(bench, agent):
    verdict, folder = run(bench, "agent-link", agent)
    assert (folder / "workspace" / "_cases.py").is_symlink()
    assert verdict["outcome"] == "F-Exec" and "_cases.py is a symbolic link" in verdict["reason"], verdict


def test_an_agent_out_of_steps_is_an_agent_failure(bench, agent):
    extra = ["--pde-agent-steps=4"]
    if agent != "mini-swe-agent":
        agent = command_agent(steps=4)
    verdict, folder = run(bench, "agent-loop", agent, *extra)
    assert verdict["outcome"] == "F-Exec" and verdict["source_failure"], verdict
    status = json.loads((folder / "attempt-1" / "agent.json").read_text())["status"]
    assert status == ("step-limit" if agent == "mini-swe-agent" else "crashed")
    assert verdict["llm"]["calls"] == 4
    # the report counts it apart from the solver failures
    done = subprocess.run([str(Path(sys.executable).with_name("pdebench")), "report", str(bench / "report-agent-loop.json"),
                           "--out", str(bench / "report"), "--no-figures"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    page = (bench / "report" / "report.md").read_text()
    assert "1 agent failures" in page and "agent failure" in page.split("F-Exec reasons")[1]
    name = "mini-swe-agent (agent-loop)" if agent == "mini-swe-agent" else "tiny_agent.py (agent-loop)"
    assert f"| {name} " in page


def test_the_item_cost_limit_stops_the_model_calls(bench, server, agent):
    verdict, folder = run(bench, "agent-loop", agent, "--pde-agent-cost=0.02")
    assert verdict["outcome"] == "F-Exec" and verdict["source_failure"], verdict
    assert verdict["reason"].startswith("agent refused without leaving solver.py"), verdict["reason"]
    requests = [json.loads(line) for line in (folder / "attempt-1" / "llm-requests.jsonl").read_text().splitlines()]
    answered = [r for r in requests if r["status"] == 200]
    ending = json.loads((folder / "attempt-1" / "agent.json").read_text())
    assert ending["status"] == "refused" and "cost limit" in ending["detail"], ending
    if agent != "mini-swe-agent":  # the command agent asked once more and was told no (mini-swe-agent asks first)
        assert requests[-1]["status"] == 403 and "cost limit" in requests[-1]["refused"]
    # each call is priced before the next: the limit is passed by the last answered call at most
    assert sum(r["cost_usd"] for r in answered[:-1]) < 0.02 <= verdict["llm"]["cost_usd"]


def test_the_run_budget_stops_the_agent_and_skips_the_items_after_it(bench, server):
    records = [record_dict(new_id="toy_a", nx=20, ny=20), record_dict(new_id="toy_b", nx=24, ny=24)]
    write_jsonl(bench / "cases.jsonl", records)
    write_calibration(bench / "calibrations", "dolfinx", records, 1e-4, 5.0)
    report = bench / "report-budget.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx", "-rs",
         f"--pde-cases={bench / 'cases.jsonl'}", "--pde-model=agent-loop", f"--pde-models={bench / 'models.toml'}",
         *agent_options(command_agent()), f"--pde-calibrations={bench / 'calibrations'}", "--pde-budget=0.02",
         f"--pde-llm-cache={bench / 'cache'}",
         f"--pde-output={bench / 'out'}", "--json-report", f"--json-report-file={report}"],
        cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "PDEBENCH_TEST_KEY": SECRET})
    outcomes = outcomes_from_report(report)
    assert list(outcomes) == ["toy_a"], done.stdout[-3000:]  # toy_b never started
    assert outcomes["toy_a"]["source_failure"] and "budget" in outcomes["toy_a"]["reason"]
    assert "not run: budget reached" in done.stdout


def test_resume_replays_finished_agents_without_new_calls(bench, server, agent):
    verdict, folder = run(bench, "agent-repair", agent, "--pde-attempts=2")
    assert verdict["outcome"] == "PASS"
    calls = len(server.for_model("agent-repair"))
    again, _ = run(bench, "agent-repair", agent, "--pde-attempts=2", "--pde-resume")
    assert len(server.for_model("agent-repair")) == calls  # nothing asked again
    assert again["outcome"] == "PASS" and all(a["resumed"] for a in again["llm"]["attempts"])
    assert again["llm"]["cost_usd"] == verdict["llm"]["cost_usd"]  # what the item cost, once
    fresh, _ = run(bench, "agent-repair", agent, "--pde-attempts=2")  # without --pde-resume: the agent again
    assert fresh["outcome"] == "PASS" and len(server.for_model("agent-repair")) > calls


def test_the_proxy_forwards_only_with_its_own_token_and_replaces_the_model(server, tmp_path):
    from openai import AuthenticationError, OpenAI

    from pytest_pdebench.sources.agents.proxy import MeteringProxy
    from pytest_pdebench.llm.registry import ModelSpec

    spec = ModelSpec(name="agent-correct", model="agent-correct", base_url=server.url,
                     input_usd_per_mtok=PRICE_IN, output_usd_per_mtok=PRICE_OUT)
    with MeteringProxy(spec, SECRET, tmp_path / "requests.jsonl") as proxy:
        with pytest.raises(AuthenticationError):
            OpenAI(base_url=proxy.address, api_key=SECRET, max_retries=0).chat.completions.create(
                model="agent-correct", messages=[{"role": "user", "content": "hi"}])
        answer = OpenAI(base_url=proxy.address, api_key=proxy.token, max_retries=0).chat.completions.create(
            model="some-pricier-model", messages=[{"role": "user", "content": "hi"}])
    assert answer.model == "agent-correct" and "mswea_bash_command" in answer.choices[0].message.content
    assert proxy.meter.calls == 1 and proxy.meter.input_tokens == answer.usage.prompt_tokens
    assert proxy.meter.cost_usd == pytest.approx(spec.cost(answer.usage.prompt_tokens, answer.usage.completion_tokens))


def test_a_command_past_its_time_is_stopped(bench, agent):
    if agent == "mini-swe-agent":  # one command over its limit: the agent is told and goes on
        verdict, folder = run(bench, "agent-sleep", agent, "--pde-agent-action-timeout=3")
        trail = _trail(folder, agent)
        assert "stopped after 3 s" in trail and "42-awake" not in trail
        assert verdict["reason"] == "the agent finished without leaving solver.py"
    else:  # the agent itself over its wall-clock limit: killed, an agent failure
        verdict, folder = run(bench, "agent-sleep", agent, "--pde-agent-timeout=8")
        assert verdict["source_failure"] and "timeout" in verdict["reason"], verdict
        assert "42-awake" not in _trail(folder, agent)


def test_feedback_goes_to_the_agent_as_a_new_task_on_the_same_folder(bench, agent):
    verdict, folder = run(bench, "agent-repair", agent, "--pde-attempts=2")
    assert verdict["outcome"] == "PASS", verdict
    first, second = verdict["llm"]["attempts"]
    assert first["outcome"] == "F-Exec" and second["outcome"] == "PASS"
    task = (folder / "attempt-2" / "task.md").read_text()
    assert "THE EVALUATOR'S VERDICT" in task and "singular matrix" in task


def _trail(folder: Path, agent: str) -> str:
    attempt = folder / "attempt-1"
    if agent == "mini-swe-agent":
        return (attempt / "trajectory.json").read_text()
    return (attempt / "agent-stdout.txt").read_text() + (attempt / "agent-stderr.txt").read_text()
