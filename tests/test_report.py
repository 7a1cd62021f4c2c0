"""`pdebench report` on small stored runs whose numbers can be checked by hand: counts,
intervals, p-values, re-gating, and every output file."""

from __future__ import annotations

import csv
import html
import json
import os
import subprocess
import sys

import pytest

from pytest_pdebench.analysis import figures, stats, tables
from pytest_pdebench.analysis.render import write_report
from pytest_pdebench.analysis.runs import ReportError, exec_category, load_run
from pytest_pdebench.testing import json_report, verdict


def llm(model, outcomes, prompt_mode="single", tokens=(1000, 500), cost=0.01):
    attempts = [{"attempt": i + 1, "outcome": o} for i, o in enumerate(outcomes)]
    return {"model": model, "prompt_mode": prompt_mode, "attempts": attempts, "input_tokens": tokens[0],
            "output_tokens": tokens[1], "cost_usd": cost}


# --- the statistics, against values worked out by hand ---

def test_wilson_interval():
    low, high = stats.wilson(8, 10)  # p = 0.8, z = 1.96: (0.490, 0.943)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert stats.wilson(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert stats.wilson(0, 0) == (0.0, 1.0)


def test_mcnemar_exact_p_value():
    # 1 vs 6 discordant pairs: 2 * (C(7,0) + C(7,1)) / 2^7 = 16 / 128
    assert stats.mcnemar_exact(1, 6) == pytest.approx(0.125)
    assert stats.mcnemar_exact(3, 3) == 1.0
    assert stats.mcnemar_exact(0, 0) == 1.0
    assert stats.mcnemar_exact(0, 10) == pytest.approx(2 / 1024)


def test_the_fewest_discordant_pairs_that_can_show_a_difference():
    """Exact McNemar: n discordant pairs all on one side give p = 2 * 0.5**n, the least any
    split of n can give; at 0.05 that takes 6 of them (5: 0.0625, 6: 0.03125)."""
    assert [stats.mcnemar_smallest_p(n) for n in (0, 1, 5, 6)] == [1.0, 1.0, 0.0625, 0.03125]
    assert all(stats.mcnemar_smallest_p(n) == pytest.approx(stats.mcnemar_exact(0, n)) for n in range(12))
    assert stats.mcnemar_fewest_discordant(0.05) == 6
    assert stats.mcnemar_fewest_discordant(0.01) == 8  # 2/128 = 0.0156 is not below it, 2/256 is
    with pytest.raises(ValueError):
        stats.mcnemar_fewest_discordant(0.0)


def test_pass_at_k_unbiased_estimator():
    assert stats.pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert stats.pass_at_k(3, 1, 3) == 1.0
    with pytest.raises(ValueError):
        stats.pass_at_k(2, 1, 3)


def test_paired_bootstrap_interval():
    same = [True, False, True]
    assert stats.paired_bootstrap(same, same) == (0.0, 0.0, 0.0)
    difference, low, high = stats.paired_bootstrap([True] * 20, [False] * 20)
    assert difference == low == high == 1.0
    difference, low, high = stats.paired_bootstrap([True, True, False, True], [False, True, False, False])
    assert difference == 0.5 and low <= 0.5 <= high and low >= 0.0


# --- tables from a fixture run ---

@pytest.fixture
def two_systems(tmp_path):
    """System 'plain': 3 poisson (PASS, F-Acc, F-Exec import) + 1 heat PASS; system 'tuned':
    the same 4 cases, all PASS but heat F-Time."""
    plain = [verdict("p1", "PASS"), verdict("p2", "F-Acc", error=5e-3, t_agent=None),
             verdict("p3", "F-Exec", error=None, t_agent=None, reason="ModuleNotFoundError: No module named 'fenics'"),
             verdict("h1", "PASS", family="heat")]
    tuned = [verdict(v["case_id"], "PASS", family=v["family"], source="submissions/tuned") for v in plain[:3]]
    tuned.append(verdict("h1", "F-Time", family="heat", t_agent=4.0, source="submissions/tuned"))
    return [load_run(json_report(tmp_path / "plain.json", plain)), load_run(json_report(tmp_path / "tuned.json", tuned))]


def test_family_table_counts_and_wilson(two_systems):
    rows = [row for run in two_systems for row in run.rows]
    (table,) = tables.family_tables(rows)
    assert table.headers == ["family", "plain", "tuned"]
    poisson = next(row for row in table.rows if row[0] == "poisson")
    low, high = stats.wilson(1, 3)
    assert poisson[1] == f"33.3 [{100 * low:.0f}, {100 * high:.0f}] n=3"
    assert poisson[2].startswith("100.0 ")
    assert table.rows[-1][0] == "overall" and table.rows[-1][1].startswith("50.0 ")


def test_stage_breakdown_and_conditional_rates(two_systems):
    rows = [row for run in two_systems for row in run.rows]
    table = tables.stage_table(rows)
    plain = next(row for row in table.rows if row[0] == "plain")
    # 4 runs: 2 PASS, 1 F-Exec, 1 F-Acc; executed 3/4, accurate given executed 2/3, fast given accurate 2/2
    assert plain[2:7] == [4, "2 (50.0%)", "1 (25.0%)", "1 (25.0%)", "0 (0.0%)"]
    assert plain[7:] == ["75.0%", "66.7%", "100.0%"]


def test_exec_reasons_are_grouped():
    assert exec_category("ModuleNotFoundError: No module named 'fenics'") == "import"
    assert exec_category("AttributeError: module 'dolfinx.fem' has no attribute 'FunctionSpace'") == "API"
    assert exec_category("SyntaxError: invalid syntax (solver.py, line 3)") == "syntax"
    assert exec_category("timed out after 300.0 s (killed)") == "timeout"
    assert exec_category("killed (out of memory?)") == "memory"
    assert exec_category("solution.npz: u has shape (19, 20), expected (20, 20)") == "output format"
    assert exec_category("RuntimeError: Newton solver did not converge") == "runtime error"
    assert exec_category("compile error: solver.cpp:12:5: error: expected ';' before '}' token") == "syntax"
    assert exec_category("compile error: solver.cpp:3:10: fatal error: deal.II/foo.h: No such file") == "import"
    assert exec_category("compile error: solver.cpp:40:9: error: 'class dealii::Vector<double>' has no member "
                         "named 'sadd_all'") == "API"


def test_paired_comparison_counts_and_mcnemar(two_systems):
    rows = [row for run in two_systems for row in run.rows]
    result = tables.paired(rows, "tuned", "plain", "dolfinx")
    # tuned passes p2, p3 where plain fails; plain passes h1 where tuned fails
    assert (result["cases"], result["both"], result["only_first"], result["only_second"]) == (4, 1, 2, 1)
    assert result["difference"] == pytest.approx(0.25)
    assert result["p_mcnemar"] == pytest.approx(1.0)  # 2 vs 1: 2 * (1 + 3) / 8 > 1, capped
    table = tables.comparison_table(rows)
    assert table.rows[0][-1].startswith("no difference shown (3 discordant cases: at least 6 are needed")


def comparison_rows(tmp_path, first_only, second_only, both=0):
    """Rows of systems 'a' and 'b' on the same cases: a passes first_only cases b fails, b
    passes second_only cases a fails, both pass `both` more."""
    a, b = [], []
    for index, (pass_a, pass_b) in enumerate([(True, False)] * first_only + [(False, True)] * second_only
                                             + [(True, True)] * both):
        a.append(verdict(f"c{index}", "PASS" if pass_a else "F-Acc", source="submissions/a"))
        b.append(verdict(f"c{index}", "PASS" if pass_b else "F-Acc", source="submissions/b"))
    runs = [load_run(json_report(tmp_path / "a.json", a)), load_run(json_report(tmp_path / "b.json", b))]
    return [row for run in runs for row in run.rows]


@pytest.mark.parametrize(("first_only", "second_only", "reading"), [
    # one case: +100 [+100, +100] and p = 1, never "a ahead"
    (1, 0, "no difference shown (1 discordant case: at least 6 are needed for any difference to be significant at "
           "0.05)"),
    (5, 0, "no difference shown (5 discordant cases: at least 6 are needed for any difference to be significant at "
           "0.05)"),  # p = 0.0625, and the bootstrap interval [+x, +y] holds no 0
    (0, 6, "b ahead"),  # p = 0.03125
    (7, 3, "no difference shown"),  # p = 0.34: enough cases, no difference
    (12, 1, "a ahead"),
    (0, 0, "no difference shown (both passed the same cases)"),
])
def test_a_comparison_calls_a_system_ahead_only_when_mcnemar_is_significant(tmp_path, first_only, second_only,
                                                                            reading):
    rows = comparison_rows(tmp_path, first_only, second_only, both=1)
    (row,) = tables.comparison_table(rows).rows
    assert row[6:8] == [first_only, second_only] and row[-1] == reading


def test_the_comparison_note_states_the_test_and_its_level(tmp_path):
    table = tables.comparison_table(comparison_rows(tmp_path, 1, 0))
    assert "McNemar's exact test" in table.note and "0.05" in table.note and "fewer than 6" in table.note
    assert "+100.0 [+100.0, +100.0]" in table.rows[0][8]  # the interval that read as "a ahead" before


def test_regate_from_stored_numbers():
    row_of = lambda v: load_row(v)  # noqa: E731
    near = row_of(verdict("a", "F-Acc", error=3e-3, t_agent=1.0))
    assert tables.regate(near, 10, 3) == "F-Acc"
    assert tables.regate(near, 50, 3) == "PASS"  # tau_acc 5e-3
    assert tables.regate(near, 100, 3) == "PASS"  # 1e-2 capped at tau_max 8e-3
    slow = row_of(verdict("b", "F-Time", t_agent=4.0))
    assert [tables.regate(slow, 10, a) for a in (1, 3, 5)] == ["F-Time", "F-Time", "PASS"]
    untimed = row_of(verdict("c", "F-Acc", error=3e-3, t_agent=None))
    assert tables.regate(untimed, 50, 3) is None  # accurate then, but never timed
    assert tables.regate(row_of(verdict("d", "F-Exec", error=None, t_agent=None)), 100, 5) == "F-Exec"
    # every run is judged: a timed run's larger error decides under a looser alpha too
    timed_worse = row_of(verdict("e", "F-Acc", error=3e-3, t_agent=1.0, timed_errors=[3e-3, 6e-3, 3e-3]))
    assert tables.regate(timed_worse, 50, 3) == "F-Acc" and tables.regate(timed_worse, 100, 3) == "PASS"


def test_flagged_items_have_a_table_of_their_own():
    rows = [load_row(verdict("a", "PASS")),
            load_row(verdict("b", "PASS", flags=["timed run 1 used 1.95 cores over its window (more than 1.2)"]))]
    table = tables.flag_table(rows)
    assert [row[2:] for row in table.rows] == [["b", "PASS", rows[1]["flags"][0]]]
    assert tables.flag_table(rows[:1]) is None


def load_row(verdict_dict):
    from pytest_pdebench.analysis.runs import Run, row_of

    return row_of(verdict_dict, Run(path=None, label="x", machine="m", sandbox="bubblewrap"), None)


def test_sensitivity_cells_mark_undecided_items(tmp_path):
    run = load_run(json_report(tmp_path / "r.json", [
        verdict("a", "PASS"), verdict("b", "F-Acc", error=3e-3, t_agent=None), verdict("c", "F-Time", t_agent=4.0)]))
    by_acc, by_time = tables.sensitivity_tables(run.rows)
    cells = by_acc.rows[0][3:]
    assert by_acc.headers[5] == "alpha_acc=10 (default)"
    assert cells[2] == "33.3"  # the default: exactly the stored outcomes
    assert cells[3] == ">= 33.3"  # alpha_acc 50: b would be accurate, but was not timed
    assert by_time.rows[0][3:] == ["33.3", "33.3", "33.3", "66.7"]  # c passes at alpha_time 5


def test_attempts_template_cost_and_pass_at_k(tmp_path):
    single = [verdict("p1", "PASS", llm=llm("m1", ["F-Exec", "PASS"])),
              verdict("p2", "F-Acc", error=5e-3, t_agent=None, llm=llm("m1", ["F-Exec", "F-Acc"])),
              verdict("p3", "PASS", llm=llm("m1", ["PASS"]))]
    template = [verdict(c, "PASS", llm=llm("m1", ["PASS"], prompt_mode="template", cost=0.02))
                for c in ("p1", "p2", "p3")]
    again = [verdict("p1", "F-Acc", error=5e-3, t_agent=None, llm=llm("m1", ["F-Acc", "F-Acc"])),
             verdict("p2", "F-Acc", error=5e-3, t_agent=None, llm=llm("m1", ["F-Acc", "F-Acc"])),
             verdict("p3", "PASS", llm=llm("m1", ["PASS"]))]
    runs = [load_run(json_report(tmp_path / f"{name}.json", v)) for name, v in
            (("single", single), ("template", template), ("again", again))]
    rows = tables.label_groups([row for run in runs for row in run.rows])
    curve, moves = tables.attempt_tables(rows)
    m1 = next(row for row in curve.rows if row[0] == "m1")
    assert m1[2:] == [6, "33.3%", "50.0%"]  # 6 runs of m1: p3 twice at attempt 1 (2/6), p1 once at 2 (3/6)
    assert ["m1", "dolfinx", "F-Exec -> PASS", 1] in moves.rows
    (paired,) = tables.template_table(rows).rows
    assert paired[:4] == ["m1 (template)", "m1", "dolfinx", 3]
    cost = {row[0]: row for row in tables.cost_table(rows).rows}
    assert cost["m1 (template)"][6] == "0.06" and cost["m1 (template)"][8] == "0.0200"
    (at_k,) = tables.pass_at_k_table(rows).rows
    # m1 ran each case twice: p1 1/2, p2 0/2, p3 2/2 -> pass@1 = 1/2, pass@2 = (1 + 0 + 1) / 3
    assert at_k[:4] == ["m1", "dolfinx", 3, 2] and at_k[4:] == ["50.0", "66.7"]
    summary = write_report(runs, tmp_path / "report")
    assert {"attempts", "attempt_transitions", "template", "cost", "pass_at_k"} <= set(summary["tables"])
    assert {"attempts", "cost"} <= set(summary["figures"])


def test_runs_on_two_machines_are_not_pooled(tmp_path):
    runs = [load_run(json_report(tmp_path / "a.json", [verdict("p1", "PASS")], machine="fast-8cpu")),
            load_run(json_report(tmp_path / "b.json", [verdict("p1", "F-Time", t_agent=9.0)], machine="slow-2cpu"))]
    rows = tables.label_groups([row for run in runs for row in run.rows])
    assert sorted({row["system"] for row in rows}) == ["plain [fast-8cpu, bubblewrap]", "plain [slow-2cpu, bubblewrap]"]


def test_runs_with_the_warm_and_the_cold_runner_are_not_pooled(tmp_path):
    """A verdict from before the warm runner (no runner key) counts as cold."""
    runs = [load_run(json_report(tmp_path / "a.json", [verdict("p1", "PASS", runner="warm")])),
            load_run(json_report(tmp_path / "b.json", [verdict("p1", "PASS")]))]
    rows = tables.label_groups([row for run in runs for row in run.rows])
    assert sorted({row["system"] for row in rows}) == ["plain [m-2cpu, bubblewrap (warm runner)]",
                                                       "plain [m-2cpu, bubblewrap]"]


def test_runs_against_two_calibrations_are_not_pooled(tmp_path):
    a = verdict("p1", "PASS", calibration="calibrations/dolfinx/m-2cpu.json")
    b = verdict("p1", "PASS", calibration="calibrations/dolfinx/m-2cpu+docker-4d7eb552c5cf.json")
    rows = tables.label_groups([row for run in (load_run(json_report(tmp_path / "a.json", [a])),
                                                load_run(json_report(tmp_path / "b.json", [b]))) for row in run.rows])
    assert len({row["system"] for row in rows}) == 2


def test_runs_under_loosened_gates_are_marked_and_never_pooled(tmp_path):
    """Issue 62: --pde-tau-max=1 let a solver that writes the text's closed form PASS unmarked."""
    from pytest_pdebench.settings import gates_note

    assert gates_note({"tau_max": 1.0}) == "thresholds loosened: tau_max 1"
    assert gates_note({"alpha_acc": 5.0, "baseline": "stored"}) == (
        "thresholds tightened: alpha_acc 5; baseline stored (not the default)")
    assert gates_note({"baseline": "stored"}, thresholds_only=True) == ""  # the calibration column tells those apart
    assert gates_note({}) == ""
    loose = verdict("p1", "PASS", gate_options={"tau_max": 1.0})
    runs = [load_run(json_report(tmp_path / "a.json", [verdict("p1", "F-Acc")])),
            load_run(json_report(tmp_path / "b.json", [loose]))]
    rows = tables.label_groups([row for run in runs for row in run.rows])
    assert sorted({row["system"] for row in rows}) == ["plain", "plain [thresholds loosened: tau_max 1]"]
    summary = write_report(runs, tmp_path / "report")
    assert "thresholds loosened: tau_max 1" in (tmp_path / "report" / "report.md").read_text(), summary


def test_bad_input_says_what_and_where(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"tests": []}')
    with pytest.raises(ReportError, match="bad.json: a pytest JSON report with no PDEAgent-Bench verdicts"):
        load_run(bad)
    bad.write_text('{"case_id": "x", "library": "dolfinx", "outcome": "PASS"}\nnot json\n')
    with pytest.raises(ReportError, match=r"bad.json:2: neither a pytest JSON report nor JSON lines"):
        load_run(bad)
    with pytest.raises(ReportError, match="cannot read it"):
        load_run(tmp_path / "absent.json")


def test_report_folder_from_the_command_line(two_systems, tmp_path):
    out = tmp_path / "report"
    done = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "report", f"PLAIN={two_systems[0].path}",
                           str(two_systems[1].path), "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} == {"report.md", "report.html", "summary.json", "cases.csv", "tables.tex",
                                               "figures", "items"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tables"]["families_dolfinx"]["headers"] == ["family", "PLAIN", "tuned"]
    assert set(summary["figures"]) == {"stages", "families", "sensitivity", "gates_scatter"}
    assert all((out / "figures" / f"{stem}.{suffix}").stat().st_size > 1000 for stem in summary["figures"]
               for suffix in ("png", "svg"))
    with (out / "cases.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 8
    assert "| poisson " in (out / "report.md").read_text()
    assert "\\toprule" in (out / "tables.tex").read_text()
    page = (out / "report.html").read_text()
    # the audit folder relative to the report, so that copying both keeps the link
    relative = os.path.relpath("/tmp/out/dolfinx/p1", out)
    assert page.count("<svg") == 4 and f'href="{relative}"' in page and "file://" not in page
    markdown = (out / "report.md").read_text()
    for stem in summary["figures"]:  # a caption in words, in both pages, never the file's stem
        words = figures.caption(stem)
        assert len(words.split()) >= 10 and words.endswith(".")
        assert f"<figcaption>{html.escape(words)}</figcaption>" in page and f"_{words}_" in markdown
        assert f"<figcaption>{stem}</figcaption>" not in page
    missing = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "report", str(tmp_path / "nope.json")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "nope.json: cannot read it" in missing.stderr


def test_write_report_without_figures(two_systems, tmp_path):
    summary = write_report(two_systems, tmp_path / "r", with_figures=False)
    assert summary["figures"] == [] and "stages" in summary["tables"]


# --- items that ended without a verdict (issue 37) ---

def crashed(nodeid, outcome="failed", phase="call", message="RecursionError: maximum recursion depth exceeded"):
    """A json-report test whose item failed before its verdict was written: no metadata."""
    return {"nodeid": nodeid, "outcome": outcome,
            phase: {"outcome": "failed", "crash": {"path": "gates.py", "lineno": 1, "message": message}}}


@pytest.fixture
def crashes_report(tmp_path):
    """'plain' on dolfinx: p1 PASS and p2 F-Acc with verdicts; p3 crashed in its test and p4
    in its set-up, neither wrote a verdict; p5 skipped (no runtime here); a validation item
    and another plugin's test failed (neither is a case item)."""
    setting = {"runner": "warm", "calibration": "calibrations/dolfinx.json"}
    judged = [verdict("p1", "PASS", **setting), verdict("p2", "F-Acc", error=5e-3, t_agent=None, **setting)]
    tests = [{"nodeid": f"cases.jsonl::{v['case_id']}[dolfinx]", "outcome": "passed" if v["outcome"] == "PASS"
              else "failed", "metadata": {"pde": v}} for v in judged]
    tests += [crashed("cases.jsonl::p3[dolfinx]"),
              crashed("cases.jsonl::p4[dolfinx]", outcome="error", phase="setup", message="OSError: disk full"),
              {"nodeid": "cases.jsonl::p5[dolfinx]", "outcome": "skipped"},
              crashed("cases.jsonl::p6[validate]"), crashed("tests/test_other.py::test_x[dolfinx]")]
    path = tmp_path / "plain.json"
    path.write_text(json.dumps({"tests": tests, "pde": {"machine": "m-2cpu", "sandbox": "bubblewrap",
                                                        "source": "submissions/plain", "mode": "evaluation"}}))
    return path


def test_an_item_without_a_verdict_counts_as_f_exec(crashes_report, tmp_path):
    run = load_run(crashes_report)
    rows = {row["case_id"]: row for row in run.rows}
    assert {case: row["outcome"] for case, row in rows.items()} == {"p1": "PASS", "p2": "F-Acc", "p3": "F-Exec",
                                                                    "p4": "F-Exec"}
    assert rows["p3"]["reason"] == "no verdict (RecursionError: maximum recursion depth exceeded)"
    assert rows["p4"]["reason"] == "no verdict (OSError: disk full)" and rows["p4"]["exec_category"] == "no verdict"
    # counted with the run's system and setting, not as a system of its own
    assert {(row["system"], row["runner"], row["calibration"]) for row in run.rows} == {
        ("plain", "warm", "calibrations/dolfinx.json")}
    summary = write_report([run], tmp_path / "report", with_figures=False)
    (stages,) = summary["tables"]["stages"]["rows"]
    assert stages[2:5] == [4, "1 (25.0%)", "2 (50.0%)"]
    reasons = summary["tables"]["exec_reasons"]
    assert reasons["headers"] == ["system", "library", "F-Exec", "no verdict"] and reasons["rows"][0][2:] == [2, 2]
    assert summary["tables"]["families_dolfinx"]["rows"][-1][1].endswith("n=4")


def test_pdebench_table_counts_an_item_without_a_verdict(crashes_report):
    done = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "table", str(crashes_report), "--format",
                           "simple"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    overall = next(line for line in done.stdout.splitlines() if line.startswith("overall"))
    assert overall.split()[1:] == ["1", "2", "1", "0", "25.0%"]  # PASS, F-Exec, F-Acc, F-Time
    assert "gates passed: executed 2 of 4 items (50.0%); accurate 1 of 2 executed (50.0%)" in done.stdout
    done = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "table", str(crashes_report), "--json"],
                          capture_output=True, text=True)
    rates = json.loads(done.stdout)["dolfinx"]
    assert rates["items"] == 4 and rates["exec_rate"] == 0.5


def test_the_terminal_table_counts_an_item_without_a_verdict():
    """The plugin's recorder: one stand-in per case item that failed without a verdict (in
    set-up, in its test, or its xdist worker died), never one more for a failed teardown."""
    from types import SimpleNamespace

    from pytest_pdebench.hooks import _Recorder
    from pytest_pdebench.items import case_item_name, case_item_of
    from pytest_pdebench.report import tables_by_library

    def report(name, when, failed, pde=None, message=None):
        crash = SimpleNamespace(reprcrash=SimpleNamespace(message=message)) if message else None
        return SimpleNamespace(nodeid=f"cases.jsonl::{name}", when=when, failed=failed, longrepr=crash,
                               user_properties=[("pde", pde)] if pde else [])

    run = SimpleNamespace(validate=False, source=SimpleNamespace(label="submissions/plain"))
    recorder = _Recorder(run)
    passed = verdict("p1", "PASS")
    for logged in (report("p1[dolfinx]", "call", False, passed), report("p1[dolfinx]", "teardown", True, passed),
                   report("p3[dolfinx]", "setup", False), report("p3[dolfinx]", "call", True, message="KeyError: 'u'"),
                   report("p3[dolfinx]", "teardown", True, message="OSError"),
                   report("p4[dolfinx@m-4cpu]", "setup", True, message="worker 'gw0' crashed"),
                   report("p5[dolfinx]", "setup", False), report("p6[validate]", "call", True, message="bad")):
        recorder.pytest_runtest_logreport(logged)
    assert [(v["case_id"], v["outcome"], v["reason"]) for v in recorder.verdicts] == [
        ("p1", "PASS", ""), ("p3", "F-Exec", "no verdict (KeyError: 'u')"),
        ("p4", "F-Exec", "no verdict (worker 'gw0' crashed)")]
    ((library, table),) = tables_by_library(recorder.verdicts)
    overall = next(line for line in table.splitlines() if line.startswith("overall"))
    assert library == "dolfinx" and overall.split()[1:] == ["1", "2", "0", "0", "33.3%"]
    assert case_item_of(f"cases.jsonl::{case_item_name('p1', 'dealii', 'm-4cpu')}") == ("p1", "dealii")


def test_the_report_says_whose_timing_t_base_is():
    rows = [{"system": "s", "library": "dolfinx", "t_base_from": origin}
            for origin in ("stored", "stored", "kept", "paired", "stored elsewhere")]  # fmt: skip
    rows.append({"system": "s", "library": "dolfinx", "t_base_from": ""})  # a stand-in: no timing
    table = tables.t_base_table(rows)
    assert table.headers == ["system", "library", "items", "stored", "stored elsewhere", "kept", "paired"]
    assert table.rows == [["s", "dolfinx", 5, 2, 1, 1, 1]]
    assert tables.t_base_table(rows[-1:]) is None


def test_the_scatter_shows_every_item(two_systems):
    """Timed items as points, an F-Acc the accuracy gate stopped before timing as a cross on the
    "not timed" line, and the F-Exec without an error counted in the corner."""
    import matplotlib

    matplotlib.use("Agg")
    rows = tables.label_groups([row for run in two_systems for row in run.rows])
    figure = figures._scatter(rows)
    axes = figure.axes[0]
    drawn = {collection.get_label(): len(collection.get_offsets()) for collection in axes.collections}
    assert drawn == {"plain / dolfinx": 2, "plain / dolfinx: not timed": 1, "tuned / dolfinx": 4}, drawn
    assert [text.get_text() for text in axes.texts] == ["1 item(s) without an error (F-Exec) not drawn"]
