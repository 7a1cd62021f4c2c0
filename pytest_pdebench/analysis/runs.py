"""Stored runs read back as flat rows: one per item (case x library) and run.

Two formats are read, and nothing is ever run again:

* a pytest-json-report file (``--json-report``): each test's ``metadata.pde`` is a
  verdict, the top-level ``pde`` block names the machine, sandbox and images; a case item
  that failed without one (its test crashed first) is F-Exec "no verdict", never left out;
* a JSON-lines verdict file (``benchmarks/results/*.json``): a header line (``rung``,
  ``machine``, ...) then one verdict per line.

A row keeps what every analysis needs (ROW_FIELDS); ``system`` names what was evaluated:
the model (with `` (template)`` when the prompt carried the scaffold), else the
submission folder's name, unless the command line names the run (``NAME=PATH``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..items import ITEM_KEY, no_verdict
from ..settings import gates_note

ROW_FIELDS = (
    "system",
    "run",
    "library",
    "case_id",
    "family",
    "domain",
    "math_type",
    "outcome",
    "reason",
    "exec_category",
    "source_failure",
    "error",
    "e_base",
    "tau_acc",
    "t_agent",
    "t_base",
    "tau_time",
    "t_first_run",
    "t_first_base",
    "timed_runs",
    "alpha_acc",
    "alpha_time",
    "tau_min",
    "tau_max",
    "attempts",
    "first_pass_attempt",
    "prompt_mode",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "machine",
    "sandbox",
    "runner",
    "image",
    "calibration",
    "artifacts",
    "timed_failure",
    "timed_errors",
    "flags",
)

# F-Exec reasons, grouped: the first category whose marker the reason contains (C++
# compiler messages included: a missing header is an import, an unknown member an API error)
EXEC_CATEGORIES = (
    ("no verdict", ("no verdict",)),  # the test crashed before writing one: its crash message says why
    ("timeout", ("timed out",)),
    ("memory", ("out of memory", "MemoryError", "killed")),
    ("no code", ("no code block", "no code in", "model call failed")),
    ("import", ("ModuleNotFoundError", "ImportError", "No module named", "cannot import", "fatal error:")),
    (
        "API",
        (
            "AttributeError",
            "TypeError",
            "has no attribute",
            "unexpected keyword",
            "got an unexpected",
            "defines no function",
            "has no member named",
            "is not a member of",
            "was not declared",
            "no matching function",
        ),
    ),
    ("syntax", ("SyntaxError", "IndentationError", "compile error", "compilation failed")),
    ("output format", ("solution.npz", "meta.json", "shape", "NaN", "missing", "no start marker", "output")),
)


class ReportError(ValueError):
    """A file that is not a stored run; the message says which and why."""


@dataclass
class Run:
    """One stored run: where it came from and its rows."""

    path: Path
    label: str  # the run's name in tables (the file's stem unless named)
    machine: str
    sandbox: str
    images: dict = field(default_factory=dict)
    mode: str = "evaluation"
    rows: list[dict] = field(default_factory=list)
    cut_short: str | None = None  # the run was interrupted: what of it was judged
    not_run: list[dict] = field(default_factory=list)  # items skipped (no runtime, no variant, no money left)


AGENT_FAILURE = "agent failure"  # F-Exec that is the code agent's, not the solver's: it crashed or hit a limit


def exec_category(reason: str) -> str:
    for category, markers in EXEC_CATEGORIES:
        if any(marker in reason for marker in markers):
            return category
    return "runtime error"


def system_of(verdict: dict) -> str:
    llm = verdict.get("llm")
    if llm and llm.get("agent"):
        return f"{llm['agent']} ({llm['model']})"
    if llm:
        return llm["model"] + (" (template)" if llm.get("prompt_mode") == "template" else "")
    source = str(verdict.get("source") or "?").rstrip("/")
    return source.rsplit("/", 1)[-1] or source


def row_of(verdict: dict, run: Run, system: str | None) -> dict:
    llm = verdict.get("llm") or {}
    attempts = llm.get("attempts") or []
    alphas = verdict.get("alphas") or {}
    first_pass = next((a["attempt"] for a in attempts if a.get("outcome") == "PASS"), None)
    if not attempts:
        first_pass = 1 if verdict["outcome"] == "PASS" else None
    math_type = verdict.get("math_type") or []
    sibling = verdict.get("sibling") or {}
    seed = verdict.get("variant_seed")
    gates = gates_note(verdict.get("gate_options") or {}, thresholds_only=True)
    named = (system or system_of(verdict)) + (f" [{gates}]" if gates else "")  # never pooled with the paper's gates
    row = {
        "system": named,
        "system_name": named,  # as it was before label_groups named the setting
        "gates": gates,
        "cases": "published" if seed is None else f"variants, seed {seed}",
        "sibling": sibling.get("outcome"),  # --pde-sibling: PASS, F-*, or None (not run)
        "run": run.label,
        "library": verdict["library"],
        "case_id": verdict["case_id"],
        "family": verdict.get("family", "?"),
        "domain": verdict.get("domain", ""),
        "math_type": "+".join(math_type) if isinstance(math_type, list) else str(math_type),
        "outcome": verdict["outcome"],
        "reason": verdict.get("reason", ""),
        "exec_category": (
            ""
            if verdict["outcome"] != "F-Exec"
            else AGENT_FAILURE
            if verdict.get("source_failure")
            else exec_category(verdict.get("reason", ""))
        ),
        "source_failure": bool(verdict.get("source_failure")),
        "timed_runs": list(verdict.get("timed_runs") or []),
        "attempts": len(attempts) or 1,
        "first_pass_attempt": first_pass,
        "attempt_history": attempts,
        "prompt_mode": llm.get("prompt_mode", ""),
        "input_tokens": llm.get("input_tokens"),
        "output_tokens": llm.get("output_tokens"),
        "cost_usd": llm.get("cost_usd"),
        "machine": run.machine,
        "sandbox": verdict.get("sandbox") or run.sandbox,
        "runner": verdict.get("runner") or "cold",  # verdicts from before the warm runner: cold
        "image": verdict.get("runtime_image") or "",
        "calibration": _calibration_setting(verdict),
        "t_base_from": verdict.get("t_base_from") or "",
        "artifacts": verdict.get("artifacts", ""),
        "timed_failure": verdict.get("timed_failure"),
        "timed_errors": list(verdict.get("timed_errors") or []),
        "flags": list(verdict.get("flags") or []),
        "no_verdict": bool(verdict.get("no_verdict")),
    }
    for key in ("error", "e_base", "tau_acc", "t_agent", "t_base", "tau_time", "t_first_run", "t_first_base"):
        row[key] = verdict.get(key)
    for key in ("alpha_acc", "alpha_time", "tau_min", "tau_max"):
        row[key] = alphas.get(key)
    return row


SETTING_FIELDS = ("system", "sandbox", "runner", "image", "calibration")
LOCAL_BASELINES = "local baselines (kept or paired on this machine)"


def _calibration_setting(verdict: dict) -> str:
    """Where a verdict's thresholds came from, as a setting: under --pde-baseline=local an
    item's baseline is kept from an earlier session or paired now, both this machine's, so
    they are one setting (each kept entry names its own date)."""
    baseline = verdict.get("baseline") or {}
    if verdict.get("t_base_from") == "kept" or "paired_because" in baseline:
        return LOCAL_BASELINES
    return verdict.get("calibration") or ""


def with_stand_ins_placed(rows: list[dict]) -> list[dict]:
    """A stand-in (no verdict) knows its case and library only: it takes the system and the
    setting that the run's verdicts on its library share, so that tables count it with
    them rather than as a system or setting of its own."""
    for row in rows:
        if row["no_verdict"]:
            peers = [peer for peer in rows if not peer["no_verdict"] and peer["library"] == row["library"]]
            for key in SETTING_FIELDS:
                values = {peer[key] for peer in peers}
                if len(values) == 1:
                    row[key] = values.pop()
    return rows


def load_run(path: Path, name: str | None = None) -> Run:
    """Read one stored run (either format); ``name`` overrides every row's system."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ReportError(
            f"{path}: cannot read it ({exc.strerror}); pass a run's pytest JSON report (--json-report) or its "
            "verdict file (JSON lines, e.g. the run.json of --pde-report)"
        ) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        document = None
    if isinstance(document, dict) and "tests" in document:
        return _from_json_report(path, document, name)
    return _from_verdict_lines(path, text, name)


def json_report_verdicts(document: dict) -> list[dict]:
    """The verdicts of a pytest JSON report, one per case item that ran: its ``metadata.pde``,
    or for an item that failed or errored without one the F-Exec stand-in "no verdict"
    (items.no_verdict). Skipped items (no runtime here, not run) are not verdicts."""

    source = (document.get("pde") or {}).get("source")
    verdicts = []
    for test in document.get("tests") or []:
        verdict = (test.get("metadata") or {}).get("pde")
        if verdict:
            verdicts.append(verdict)
        elif test.get("outcome") in ("failed", "error"):
            described = (test.get("metadata") or {}).get(ITEM_KEY)
            stand_in = no_verdict(str(test.get("nodeid", "")), source, _crash_message(test), described)
            if stand_in:
                verdicts.append(stand_in)
    return verdicts


def _crash_message(test: dict) -> str | None:
    for phase in ("setup", "call", "teardown"):
        message = ((test.get(phase) or {}).get("crash") or {}).get("message")
        if message:
            return str(message)[:200]
    return None


INTERRUPTED_EXIT = 2  # pytest's exit code of an interrupted session


def _from_json_report(path: Path, document: dict, name: str | None) -> Run:
    meta = document.get("pde") or {}
    run = Run(
        path,
        name or path.stem,
        meta.get("machine", "?"),
        meta.get("sandbox", "?"),
        meta.get("images") or {},
        meta.get("mode", "evaluation"),
    )
    run.rows = with_stand_ins_placed(
        [
            row_of(verdict, run, name)
            for verdict in json_report_verdicts(document)
            if not verdict.get("calibration_problem")
        ]
    )
    run.not_run = list(meta.get("not_run") or [])
    interrupted = meta.get("interrupted")
    if interrupted or document.get("exitcode") == INTERRUPTED_EXIT:  # an older report says it by its exit code
        _say_cut_short(run, interrupted)
    if not run.rows:
        raise ReportError(
            f"{path}: a pytest JSON report with no PDEAgent-Bench verdicts (was it a benchmark run with --json-report?)"
        )
    return run


def _say_cut_short(run: Run, interrupted: dict | None) -> None:
    of = f" of {interrupted['selected']}" if interrupted and interrupted.get("selected") else ""
    run.cut_short = (
        f"{run.label} was interrupted: {len(run.rows)}{of} items judged; its rates cover those "
        "only (finish it with the same command and --pde-resume)"
    )


def _from_verdict_lines(path: Path, text: str, name: str | None) -> Run:
    lines = [line for line in text.splitlines() if line.strip()]
    records = []
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ReportError(f"{path}:{number}: neither a pytest JSON report nor JSON lines ({exc.msg})") from None
    header = records[0] if records and "case_id" not in records[0] else {}
    verdicts = [r for r in records if isinstance(r, dict) and "case_id" in r]
    if not verdicts:
        raise ReportError(f"{path}: no verdicts in it (a line with case_id, library and outcome)")
    for number, verdict in enumerate(verdicts, 1):
        missing = [key for key in ("library", "outcome") if key not in verdict]
        if missing:
            raise ReportError(f"{path}: verdict {number} ({verdict['case_id']}) has no {', '.join(missing)}")
    run = Run(
        path,
        name or header.get("rung") or path.stem,
        header.get("machine", "?"),
        header.get("sandbox", "?"),
        header.get("images") or {},
        header.get("mode") or "evaluation",
    )
    system = name or header.get("rung")
    run.rows = with_stand_ins_placed([row_of(verdict, run, system) for verdict in verdicts])
    run.not_run = list(header.get("not_run") or [])
    if header.get("interrupted"):
        _say_cut_short(run, header["interrupted"])
    return run


def run_from_verdicts(verdicts: list[dict], meta: dict, path: Path) -> Run:
    """The run that just ended (``--pde-report``); also written to ``path`` as JSON lines
    (a header, then the verdicts) so that `pdebench report` can read it again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = ("machine", "sandbox", "source", "mode", "runs", "images", "not_run", "interrupted")
    header = {key: meta.get(key) for key in keys}
    path.write_text("".join(json.dumps(line, default=str) + "\n" for line in [header, *verdicts]))
    run = Run(
        path,
        path.stem,
        meta.get("machine", "?"),
        meta.get("sandbox", "?"),
        meta.get("images") or {},
        meta.get("mode", "evaluation"),
    )
    run.rows = with_stand_ins_placed(
        [row_of(verdict, run, None) for verdict in verdicts if not verdict.get("calibration_problem")]
    )
    run.not_run = list(meta.get("not_run") or [])
    if meta.get("interrupted"):
        _say_cut_short(run, meta["interrupted"])
    return run


def parse_run_argument(argument: str) -> tuple[str | None, Path]:
    """``NAME=PATH`` or ``PATH``."""
    name, sep, path = argument.partition("=")
    if sep and name and not Path(argument).exists():
        return name, Path(path)
    return None, Path(argument)
