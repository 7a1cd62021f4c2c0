"""Writes a report folder from stored runs:

report.md      the tables (GitHub Markdown) and figures
report.html    the same, one page (inline SVG, no network; one inline script sorts the
               item table), plus every item: error / tau_acc, time / tau_time, where t_base
               came from, the error picture of a failed item, a link to its page
items/         a page per item (item_pages.py) and its picture: links relative, so the
               folder can be copied
summary.json   every table as numbers and text, the runs it read
cases.csv      one row per item and run (runs.ROW_FIELDS)
tables.tex     the tables for a paper (booktabs)
figures/       PNG and SVG of each figure
"""

from __future__ import annotations

import csv
import datetime as _dt
import html
import json
import os
from pathlib import Path

from . import figures, item_pages, tables
from .runs import ROW_FIELDS, Run, run_from_verdicts


def build_tables(rows: list[dict]) -> list[tables.Table]:
    found = [
        *tables.family_tables(rows),
        tables.stage_table(rows),
        *tables.sensitivity_tables(rows),
        tables.exec_reason_table(rows),
        tables.flag_table(rows),
        tables.t_base_table(rows),
        tables.cost_table(rows),
        *tables.attempt_tables(rows),
        tables.template_table(rows),
        tables.pass_at_k_table(rows),
        tables.comparison_table(rows),
        tables.live_table(rows),
    ]
    return [table for table in found if table is not None and table.rows]


def write_report(runs: list[Run], out: Path, with_figures: bool = True) -> dict:
    """Write every file of the report into ``out``; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    rows = tables.label_groups([row for run in runs for row in run.rows])
    found = build_tables(rows)
    drawn = figures.write_figures(rows, out / "figures") if with_figures else []
    summary = {
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "runs": [
            {
                "path": str(run.path),
                "label": run.label,
                "machine": run.machine,
                "sandbox": run.sandbox,
                "images": run.images,
                "mode": run.mode,
                "items": len(run.rows),
            }
            for run in runs
        ],
        "tables": {table.key: table.to_dict() for table in found},
        "figures": drawn,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    _write_csv(rows, out / "cases.csv")
    (out / "tables.tex").write_text(_latex(found))
    (out / "report.md").write_text(_markdown(summary, found, drawn))
    (out / "report.html").write_text(_html(summary, found, drawn, rows, out, _banners(runs)))
    return summary


def report_of_session(verdicts: list[dict], meta: dict, out: Path) -> str:
    """``--pde-report``: the report of the run that just ended; one line saying where."""

    run = run_from_verdicts(verdicts, meta, out / "run.json")
    summary = write_report([run], out)
    return (
        f"report: {out / 'report.html'} ({len(summary['tables'])} tables, {len(summary['figures'])} figures; "
        f"{out / 'run.json'} is the run, for `pdebench report` beside others)"
    )


def _write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=ROW_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "timed_runs": ";".join(f"{t:.6g}" for t in row["timed_runs"])})


def _runs_lines(summary: dict) -> list[str]:
    lines = []
    for run in summary["runs"]:
        where = ", ".join(part for part in (run["machine"], run["sandbox"]) if part and part != "?")
        mode = "" if run["mode"] in ("evaluation", "runs") else f", a {run['mode']} run (its own baselines: all PASS)"
        lines.append(f"{run['label']}: {run['items']} items, {where or 'machine not recorded'}{mode} ({run['path']})")
    return lines


def _markdown(summary: dict, found: list[tables.Table], drawn: list[str]) -> str:
    from tabulate import tabulate

    parts = ["# PDEAgent-Bench report", "", f"Created {summary['created']} from stored runs:", ""]
    parts += [f"- {line}" for line in _runs_lines(summary)] + [""]
    for table in found:
        parts += [
            f"## {table.title}",
            "",
            tabulate(table.rows, headers=table.headers, tablefmt="github", disable_numparse=True),
            "",
        ]
        if table.note:
            parts += [f"_{table.note}_", ""]
    for stem in drawn:
        parts += [f"![{figures.caption(stem)}](figures/{stem}.png)", "", f"_{figures.caption(stem)}_", ""]
    return "\n".join(parts)


def _latex(found: list[tables.Table]) -> str:
    from tabulate import tabulate

    parts = ["% PDEAgent-Bench report tables (booktabs)"]
    for table in found:
        parts += [
            f"% {table.title}",
            tabulate(table.rows, headers=table.headers, tablefmt="latex_booktabs", disable_numparse=True),
            "",
        ]
    return "\n".join(parts)


STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:75em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;font-size:90%}
th{background:#eee}td.PASS{background:#e8f5e9}td.F-Exec{background:#eeeeee}td.F-Acc{background:#ffebee}
td.F-Time{background:#fff8e1}.note{color:#555;font-style:italic}figure{margin:1em 0}svg{max-width:100%;height:auto}
.banner{background:#fff3cd;border:1px solid #e0c060;padding:0.6em 1em}th.sort{cursor:pointer}
img.thumb{width:160px}pre{background:#f6f6f6;padding:0.5em;overflow:auto;max-height:30em}img{max-width:100%}"""
OPEN_UP_TO = 50  # the item table is open when the report has at most this many items
# a click on a header sorts the item table by it (numbers by data-v, blanks last), again: the other way
SORT_SCRIPT = """document.querySelectorAll('table.items th.sort').forEach((th, col) =>
 th.addEventListener('click', () => {
  const body = th.closest('table').tBodies[0], rows = [...body.rows], up = th.dataset.up !== '1';
  const key = r => { const c = r.cells[col];
   return c.dataset.v !== undefined ? parseFloat(c.dataset.v) : c.textContent; };
  rows.sort((a, b) => { const x = key(a), y = key(b);
   if (typeof x === 'number' && (isNaN(x) || isNaN(y))) return isNaN(x) - isNaN(y);
   const d = typeof x === 'number' ? x - y : String(x).localeCompare(String(y));
   return up ? d : -d; });
  th.dataset.up = up ? '1' : '0'; rows.forEach(r => body.appendChild(r)); }));"""


def _html_table(table: tables.Table) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in table.headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in table.rows)
    note = f'<p class="note">{html.escape(table.note)}</p>' if table.note else ""
    return f"<h2>{html.escape(table.title)}</h2><table><tr>{head}</tr>{body}</table>{note}"


def _banners(runs: list[Run]) -> list[str]:
    """What a reader must know before the rates: a run cut short, items not run."""
    said = [run.cut_short for run in runs if run.cut_short]
    for run in runs:
        if run.not_run:
            reasons = sorted({str(item.get("reason", "?")) for item in run.not_run})
            said.append(f"{run.label}: {len(run.not_run)} item(s) not run ({'; '.join(reasons)[:300]})")
    return said


def _sortable(value: float | None, text: str) -> str:
    number = "NaN" if value is None else repr(float(value))
    return f'<td data-v="{number}">{html.escape(text)}</td>'


def _ratio(value, bound) -> float | None:
    return value / bound if value is not None and bound else None


def _item_rows(rows: list[dict], out: Path) -> str:
    """The item table's rows, each item's page written on the way."""
    lines = []
    for index, r in enumerate(rows, 1):
        key = item_pages.item_key(index, r)
        picture = item_pages.write_item_page(out, key, r, STYLE)
        error_ratio, time_ratio = _ratio(r["error"], r["tau_acc"]), _ratio(r["t_agent"], r["tau_time"])
        thumb = (
            f'<a href="items/{key}/index.html"><img class="thumb" src="{picture}" alt="error"></a>' if picture else ""
        )
        lines.append(
            f"<tr>{_sortable(index, str(index))}<td>{html.escape(r['system'])}</td><td>{html.escape(r['library'])}</td>"
            f'<td><a href="items/{key}/index.html">{html.escape(r["case_id"])}</a></td>'
            f'<td class="{html.escape(r["outcome"])}">{html.escape(r["outcome"])}</td>'
            + _sortable(error_ratio, "" if error_ratio is None else f"{error_ratio:.3g}")
            + _sortable(time_ratio, "" if time_ratio is None else f"{time_ratio:.3g}")
            + f"<td>{html.escape(r.get('t_base_from') or '')}</td><td>{html.escape(r['reason'][:160])}</td>"
            f"<td>{thumb}</td><td>{_link(r['artifacts'], out)}</td></tr>"
        )
    return "".join(lines)


def _html(
    summary: dict, found: list[tables.Table], drawn: list[str], rows: list[dict], out: Path, banners: list[str]
) -> str:
    runs = "".join(f"<li>{html.escape(line)}</li>" for line in _runs_lines(summary))
    figures_html = ""
    for stem in drawn:
        svg = (out / "figures" / f"{stem}.svg").read_text()
        svg = svg[svg.find("<svg") :]  # inline: the XML prologue and doctype do not belong in a page
        words = html.escape(figures.caption(stem))
        figures_html += f'<figure id="figure-{stem}">{svg}<figcaption>{words}</figcaption></figure>'
    headers = ("#", "system", "library", "case", "outcome", "error / tau_acc", "t_agent / tau_time", "t_base from",
               "reason", "error picture", "audit folder")  # fmt: skip
    head = "".join(f'<th class="sort">{html.escape(name)}</th>' for name in headers)
    opened = " open" if len(rows) <= OPEN_UP_TO else ""
    warned = "".join(f'<p class="banner">{html.escape(line)}</p>' for line in banners)
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>PDEAgent-Bench report</title>'
        f"<style>{STYLE}</style></head><body><h1>PDEAgent-Bench report</h1>{warned}"
        f"<p>Created {html.escape(summary['created'])} from stored runs:</p><ul>{runs}</ul>"
        + "".join(_html_table(table) for table in found)
        + figures_html
        + f'<details id="items"{opened}><summary>Every item ({len(rows)})</summary><table class="items"><thead>'
        f"<tr>{head}</tr></thead><tbody>{_item_rows(rows, out)}</tbody></table></details>"
        f"<script>{SORT_SCRIPT}</script></body></html>\n"
    )


def _link(folder: str, out: Path) -> str:
    """The audit folder, relative to the report (a copied report and runs folder keep it)."""
    if not folder:
        return ""
    path = Path(folder)
    target = os.path.relpath(path, out) if path.is_absolute() else folder
    return f'<a href="{html.escape(target)}">{html.escape(path.name)}</a>'
