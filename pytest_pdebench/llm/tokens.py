"""Prompt tokens and what a run would cost, before making any call.

Tokens are counted with tiktoken's cl100k_base when it can load that encoding (it is not
a dependency: the encoding file must be available offline), otherwise estimated as
characters / 4. Providers tokenize differently, so either is an estimate of their count.
Output tokens cannot be measured before the calls: the estimate uses the paper's mean
output per call (Table 10: tokens / 1,468 calls) for its five models, else 2,000.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from tabulate import tabulate

from .registry import load_registry, resolve_model

# mean output tokens per single-shot call in the paper's Table 10
PAPER_OUTPUT_PER_CALL = {
    "gpt-5.4": 2654991 / 1468,
    "opus-4.7": 2119274 / 1468,
    "gemini-3.1-pro": 2036612 / 1468,
    "qwen3.6-plus": 2493845 / 1468,
    "deepseek-v3.2": 3243411 / 1468,
}
DEFAULT_OUTPUT_PER_CALL = 2000


@lru_cache(maxsize=1)
def _encoding():
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # not installed, or the encoding file cannot be fetched offline
        return None


def tokenizer_name() -> str:
    return "tiktoken cl100k_base" if _encoding() else "characters / 4"


def count_tokens(text: str) -> int:
    encoding = _encoding()
    return len(encoding.encode(text)) if encoding else (len(text) + 3) // 4


def run_cost(prompts: Iterable[tuple[str, str]]) -> str:
    """``pdebench prompt-cost``: the input tokens of the (library, prompt) pairs of a
    single-shot run, per library, and what the run would cost with each model of the
    registry (input only, and with the output estimated per call), before making any call."""
    per_library: dict[str, list[int]] = {}
    for library, prompt in prompts:
        per_library.setdefault(library, []).append(count_tokens(prompt))
    tokens, calls = sum(map(sum, per_library.values())), sum(map(len, per_library.values()))
    rows = []
    for name in load_registry():
        spec = resolve_model(name)
        out_per_call = PAPER_OUTPUT_PER_CALL.get(name, DEFAULT_OUTPUT_PER_CALL)
        rows.append(
            [
                name,
                spec.model,
                spec.input_usd_per_mtok,
                spec.output_usd_per_mtok,
                round(out_per_call),
                f"{spec.cost(tokens, 0):.2f}",
                f"{spec.cost(tokens, round(out_per_call * calls)):.2f}",
            ]
        )
    per_library_table = tabulate(
        [
            [library, len(c), sum(c), round(sum(c) / len(c)), min(c), max(c)]
            for library, c in sorted(per_library.items())
        ],
        headers=["library", "calls", "input tokens", "mean", "min", "max"],
    )
    return (
        f"prompt tokens ({tokenizer_name()}):\n{per_library_table}\n"
        f"\nsingle-shot run of {calls} items, output per call from the paper's Table 10:\n"
        + tabulate(rows, headers=["model", "model id", "$/M in", "$/M out", "out/call", "input $", "total $"])
    )
