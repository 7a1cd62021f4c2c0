"""--pde-model end to end over real HTTP: a scripted OpenAI-compatible server on
127.0.0.1, the real `openai` client, the real sandbox and gates."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pytest_pdebench.testing import REPO, outcomes_from_report, record_dict, write_calibration, write_jsonl
from pytest_pdebench.testing.llm_server import ScriptedServer

pytestmark = pytest.mark.usefixtures("dolfinx_available")

E_BASE, T_BASE = 1e-4, 5.0


@pytest.fixture(scope="module")
def server():
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def bench(tmp_path):
    """Two toy cases (exact solution sin(pi x) sin(pi y)) with a calibration; their grids
    differ, so their prompts do."""
    records = [record_dict(new_id="toy_a", nx=20, ny=20), record_dict(new_id="toy_b", nx=24, ny=24)]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", "dolfinx", records, E_BASE, T_BASE)
    return tmp_path


def run(bench, server, model, *extra, key="test-key", cases="cases.jsonl", library="dolfinx"):
    report = bench / f"report-{model}.json"
    env = {k: v for k, v in os.environ.items() if k != "PDEBENCH_TEST_KEY"}
    if key:
        env["PDEBENCH_TEST_KEY"] = key
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--pde-library={library}",
         f"--pde-cases={bench / cases}", f"--pde-model={model}", f"--pde-base-url={server.url}",
         "--pde-api-key-env=PDEBENCH_TEST_KEY", f"--pde-calibrations={bench / 'calibrations'}",
         f"--pde-output={bench / 'out'}", f"--pde-llm-cache={bench / 'cache'}", "--pde-llm-backoff=0.01",
         "--json-report", f"--json-report-file={report}", "-rs", *extra],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    outcomes = outcomes_from_report(report) if report.exists() else {}
    return done, outcomes


def attempt_usage(bench, case_id, attempt=1):
    return json.loads((bench / "out" / "dolfinx" / case_id / f"attempt-{attempt}" / "llm.json").read_text())


def test_correct_answer_passes_and_is_audited(bench, server):
    done, outcomes = run(bench, server, "scripted-correct", "-k", "toy_a")
    verdict = outcomes["toy_a"]
    assert verdict["outcome"] == "PASS", done.stdout[-2000:]
    assert verdict["llm"]["calls"] == 1 and verdict["llm"]["cache_hits"] == 0
    folder = bench / "out" / "dolfinx" / "toy_a" / "attempt-1"
    prompt = (folder / "prompt.md").read_text()
    assert "def solve(case_spec" in (folder / "solver.py").read_text()
    assert "print('not the solver')" not in (folder / "solver.py").read_text()  # the block with the entry point
    usage = attempt_usage(bench, "toy_a")
    assert usage["input_tokens"] == len(prompt) // 4 and usage["retries"] == 0 and usage["cached"] is False
    assert len(usage["request_sha256"]) == 64 and usage["model"] == "scripted-correct"
    sent = server.for_model("scripted-correct")[-1]
    assert sent["prompt"] == prompt and sent["temperature"] == 0  # temperature 0 unless the registry says not
    assert sent["authorization"] == "Bearer test-key"
    assert "API calls" in done.stdout and "1 API calls, 0 from the cache" in done.stdout


def test_rerun_uses_the_cache_and_replay_runs_offline(bench, server):
    run(bench, server, "scripted-correct", "-k", "toy_a")
    before = len(server.for_model("scripted-correct"))
    done, outcomes = run(bench, server, "scripted-correct", "-k", "toy_a")
    assert outcomes["toy_a"]["outcome"] == "PASS" and outcomes["toy_a"]["llm"]["cache_hits"] == 1
    assert len(server.for_model("scripted-correct")) == before, "a cached item must not call the API"
    done, outcomes = run(bench, server, "scripted-correct", "--pde-replay", key=None)  # no key needed
    assert outcomes["toy_a"]["outcome"] == "PASS"
    assert "toy_b" not in outcomes and "not run: no cached response" in done.stdout  # skipped, not failed
    assert len(server.for_model("scripted-correct")) == before
    assert done.returncode == 1, done.stdout[-2000:]  # an item selected and not judged: not a success


@pytest.mark.parametrize("model, outcome, reason", [
    ("scripted-broken", "F-Exec", "ModuleNotFoundError"),
    ("scripted-prose", "F-Exec", "no code in response"),
    ("scripted-hang", "F-Exec", "model call failed: APITimeoutError after 2 tries"),
])
def test_failures_are_f_exec_with_the_reason(bench, server, model, outcome, reason):
    done, outcomes = run(bench, server, model, "-k", "toy_a", "--pde-llm-timeout=1", "--pde-llm-retries=1")
    verdict = outcomes["toy_a"]
    assert verdict["outcome"] == outcome and reason in verdict["reason"], (verdict["reason"], done.stdout[-2000:])


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("model, words", [
    ("scripted-503", "InternalServerError after 2 tries at http://127.0.0.1"),
    ("scripted-401", "HTTP 401 from http://127.0.0.1"),
    ("scripted-no-such-model", "HTTP 404 from http://127.0.0.1"),
    ("refused", "APIConnectionError after 2 tries at http://127.0.0.1"),
])
def test_a_failing_endpoint_is_not_run_never_the_models_failure(bench, server, model, words):
    """Connection refused, 5xx after the retries, a refused key, an unknown model: the item is
    `not run` (out of the pass rates, the run's status 1) with the URL and what to check."""
    extra = [f"--pde-base-url=http://127.0.0.1:{_closed_port()}/v1"] if model == "refused" else []
    done, outcomes = run(bench, server, "scripted-correct" if model == "refused" else model,
                         "-k", "toy_a", "--pde-llm-retries=1", *extra)
    assert "toy_a" not in outcomes, outcomes  # no verdict: nothing was judged
    assert "not run: the model's endpoint failed: " + words in done.stdout, done.stdout[-2000:]
    assert done.returncode == 1


def test_a_local_server_that_takes_any_key_needs_none_when_its_entry_says_so(bench, server):
    """vLLM, llama.cpp's server and Ollama take any key: `needs_key = false` in the entry, and no
    variable set; without it, the run stops before any case, saying how."""
    models = bench / "models.toml"
    models.write_text(f'[models."local-correct"]\nmodel = "scripted-correct"\nbase_url = "{server.url}"\n'
                      'api_key_env = "PDEBENCH_NO_SUCH_KEY"\nneeds_key = false\n')
    done, outcomes = run(bench, server, "local-correct", "-k", "toy_a", f"--pde-models={models}",
                         "--pde-api-key-env=PDEBENCH_NO_SUCH_KEY", key=None)
    assert outcomes["toy_a"]["outcome"] == "PASS", done.stdout[-2000:]
    assert server.for_model("scripted-correct")[-1]["authorization"] == "Bearer no-key-needed"
    models.write_text(models.read_text().replace("needs_key = false\n", ""))
    done, _ = run(bench, server, "local-correct", "-k", "toy_a", f"--pde-models={models}",
                  "--pde-api-key-env=PDEBENCH_NO_SUCH_KEY", key=None)
    assert done.returncode == 4 and "needs_key = false" in done.stdout + done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("model", ["scripted-429", "scripted-500"])
def test_rate_limits_and_server_errors_are_retried(bench, server, model):
    done, outcomes = run(bench, server, model, "-k", "toy_a")
    assert outcomes["toy_a"]["outcome"] == "PASS", done.stdout[-2000:]
    statuses = [r["status"] for r in server.for_model(model)]
    assert statuses[:2] == [int(model[-3:]), 200]
    assert attempt_usage(bench, "toy_a")["retries"] == 1


def test_feedback_attempt_repairs_and_keeps_every_attempt(bench, server):
    done, outcomes = run(bench, server, "scripted-repair", "-k", "toy_a", "--pde-attempts=3")
    verdict = outcomes["toy_a"]
    assert verdict["outcome"] == "PASS", done.stdout[-2000:]
    assert [a["outcome"] for a in verdict["llm"]["attempts"]] == ["F-Exec", "PASS"]
    second = (bench / "out" / "dolfinx" / "toy_a" / "attempt-2" / "prompt.md").read_text()
    assert second.startswith("=" * 70) and "ATTEMPT 2" in second
    assert "raise RuntimeError('singular matrix')" in second  # the previous code
    assert "RuntimeError: singular matrix" in second  # its stderr
    first = (bench / "out" / "dolfinx" / "toy_a" / "attempt-1" / "prompt.md").read_text()
    assert second.endswith(first), "the whole task follows the feedback"
    for hidden in ("tau_acc", "e_base", "t_base", "tau_time", str(E_BASE), "calibration"):
        assert hidden not in second.split("THE TASK (unchanged)")[0]


def test_budget_stops_new_calls(bench, server):
    registry = bench / "models.toml"
    registry.write_text('[models."scripted-correct"]\nmodel = "scripted-correct"\nbase_url = "http://unused"\n'
                        'input_usd_per_mtok = 1000000.0\noutput_usd_per_mtok = 0.0\n')
    done, outcomes = run(bench, server, "scripted-correct", f"--pde-models={registry}", "--pde-budget=0.5")
    assert len(outcomes) == 1, done.stdout[-2000:]  # the first call spends past the budget
    assert "not run: budget reached" in done.stdout and done.returncode == 1  # not everything judged


def test_bad_model_options_fail_before_any_case(bench, server):
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-model=no-such-model",
                           f"--pde-cases={bench / 'cases.jsonl'}"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 4 and "unknown model 'no-such-model'" in done.stderr and "opus-4.7" in done.stderr
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-model=opus-4.7",
                           f"--pde-cases={bench / 'cases.jsonl'}"], cwd=REPO, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"})
    assert done.returncode == 4 and "set the API key in $ANTHROPIC_API_KEY" in done.stderr
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-model=opus-4.7",
                           f"--pde-cases={bench / 'cases.jsonl'}", "--pde-guides=/no/guides"], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "ANTHROPIC_API_KEY": "unused"})
    assert done.returncode == 4 and "--pde-guides: no directory at /no/guides" in done.stderr  # not a guideless prompt


def test_template_mode_sends_the_scaffold(bench, server):
    done, outcomes = run(bench, server, "scripted-correct", "-k", "toy_a", "--pde-prompt=template")
    assert outcomes["toy_a"]["outcome"] == "PASS", done.stdout[-2000:]
    prompt = server.for_model("scripted-correct")[-1]["prompt"]
    assert "# Starting point" in prompt and "def solve_problem(case_spec, msh):" in prompt


@pytest.mark.usefixtures("dealii_available")
def test_cpp_compile_error_is_fed_back_and_repaired_on_dealii(bench, server):
    write_calibration(bench / "calibrations", "dealii", [record_dict(new_id="toy_a", nx=20, ny=20)], E_BASE, T_BASE)
    done, outcomes = run(bench, server, "scripted-cpp-repair", "-k", "toy_a", "--pde-attempts=3",
                         library="dealii")
    verdict = outcomes["toy_a"]
    assert verdict["outcome"] == "PASS", done.stdout[-2000:]
    first, second = verdict["llm"]["attempts"][:2]
    assert first["outcome"] == "F-Exec" and first["reason"].startswith("compile error: solver.cpp:1:")
    folder = bench / "out" / "dealii" / "toy_a"
    assert "int main" in (folder / "attempt-1" / "solver.cpp").read_text()
    feedback = (folder / "attempt-2" / "prompt.md").read_text()
    assert "undefined_symbol_here" in feedback and "solution_grid.bin" in feedback  # compiler output, contract
    assert second["outcome"] == "PASS" and len(verdict["llm"]["attempts"]) == 2
