"""The report's page of each item (``items/<key>/index.html``), to debug a failure from: the
verdict's figures, where the error sits (``errors_by_region``), the item's picture (fields.png,
copied beside the page), the solver's source, the ends of its stdout and stderr, and for models
and agents every attempt with the feedback it got. Everything the page shows is in the report
folder, so its links work when the folder is copied; the audit folder is linked relatively.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path

SOURCE_SUFFIXES = (".py", ".cpp", ".cc", ".h", ".hpp")  # the submission's files in an audit folder
SOURCE_CAP = 200_000  # characters of one source file shown
TAIL_CHARS = 4000  # the end of stdout and stderr shown
PICTURE = "fields.png"


def item_key(index: int, row: dict) -> str:
    """The item's folder under ``items/``: its place in the table, case and library (a name
    that is safe on every file system)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{index:04d}-{row['case_id']}-{row['library']}")


def _verdict_file(row: dict) -> dict:
    folder = Path(row.get("artifacts") or "")
    try:
        return json.loads((folder / "verdict.json").read_text()) if row.get("artifacts") else {}
    except (OSError, ValueError):
        return {}


def _tail(path: Path) -> str | None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    return text if len(text) <= TAIL_CHARS else "[...]\n" + text[-TAIL_CHARS:]


def _ratio(value, bound) -> str:
    return f"{value / bound:.3g}" if value is not None and bound else ""


def _figures(row: dict) -> str:
    shown = [
        ("outcome", row["outcome"]),
        ("error", row["error"]),
        ("tau_acc", row["tau_acc"]),
        ("error / tau_acc", _ratio(row["error"], row["tau_acc"])),
        ("t_agent (s)", row["t_agent"]),
        ("tau_time (s)", row["tau_time"]),
        ("t_agent / tau_time", _ratio(row["t_agent"], row["tau_time"])),
        ("t_base (s)", row["t_base"]),
        ("t_base from", row.get("t_base_from") or ""),
        ("first run (s)", row.get("t_first_run")),
        ("calibration", row.get("calibration") or ""),
    ]
    cells = "".join(
        f"<tr><th>{html.escape(name)}</th><td>{html.escape(_number(value))}</td></tr>" for name, value in shown
    )
    return f"<table>{cells}</table>"


def _number(value) -> str:
    if value is None:
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _regions(verdict: dict) -> str:
    regions = verdict.get("errors_by_region") or []
    if not regions:
        return ""
    head = "<tr><th>region</th><th>points</th><th>RMS / reference RMS</th><th>max</th><th>share</th></tr>"
    body = "".join(
        f"<tr><td>{html.escape(region['where'])}</td><td>{region['points']}</td>"
        f"<td>{region['relative_rms']:.2e}</td><td>{region['max']:.2e}</td><td>{100 * region['share']:.1f}%</td></tr>"
        for region in regions
    )
    return f"<h2>Where the error is</h2><table>{head}{body}</table>"


def _attempts(row: dict, audit: Path | None) -> str:
    """Each attempt's outcome, and the end of the prompt it got (an attempt after the first
    gets the failure of the one before at the end of its prompt.md)."""
    attempts = row.get("attempt_history") or []
    if len(attempts) < 2 and not (attempts and attempts[0].get("input_tokens") is not None):
        return ""  # a folder of solvers: one attempt, no prompt
    root = audit.parent if audit is not None and audit.name.startswith("attempt-") else audit
    parts = ["<h2>Attempts</h2>"]
    for attempt in attempts:
        number = attempt.get("attempt", "?")
        said = f"attempt {number}: {attempt.get('outcome', '?')} {attempt.get('reason', '')}"
        parts.append(f"<h3>{html.escape(said)}</h3>")
        prompt = _tail(root / f"attempt-{number}" / "prompt.md") if root is not None else None
        if prompt:
            parts.append(
                f"<details><summary>the prompt it got (its end)</summary><pre>{html.escape(prompt)}</pre></details>"
            )
    return "".join(parts)


def _sources(folder: Path) -> str:
    parts = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.suffix in SOURCE_SUFFIXES and path.is_file() and not path.is_symlink():
            text = path.read_text(errors="replace")[:SOURCE_CAP]
            parts.append(
                f"<details><summary>{html.escape(path.name)}</summary><pre>{html.escape(text)}</pre></details>"
            )
    return "<h2>Submission</h2>" + "".join(parts) if parts else ""


def write_item_page(out: Path, key: str, row: dict, style: str) -> str | None:
    """Write ``items/<key>/index.html`` (and its picture); the picture's path relative to
    ``out`` when the item has one, else None."""
    folder = out / "items" / key
    folder.mkdir(parents=True, exist_ok=True)
    audit = Path(row["artifacts"]) if row.get("artifacts") else None
    verdict = _verdict_file(row)
    picture = None
    drawn = audit / PICTURE if audit is not None and PICTURE in (verdict.get("pictures") or []) else None
    if drawn is not None and drawn.is_file() and not drawn.is_symlink():  # a stored run's folder: no links
        shutil.copyfile(drawn, folder / PICTURE)
        picture = f"items/{key}/{PICTURE}"
    title = f"{row['case_id']} [{row['library']}], {row['system']}: {row['outcome']}"
    parts = [
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>',
        f'<style>{style}</style></head><body><p><a href="../../report.html">report</a></p>',
        f"<h1>{html.escape(title)}</h1><p>{html.escape(row['reason'])}</p>",
        _figures(row),
        f'<h2>Solution, reference, error</h2><img src="{PICTURE}" alt="fields of {html.escape(row["case_id"])}">'
        if picture
        else "",
        _regions(verdict),
        _attempts(row, audit),
    ]
    if audit is not None:
        for name in ("stdout.txt", "stderr.txt"):
            tail = _tail(audit / name)
            if tail:
                parts.append(f"<h2>{name} (its end)</h2><pre>{html.escape(tail)}</pre>")
        parts.append(_sources(audit))
        relative = os.path.relpath(audit, folder)
        parts.append(f'<p>audit folder: <a href="{html.escape(relative)}">{html.escape(str(audit))}</a></p>')
    parts.append("</body></html>\n")
    (folder / "index.html").write_text("".join(parts))
    return picture
