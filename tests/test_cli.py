"""The `pdebench` command's messages (issue 40): its help lists every subcommand, and an
input that is missing or cannot be read ends a subcommand with one line naming it and what
to pass (exit code 2), never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from pytest_pdebench import cli
from pytest_pdebench.cli.common import JSON_REPORT
from pytest_pdebench.testing import REPO, json_report, verdict

CASES = str(REPO / "cases")
READS_NO_FILE = {"schema", "containers", "provision"}  # write, talk to an engine, build: no input file to miss


def subcommands() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_the_help_lists_every_subcommand_with_what_it_does(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    for name, command in subcommands().items():
        entry = next((i for i, line in enumerate(lines) if line.split()[:2] == ["pdebench", name]), None)
        assert entry is not None, f"`pdebench {name}` is not in the help's synopsis"
        text = " ".join(line.strip() for line in lines[entry : entry + 4])
        assert command.description and command.description.split()[0] in text


def test_the_synopsis_shows_positional_and_required_arguments(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "pdebench table REPORT.json " in out
    assert "pdebench variants [CASES] --seed SEED " in out
    assert "pdebench merge SHARD_REPORT [SHARD_REPORT ...] --out OUT\n" in out


# one or more per subcommand that reads a file or folder; ABSENT is a path that does not
# exist (the message must name it), TMP a folder to write in
MISSING_INPUT = [
    ["cases", "--cases", "ABSENT"],
    ["table", "ABSENT"],
    ["merge", "ABSENT", "ABSENT", "--out", "TMP/merged.json"],
    ["report", "ABSENT", "--out", "TMP/report"],
    ["import-upstream", "ABSENT"],
    ["build-starter", "--upstream", "ABSENT", "--output", "TMP/starter.jsonl"],
    ["build-suite", "--upstream", "ABSENT", "--output", "TMP/suite.jsonl"],
    ["calibrate", "--cases", "ABSENT"],
    ["calibrate", "--cases", CASES, "--oracle", "ABSENT"],
    ["materialize", "--cases", "ABSENT"],
    ["calibration-configs", "ABSENT"],
    ["calibration-configs", CASES, "--upstream", "ABSENT", "--calibrations", "TMP"],
    ["calibration-summary", "--cases", "ABSENT"],
    ["reference-agreement", "--no-run", "--cases", "ABSENT"],
    ["variants", "ABSENT", "--seed", "1"],
    ["leak-audit", "ABSENT"],
    ["attack-audit", "ABSENT"],
    ["attack-audit", CASES, "--solver", "ABSENT"],
    ["build-references", "ABSENT"],
    ["build-references", CASES + "/suite.jsonl", "--oracle", "ABSENT"],
    ["build-solve-only", "ABSENT", "--out", "TMP/solve-only"],
    ["build-solve-only", CASES + "/suite.jsonl", "--out", "TMP/solve-only", "--oracle", "ABSENT"],
    ["prompt", "x", "--cases", "ABSENT"],
    ["prompt", "x", "--cases", CASES, "--guides", "ABSENT"],
    ["prompt-cost", "--cases", "ABSENT"],
    ["prompt-cost", "--cases", CASES, "--guides", "ABSENT"],
]


def test_every_subcommand_that_reads_a_file_is_checked_here():
    assert {argv[0] for argv in MISSING_INPUT} | READS_NO_FILE == set(subcommands())


@pytest.mark.parametrize("argv", MISSING_INPUT, ids=" ".join)
def test_a_missing_input_is_one_line_naming_it(tmp_path, capsys, argv):
    absent = str(tmp_path / "absent")
    code = cli.main([absent if word == "ABSENT" else word.replace("TMP", str(tmp_path)) for word in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"pdebench {argv[0]}: ") and absent in err, err
    assert "pass" in err  # and what to pass instead


@pytest.fixture
def report(tmp_path):
    return json_report(tmp_path / "run.json", [verdict("p1", "PASS"), verdict("p2", "F-Acc", error=5e-3),
                                               verdict("p3", "F-Exec", error=None, t_agent=None),
                                               verdict("h1", "PASS", library="dealii", family="heat")])


def table(argv, capsys):
    code = cli.main(["table", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("content", "says"), [
    (None, "cannot read it (Is a directory)"),
    ("not json at all", "not JSON (Expecting value, line 1)"),
    ('{"summary": {}}', "JSON, but not a pytest JSON report (no 'tests')"),
    ('{"tests": []}', "no PDEAgent-Bench verdicts in it"),
    (b"\xff\xfe\x00", "not text"),
])
def test_table_says_why_it_cannot_use_a_file(tmp_path, capsys, content, says):
    path = tmp_path / "input"
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    code, out, err = table([str(path)], capsys)
    assert code == 2 and out == ""
    assert err == f"pdebench table: {path}: {says}; pass {JSON_REPORT}\n"


def test_table_labels_what_it_prints_after_each_table(report, capsys):
    code, out, err = table([str(report), "--format", "simple"], capsys)
    assert code == 0, err
    assert "{" not in out  # no unlabelled JSON after the tables
    blocks = out.strip().split("\n\n")
    assert blocks[0].startswith("dealii:\n") and blocks[2].startswith("dolfinx:\n")
    assert blocks[1] == "gates passed: executed 1 of 1 items (100.0%); accurate 1 of 1 executed (100.0%); " \
                        "fast 1 of 1 accurate (100.0%)"
    assert blocks[3] == "gates passed: executed 2 of 3 items (66.7%); accurate 1 of 2 executed (50.0%); " \
                        "fast 1 of 1 accurate (100.0%)"


def test_table_json_is_the_gates_rates_per_library_alone(report, capsys):
    code, out, err = table([str(report), "--json"], capsys)
    assert code == 0, err
    rates = json.loads(out)
    assert set(rates) == {"dealii", "dolfinx"}
    assert rates["dolfinx"] == {"items": 3, "exec_rate": 2 / 3, "acc_rate": 0.5, "time_rate": 1.0, "pass_rate": 1 / 3}


def test_a_malformed_case_file_is_one_line_naming_file_and_line(tmp_path, capsys):
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "x"\n')
    assert cli.main(["leak-audit", str(cases)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pdebench leak-audit: {cases}:1: malformed JSON") and err.count("\n") == 1


def test_every_option_of_every_command_has_a_help_line():
    from pytest_pdebench.cli import _parser

    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {action.dest}" for name, command in commands.choices.items()
               for action in command._actions if not action.help]  # fmt: skip
    assert not missing, missing


def test_cases_lists_and_filters_the_suite_a_run_takes(tmp_path):
    records = [json.loads(line) for line in (REPO / "cases" / "suite.jsonl").read_text().splitlines() if line]
    expected = sorted(r["id"] for r in records if r["pde_classification"]["equation_family"] == "poisson"
                      and r["case_spec"]["domain"]["type"] == "l_shape" and "dealii" in r["supported_libraries"])  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "cases", "--family", "poisson", "--domain",
                           "l_shape", "--library", "dealii", "--cases", str(REPO / "cases")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = sorted(line.split()[0] for line in done.stdout.splitlines() if line.startswith("poisson_"))
    assert listed == expected and f"{len(expected)} of {len(records)} records in" in done.stdout
    done = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "cases", "--match", "no_such_*"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1 and done.stdout.startswith("0 of ")  # nothing listed: not a success


def test_provision_runs_the_recipe_the_package_ships(tmp_path):
    """A wheel has no scripts/: the Firedrake recipe is package data, and `pdebench provision`
    runs it from wherever the package is; deal.II's needs are the apt line."""
    from pytest_pdebench.bundled import PACKAGE
    from pytest_pdebench.libraries.firedrake import PROVISION_SCRIPT

    assert PROVISION_SCRIPT.is_file() and PROVISION_SCRIPT.is_relative_to(PACKAGE)
    run = [sys.executable, "-m", "pytest_pdebench.cli", "provision"]
    done = subprocess.run([*run, "firedrake", "--dry-run"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PDEBENCH_CACHE": str(tmp_path / "cache")})  # fmt: skip
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[0] == f"bash {PROVISION_SCRIPT}", done.stdout
    # what it would do, cost and has done: the steps (none here), the packages, disk, time; nothing written
    assert [line.split("]")[0].split("[")[1] for line in lines if line.startswith("  ") and "[" in line] == ["to do"] * 8, lines
    assert "libopenmpi-dev" in done.stdout and "disk: about 1 GB" in done.stdout and "min the first time" in done.stdout
    assert not (tmp_path / "cache").exists()
    done = subprocess.run([*run, "firedrake", "--print"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0 and "firedrake-2026.10.0" in done.stdout
    done = subprocess.run([*run, "dealii"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0 and "apt-get install" in done.stdout and "libdeal.ii-dev" in done.stdout


def test_the_help_lists_a_user_s_commands_first_then_each_group_under_its_heading():
    from pytest_pdebench.cli import _parser, command_groups

    text = _parser().format_help()
    groups = command_groups()
    assert [heading for heading, _ in groups] == [
        "running and reading results", "building the suite", "calibrating", "auditing the suite"]
    assert "cases" in groups[0][1] and "report" in groups[0][1] and "calibrate" in groups[2][1]
    sections = [text.split(f"\n{heading}:\n")[1] for heading, _ in groups]
    for (heading, names), section, following in zip(groups, sections, [*sections[1:], ""]):
        listed = section[: len(section) - len(following)] if following else section
        assert all(f"pdebench {name}" in listed for name in names), heading
    assert sum(len(names) for _, names in groups) == len(set(n for _, names in groups for n in names)) == 22


@pytest.mark.parametrize(("argv", "says"), [
    (["--family", "nosuchfamily", "--seed", "1"], "invalid choice: 'nosuchfamily'"),
    (["--seed", "-1"], "-1: a seed is 0 or more"),
    (["--seed", "one"], "'one' is not a whole number"),
])  # fmt: skip
def test_variants_refuses_a_family_or_seed_it_cannot_draw(tmp_path, capsys, argv, says):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["variants", CASES, "--output", str(tmp_path / "v.jsonl"), *argv])
    assert stopped.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "v.jsonl").exists()


def test_variants_of_no_record_is_a_failure_not_an_empty_file(tmp_path, capsys):
    from pytest_pdebench.testing import record_dict, write_jsonl

    cases = write_jsonl(tmp_path / "cases.jsonl", [record_dict()])  # a poisson record
    code = cli.main(["variants", str(cases), "--seed", "1", "--family", "wave", "--output", str(tmp_path / "v.jsonl")])
    assert code == 1 and "nothing to vary" in capsys.readouterr().out
    assert not (tmp_path / "v.jsonl").exists()


@pytest.mark.parametrize("command", ["build-references", "build-solve-only"])
def test_a_build_that_rewrites_one_case_file_refuses_a_folder(tmp_path, capsys, command):
    out = ["--out", str(tmp_path / "out")] if command == "build-solve-only" else []
    code = cli.main([command, str(tmp_path), *out])
    err = capsys.readouterr().err
    assert code == 2 and f"{tmp_path}: a folder; pass the path of one case file" in err, err


def test_version_names_the_installed_package():
    import subprocess
    import sys
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"pdebench (pytest-pdebench) {version('pytest-pdebench')}"


def test_an_option_the_plugin_and_the_command_share_is_declared_once_with_one_meaning(pytester):
    """--pde-NAME and --NAME of every shared option say the same thing (shared_options.SHARED)."""
    from pytest_pdebench.shared_options import SHARED

    plugin_help = " ".join(pytester.runpytest("--help").stdout.lines)
    command_help = ""
    for name in ("calibrate", "prompt-cost", "calibration-summary"):
        done = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", name, "--help"], capture_output=True,
                              text=True, cwd=REPO)  # fmt: skip
        command_help += " ".join(done.stdout.split())
    plugin_help = " ".join(plugin_help.split())
    for name, spec in SHARED.items():
        meaning = " ".join(spec["help"].split())
        assert f"--pde-{name}" in plugin_help and meaning in plugin_help, name
        assert f"--{name}" in command_help and meaning in command_help, name


def test_cases_names_the_known_families_for_a_typo_and_takes_smoke(tmp_path):
    run = [sys.executable, "-m", "pytest_pdebench.cli", "cases"]
    typo = subprocess.run([*run, "--family", "poison"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert typo.returncode == 2 and "--family poison: no such family; one of poisson, helmholtz" in typo.stderr
    smoke = subprocess.run([*run, "--cases", "smoke"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert smoke.returncode == 0 and smoke.stdout.splitlines()[-1].startswith("53 of 53 records in "), smoke.stdout
