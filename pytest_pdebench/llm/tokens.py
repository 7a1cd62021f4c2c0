"""Prompt tokens and what a run would cost, before making any call.

Tokens are counted with tiktoken's cl100k_base when it can load that encoding (it is not
a dependency: the encoding file must be available offline), otherwise estimated as
characters / 4. Providers tokenize differently, so either is an estimate of their count.
Output tokens cannot be measured before the calls: the estimate uses the paper's mean
output per call (Table 10: tokens / 1,468 calls) for its five models, else 2,000.
"""

from __future__ import annotations

from functools import lru_cache

# mean output tokens per single-shot call in the paper's Table 10
PAPER_OUTPUT_PER_CALL = {"gpt-5.4": 2654991 / 1468, "opus-4.7": 2119274 / 1468, "gemini-3.1-pro": 2036612 / 1468,
                         "qwen3.6-plus": 2493845 / 1468, "deepseek-v3.2": 3243411 / 1468}
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
