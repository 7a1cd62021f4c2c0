"""Prompts (paper, Appendix L) and code extraction: only the agent view reaches a prompt,
the same case gives the same bytes, the parts come in order."""

from __future__ import annotations

import hashlib
import json

import pytest

from pytest_pdebench.cases import CalibrationConfig, CaseRecord, agent_view, load_cases
from pytest_pdebench.llm.extract import extract_code
from pytest_pdebench.prompts import feedback_of, feedback_prompt, single_shot_prompt
from pytest_pdebench.testing import REPO, STARTER

GUIDES = REPO / "guides"
RECORDS = [r for folder in (REPO / "cases", STARTER) for _, _, r in load_cases(folder)]
CANARY = "CANARY-7f3a"


def prompts_of(record: CaseRecord):
    for library in record.supported_libraries:
        yield library, single_shot_prompt(agent_view(record, library), record.evaluation_config.timeout_sec, GUIDES)


def test_no_evaluator_only_value_reaches_any_prompt():
    """Plant a marker in every evaluator-only field of every shipped record (exact
    solutions, references, thresholds, calibration), build every prompt, look for it."""
    checked = 0
    for original in RECORDS:
        record = original.model_copy(deep=True)
        meta = record.evaluation_metadata
        meta.manufactured_solution = {"u": CANARY, "p": CANARY} if meta.manufactured_solution else None
        meta.reference_config = {"method": CANARY, "mesh": CANARY}
        meta.reference_path = f"references/{CANARY}.npz"
        meta.calibration_config = CalibrationConfig(source=CANARY, upstream_oracle={"mesh": CANARY}, settings={
            library: {"element_degree": 3, "cells_per_side": 777, "dt": 7.77777e-3}
            for library in record.supported_libraries})
        meta.thresholds = {library: {"e_base": 7.77777e-7, "t_base": 77.7777, "tau_acc": 7.77777e-6,
                                     "tau_time": 233.3331, "note": CANARY} for library in record.supported_libraries}
        record.tags.structure = [CANARY]
        for library, prompt in prompts_of(record):
            assert CANARY not in prompt and "7.77777" not in prompt and "77.7777" not in prompt, (record.id, library)
            checked += 1
    assert checked >= 645 + 510 + 313


def test_manufactured_solutions_are_not_in_prompts_unless_the_case_spec_holds_them():
    """The real values: an exact solution reaches a prompt only as data the agent view
    itself carries (Dirichlet data equal to it on the boundary, see docs/suite.md)."""
    for record in RECORDS[:200]:
        exact = record.evaluation_metadata.manufactured_solution or {}
        spec_text = json.dumps(record.case_spec_dict())
        for library, prompt in prompts_of(record):
            for value in exact.values():
                for text in value if isinstance(value, list) else [value]:
                    assert text not in prompt or text in spec_text, (record.id, text)


def test_prompt_is_deterministic_and_ordered():
    record = next(r for r in RECORDS if r.id == "poisson_basic")
    view = agent_view(record, "dolfinx")
    first = single_shot_prompt(view, 300, GUIDES)
    second = single_shot_prompt(json.loads(json.dumps(view)), 300, GUIDES)
    assert first == second
    headings = [line for line in first.splitlines() if line.startswith("# ")]
    assert headings[:6] == ["# Task", "# Equation: Poisson equation", "# Case specification (authoritative)",
                            "# What to write", "# Rules", "# DOLFINx 0.11 guide (the runtime of this benchmark)"]
    assert "Solve a steady Poisson equation on a 2-D unit_square domain with dirichlet boundary" in first
    assert "/work/" not in first and "/tmp/" not in first  # nothing of this machine
    block = first.split("```json\n")[1].split("\n```")[0]
    assert json.loads(block) == view["case_spec"]
    # pinned: a change of prompt bytes is a change of the benchmark (update on purpose)
    assert hashlib.sha256(first.encode()).hexdigest() == (REPO / "tests" / "data" / "poisson_basic_prompt.sha256"
                                                          ).read_text().split()[0]


def test_feedback_reveals_only_facts_of_the_attempt():
    verdict = {"outcome": "F-Acc", "reason": "F-Acc: rel. L2 error 2.0e-03 > tau_acc 1.0e-03", "error": 2.0e-3}
    prompt = feedback_prompt(2, "def solve(case_spec):\n    pass\n", feedback_of(verdict), "BASE\n")
    assert "2.000e-03" in prompt and "tau_acc" not in prompt and "1.0e-03" not in prompt
    slow = {"outcome": "F-Time", "reason": "F-Time: 9.1 s > tau_time 3.0 s", "t_agent": 9.1}
    prompt = feedback_prompt(3, "x" * 5000, feedback_of(slow), "BASE\n")
    assert "9.10 s" in prompt and "tau_time" not in prompt and "3.0 s" not in prompt
    assert "first 2000 characters; 3000 more cut" in prompt and prompt.endswith("BASE\n")


@pytest.mark.parametrize("text, expected", [
    ("no code here", None),
    ("```python\ndef solve(case_spec):\n    return 1\n```", "def solve(case_spec):\n    return 1\n"),
    ("```\nprint(1)\n```\ntext\n```py\nimport numpy\ndef solve(c):\n    pass\n```\n",
     "import numpy\ndef solve(c):\n    pass\n"),
    ("```python\na = 1\n```\n```python\nbb = 22\n```", "bb = 22\n"),  # no entry point: the longest
    ("````python\ns = '```'\ndef solve(c):\n    pass\n````", "s = '```'\ndef solve(c):\n    pass\n"),
])
def test_code_extraction(text, expected):
    assert extract_code(text) == expected


def test_cpp_extraction_prefers_main():
    text = "```cpp\nint helper() { return 1; }\n```\n```c++\n#include <cmath>\nint main(int argc, char** argv) {}\n```"
    assert "int main(" in extract_code(text, "cpp")
