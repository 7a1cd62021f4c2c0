"""Submissions written by an LLM (``--pde-model``): prompt, call, extract, evaluate, and
up to ``--pde-attempts`` repairs with feedback (paper, Section 4.3 and Appendix L.2).

Audit trail per item, under ``<output>/<library>/<case_id>/``:

    attempt-<k>/prompt.md        the exact prompt sent
    attempt-<k>/response.txt     the raw answer
    attempt-<k>/solver.py|.cpp   the extracted code (absent: no code in the answer)
    attempt-<k>/llm.json         model id, tokens, cost, request/response hashes, time,
                                 retries, whether it came from the cache
    attempt-<k>/verdict.json     the gates' verdict of that attempt (and its run files)
    verdict.json                 the final attempt's verdict, with every attempt summarized
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .cases import CaseRecord, agent_view
from .llm.cache import ResponseCache, SpendLedger
from .llm.client import Completion, ModelCallFailed, ModelClient
from .llm.extract import extract_code
from .llm.registry import ModelSpec
from .prompts import feedback_of, feedback_prompt, single_shot_prompt

NO_CODE = "no code in response"


class NotRun(Exception):
    """The item was not attempted (budget reached, or not in the cache under --pde-replay)."""


@dataclass
class ModelSource:
    spec: ModelSpec
    cache: ResponseCache
    ledger: SpendLedger
    client: ModelClient | None  # None under --pde-replay
    attempts: int = 1
    prompt_mode: str = "single"  # or "template"
    guides_dir: Path | None = None
    calls: dict = field(default_factory=lambda: {"new": 0, "cached": 0})

    @property
    def label(self) -> str:
        return f"model:{self.spec.name}"

    def completion(self, prompt: str, attempt: int) -> tuple[Completion, bool]:
        """(completion, from_cache). Raises NotRun or ModelCallFailed."""
        cached = self.cache.get(self.spec, prompt, attempt)
        if cached is not None:
            return cached, True
        if self.client is None:
            raise NotRun("no cached response for this prompt (--pde-replay runs from the cache only)")
        if self.ledger.exhausted():
            raise NotRun(f"budget reached: ${self.ledger.spent():.2f} of ${self.ledger.budget:.2f} spent "
                         f"(--pde-budget); no new model calls")
        completion = self.client.complete(prompt)
        self.cache.put(self.spec, prompt, attempt, completion)
        self.ledger.add(self.spec.cost(completion.input_tokens, completion.output_tokens))
        return completion, False

    def base_prompt(self, record: CaseRecord, library: str) -> str:
        from .scaffolds import scaffold_for

        view = agent_view(record, library)
        scaffold = scaffold_for(view) if self.prompt_mode == "template" else None
        return single_shot_prompt(view, record.evaluation_config.timeout_sec, self.guides_dir, scaffold)


def model_source_from_options(opt, rootdir: Path, is_controller: bool) -> ModelSource:
    """The ModelSource of ``--pde-model`` and friends; a bad name, file or missing key is
    a UsageError before any case runs."""
    import pytest

    from .llm.registry import RegistryError, api_key, resolve_model

    if opt.pde_attempts < 1:
        raise pytest.UsageError("--pde-attempts must be at least 1")
    try:
        spec = resolve_model(opt.pde_model, opt.pde_base_url, opt.pde_api_key_env, opt.pde_models)
        client = None
        if not opt.pde_replay:
            client = ModelClient(spec, api_key(spec), timeout=opt.pde_llm_timeout, retries=opt.pde_llm_retries,
                                 backoff=opt.pde_llm_backoff)
    except RegistryError as exc:
        raise pytest.UsageError(str(exc)) from None
    if opt.pde_prompt == "template":
        from .scaffolds import SUPPORTED

        wanted = [name for value in (opt.pde_library or []) for name in value.split(",") if name.strip()]
        if not wanted or set(wanted) - set(SUPPORTED):
            raise pytest.UsageError(f"--pde-prompt=template has scaffolds for {', '.join(SUPPORTED)} only: pass "
                                    f"--pde-library={SUPPORTED[0]}")
    reports = rootdir / "reports"
    cache = ResponseCache(Path(opt.pde_llm_cache) if opt.pde_llm_cache else reports / "llm-cache")
    ledger = SpendLedger(cache.directory / f"spend-{spec.slug}.json", opt.pde_budget)
    if is_controller:
        ledger.reset()  # the budget is per run; workers share the file
    guides = Path(opt.pde_guides) if opt.pde_guides else rootdir / "guides"
    return ModelSource(spec, cache, ledger, client, attempts=opt.pde_attempts, prompt_mode=opt.pde_prompt,
                       guides_dir=guides if guides.is_dir() else None)


def run_with_model(source: ModelSource, record: CaseRecord, library: str, item_dir: Path, evaluate_attempt):
    """Attempts 1..N; ``evaluate_attempt(submission, attempt_dir)`` runs the gates and
    returns a Verdict. Returns the final Verdict with ``llm`` filled in."""
    from .evaluation import Verdict
    from .submissions import Submission

    suffix = ".cpp" if library == "dealii" else ".py"
    language = "cpp" if library == "dealii" else "python"
    base = source.base_prompt(record, library)
    prompt, history, verdict = base, [], None
    for attempt in range(1, source.attempts + 1):
        attempt_dir = item_dir / f"attempt-{attempt}"
        try:
            completion, cached = source.completion(prompt, attempt)
        except ModelCallFailed as exc:
            verdict = Verdict.for_item(record, library, source.label, reason=f"model call failed: {exc}")
            _write_attempt(attempt_dir, prompt, None, None, verdict)
            history.append({"attempt": attempt, "outcome": verdict.outcome, "reason": verdict.reason})
            break
        cost = source.spec.cost(completion.input_tokens, completion.output_tokens)
        code = extract_code(completion.text, language)
        if code is None:
            verdict = Verdict.for_item(record, library, source.label, reason=NO_CODE, artifacts=str(attempt_dir))
        else:  # the gates' run folder is the attempt folder (evaluate starts it afresh)
            solver_name = f"solver{suffix}"
            verdict = evaluate_attempt(Submission(solver_name, {solver_name: code.encode()},
                                                  str(attempt_dir / solver_name)), attempt_dir)
        usage = {**completion.to_dict(), "text": None, "cost_usd": cost, "cached": cached,
                 "registry_name": source.spec.name, "attempt": attempt}
        _write_attempt(attempt_dir, prompt, completion.text, usage, verdict if code is None else None)
        history.append({"attempt": attempt, "outcome": verdict.outcome, "reason": verdict.reason,
                        "error": verdict.error, "t_agent": verdict.t_agent, "cached": cached,
                        "input_tokens": completion.input_tokens, "output_tokens": completion.output_tokens,
                        "cost_usd": cost, "retries": completion.retries, "model": completion.model})
        if verdict.passed or attempt == source.attempts:
            break
        # a compile error is told with the compiler's output, a failed run with its stderr
        stderr_file = attempt_dir / ("compile.log" if verdict.reason.startswith("compile") else "stderr.txt")
        stderr = stderr_file.read_text(errors="replace") if stderr_file.is_file() else ""
        prompt = feedback_prompt(attempt + 1, code, feedback_of(verdict.to_dict(), stderr), base)
    verdict.source = source.label
    verdict.llm = {
        "model": source.spec.name, "model_id": source.spec.model, "base_url": source.spec.base_url,
        "prompt_mode": source.prompt_mode,
        "attempts": history, "calls": sum(1 for h in history if "cached" in h and not h["cached"]),
        "cache_hits": sum(1 for h in history if h.get("cached")),
        "input_tokens": sum(h.get("input_tokens", 0) for h in history),
        "output_tokens": sum(h.get("output_tokens", 0) for h in history),
        "cost_usd": sum(h.get("cost_usd", 0.0) for h in history if not h.get("cached")),
    }
    item_dir.mkdir(parents=True, exist_ok=True)
    (item_dir / "verdict.json").write_text(json.dumps(verdict.to_dict(), indent=1, default=str) + "\n")
    return verdict


def _write_attempt(attempt_dir: Path, prompt: str, response: str | None, usage: dict | None, verdict=None) -> None:
    """The attempt's audit files (after its run: the gates start their folder afresh)."""
    attempt_dir.mkdir(parents=True, exist_ok=True)
    (attempt_dir / "prompt.md").write_text(prompt)
    if response is not None:
        (attempt_dir / "response.txt").write_text(response)
    if usage is not None:
        (attempt_dir / "llm.json").write_text(json.dumps(usage, indent=1) + "\n")
    if verdict is not None:
        (attempt_dir / "verdict.json").write_text(json.dumps(verdict.to_dict(), indent=1, default=str) + "\n")
