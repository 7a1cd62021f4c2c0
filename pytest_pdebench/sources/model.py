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

import pytest

from ..bundled import bundled
from ..cases import CaseRecord, agent_view
from ..llm.cache import ResponseCache, SpendLedger
from ..llm.client import Completion, EndpointFailed, ModelCallFailed, ModelClient
from ..llm.extract import extract_code
from ..llm.registry import ModelSpec, RegistryError, api_key, resolve_model
from ..prompts import feedback_prompt, single_shot_prompt
from ..scaffolds import SUPPORTED, scaffold_for
from . import Draft, Feedback, ItemView, NotRun, Submission
from .agents import agent_source

NO_CODE = "no code in response"


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
    attempt_folders = True

    @property
    def label(self) -> str:
        return f"model:{self.spec.name}"

    @property
    def run_label(self) -> str:  # names the run's output folder
        return self.spec.slug

    def draft(self, item: ItemView, attempt: int, feedback: Feedback | None) -> Draft:
        """Prompt (the repair prompt after a failed attempt), call, extract."""
        record, library = item.record, item.library
        base = self.base_prompt(record, library)
        prompt = base if feedback is None else feedback_prompt(attempt, feedback.code, feedback.facts, base)
        try:
            completion, cached = self.completion(prompt, attempt)
        except EndpointFailed as exc:  # the endpoint's failure, not the model's: like a spent budget
            raise NotRun(f"the model's endpoint failed: {exc}") from None
        except ModelCallFailed as exc:
            return Draft(None, reason=f"model call failed: {exc}", audit={"prompt.md": prompt}, final=True)
        cost = self.spec.cost(completion.input_tokens, completion.output_tokens)
        usage = {
            "cached": cached,
            "input_tokens": completion.input_tokens,
            "output_tokens": completion.output_tokens,
            "cost_usd": cost,
            "retries": completion.retries,
            "model": completion.model,
        }
        record_of_call = {
            **completion.to_dict(),
            "text": None,
            "cost_usd": cost,
            "cached": cached,
            "registry_name": self.spec.name,
            "attempt": attempt,
        }
        audit = {
            "prompt.md": prompt,
            "response.txt": completion.text,
            "llm.json": json.dumps(record_of_call, indent=1) + "\n",
        }
        code = extract_code(completion.text, "cpp" if library == "dealii" else "python")
        if code is None:
            return Draft(None, reason=NO_CODE, usage=usage, audit=audit)
        solver_name = "solver.cpp" if library == "dealii" else "solver.py"
        submission = Submission(solver_name, {solver_name: code.encode()}, str(item.attempt_dir(attempt) / solver_name))
        return Draft(submission, usage=usage, audit=audit)

    def summary(self, history: list[dict]) -> dict:
        return {
            "model": self.spec.name,
            "model_id": self.spec.model,
            "base_url": self.spec.base_url,
            "prompt_mode": self.prompt_mode,
            "attempts": history,
            "calls": sum(1 for h in history if "cached" in h and not h["cached"]),
            "cache_hits": sum(1 for h in history if h.get("cached")),
            "input_tokens": sum(h.get("input_tokens", 0) for h in history),
            "output_tokens": sum(h.get("output_tokens", 0) for h in history),
            "cost_usd": sum(h.get("cost_usd", 0.0) for h in history if not h.get("cached")),
        }

    def completion(self, prompt: str, attempt: int) -> tuple[Completion, bool]:
        """(completion, from_cache). Raises NotRun or ModelCallFailed."""
        cached = self.cache.get(self.spec, prompt, attempt)
        if cached is not None:
            return cached, True
        if self.client is None:
            raise NotRun("no cached response for this prompt (--pde-replay runs from the cache only)")
        if self.ledger.exhausted():
            raise NotRun(
                f"budget reached: ${self.ledger.spent():.2f} of ${self.ledger.budget:.2f} spent "
                f"(--pde-budget); no new model calls"
            )
        completion = self.client.complete(prompt)
        self.cache.put(self.spec, prompt, attempt, completion)
        self.ledger.add(self.spec.cost(completion.input_tokens, completion.output_tokens))
        return completion, False

    def base_prompt(self, record: CaseRecord, library: str) -> str:

        view = agent_view(record, library)
        scaffold = scaffold_for(view) if self.prompt_mode == "template" else None
        return single_shot_prompt(view, record.evaluation_config.timeout_sec, self.guides_dir, scaffold)


def model_source_from_options(opt, rootdir: Path, is_controller: bool, settings=None):
    """The source of ``--pde-model`` and friends (a code agent's with ``--pde-agent``); a
    bad name, file or missing key is a UsageError before any case runs."""

    if opt.pde_attempts < 1:
        raise pytest.UsageError("--pde-attempts must be at least 1")
    try:
        spec = resolve_model(opt.pde_model, opt.pde_base_url, opt.pde_api_key_env, opt.pde_models)
        client = None
        if not opt.pde_replay:
            client = ModelClient(
                spec,
                api_key(spec),
                timeout=opt.pde_llm_timeout,
                retries=opt.pde_llm_retries,
                backoff=opt.pde_llm_backoff,
            )
    except RegistryError as exc:
        raise pytest.UsageError(str(exc)) from None
    if opt.pde_prompt == "template":
        wanted = [name for value in (opt.pde_library or []) for name in value.split(",") if name.strip()]
        if not wanted or set(wanted) - set(SUPPORTED):
            raise pytest.UsageError(
                f"--pde-prompt=template has scaffolds for {', '.join(SUPPORTED)} only: pass "
                f"--pde-library={SUPPORTED[0]}"
            )
    reports = rootdir / "reports"
    cache = ResponseCache(Path(opt.pde_llm_cache) if opt.pde_llm_cache else reports / "llm-cache")
    ledger = SpendLedger(cache.directory / f"spend-{spec.slug}.json", opt.pde_budget)
    if is_controller:
        ledger.reset()  # the budget is per run; workers share the file
    guides = Path(opt.pde_guides) if opt.pde_guides else bundled("guides", rootdir)
    if opt.pde_guides and not guides.is_dir():  # a prompt without its guide is another benchmark
        raise pytest.UsageError(f"--pde-guides: no directory at {guides}")
    if opt.pde_agent:
        if opt.pde_replay:
            raise pytest.UsageError("--pde-replay replays single completions: agents are not cached")
        return agent_source(opt, spec, api_key(spec), ledger, settings, guides if guides.is_dir() else None)
    return ModelSource(
        spec,
        cache,
        ledger,
        client,
        attempts=opt.pde_attempts,
        prompt_mode=opt.pde_prompt,
        guides_dir=guides if guides.is_dir() else None,
    )
