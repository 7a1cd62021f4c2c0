"""The solver in a model's answer: the fenced code block that holds the entry point.

Several blocks (an explanation with snippets, then the program): the block with the
entry point (``def solve(`` for Python, ``int main(`` for C++), the longest if several
have it, else the longest block. No fenced block at all: no code (F-Exec "no code in
response"); prose is never run as a program.
"""

from __future__ import annotations

import re

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
LANGUAGES = {"python": {"python", "py", "python3", ""}, "cpp": {"cpp", "c++", "cc", "cxx", ""}}
ENTRY_POINTS = {"python": re.compile(r"^\s*def\s+solve\s*\(", re.M), "cpp": re.compile(r"\bint\s+main\s*\(")}


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, body) of every fenced block, in order."""
    return [(match.group(2).lower(), match.group(3)) for match in FENCE.finditer(text or "")]


def extract_code(text: str, language: str = "python") -> str | None:
    blocks = code_blocks(text)
    fitting = [body for tag, body in blocks if tag in LANGUAGES[language]] or [body for _, body in blocks]
    if not fitting:
        return None
    with_entry = [body for body in fitting if ENTRY_POINTS[language].search(body)]
    return max(with_entry or fitting, key=len)
