"""Collection, options, markers, skipping and bad-input messages, through pytester."""

from __future__ import annotations

import json

import pytest

from pytest_pdebench.testing import ORACLE, record_dict, write_calibration, write_jsonl


@pytest.fixture
def suite(pytester):
    """Three cases: two for all libraries, one for DOLFINx only; a calibration for all."""
    heat = record_dict("heat_l_shape")
    only_dolfinx = record_dict("poisson_circle")
    only_dolfinx["supported_libraries"] = ["dolfinx"]
    records = [record_dict("poisson_basic"), heat, only_dolfinx]
    cases = write_jsonl(pytester.path / "cases.jsonl", records)
    write_calibration(pytester.path / "calib", "dolfinx", records, 1e-4, 1.0)
    # a regular test file that must not be collected in benchmark mode
    pytester.makepyfile(test_unrelated="def test_unrelated():\n    assert False\n")
    return cases


def options(cases, *extra):
    """A run judged by the test's calibrations (--pde-baseline=stored: no oracle timed first)."""
    return ["-p", "no:cacheprovider", f"--pde-cases={cases}", f"--pde-submissions={ORACLE}",
            f"--pde-calibrations={cases.parent / 'calib'}", "--pde-baseline=stored", *extra]


def collected_ids(result) -> list[str]:
    return [line.split("::", 1)[1] for line in result.outlines if "::" in line]


def test_one_item_per_case_and_supported_library(pytester, suite):
    result = pytester.runpytest(*options(suite, "--collect-only", "-q"))
    assert sorted(collected_ids(result)) == sorted([
        "poisson_basic[dolfinx]", "poisson_basic[firedrake]", "poisson_basic[dealii]",
        "heat_l_shape[dolfinx]", "heat_l_shape[firedrake]", "heat_l_shape[dealii]",
        "poisson_circle[dolfinx]",
    ])


def test_library_option_selects_tracks(pytester, suite):
    result = pytester.runpytest(*options(suite, "--collect-only", "-q", "--pde-library=firedrake,dealii"))
    ids = collected_ids(result)
    assert len(ids) == 4 and not any("dolfinx" in i for i in ids)
    result = pytester.runpytest(*options(suite, "--collect-only", "-q", "--pde-library", "dolfinx",
                                         "--pde-library", "DOLFINX"))
    assert len(collected_ids(result)) == 3


def test_unknown_library_is_a_usage_error(pytester, suite):
    result = pytester.runpytest(*options(suite, "--pde-library=fenics"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown library 'fenics'; choose from dolfinx, firedrake, dealii*"])


def test_unknown_option_is_rejected(pytester, suite):
    result = pytester.runpytest(*options(suite, "--pde-frobnicate"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --pde-frobnicate*"])


def test_missing_submissions_directory(pytester, suite):
    result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-cases={suite}", "--pde-submissions=nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--pde-submissions: no directory at nowhere*"])


def test_without_a_source_option_cases_are_not_collected(pytester, suite):
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    assert collected_ids(result) == ["test_unrelated"]


@pytest.mark.parametrize("selection, expected", [
    (["-m", "heat"], ["heat_l_shape[dolfinx]"]),
    (["-m", "poisson and circle"], ["poisson_circle[dolfinx]"]),
    (["-m", "elliptic and unit_square"], ["poisson_basic[dolfinx]"]),
    (["-k", "l_shape"], ["heat_l_shape[dolfinx]"]),
    (["-k", "poisson_basic"], ["poisson_basic[dolfinx]"]),
    (["-m", "dolfinx and not heat"], ["poisson_basic[dolfinx]", "poisson_circle[dolfinx]"]),
    (["-m", "manufactured_solution and not poisson"], ["heat_l_shape[dolfinx]"]),
    (["-m", "reference_numerical"], []),
])
def test_markers_and_keywords_select(pytester, suite, selection, expected):
    result = pytester.runpytest(*options(suite, "--collect-only", "-q", "--pde-library=dolfinx", *selection))
    assert sorted(collected_ids(result)) == expected


def test_markers_are_registered(pytester, suite):
    result = pytester.runpytest("--markers")
    for marker in ("poisson:", "parabolic:", "dealii:", "t_junction:", "incompressible_flow:", "reference_numerical:"):
        assert any(line.startswith(f"@pytest.mark.{marker}") for line in result.outlines), marker


def test_missing_runtime_skips_with_install_hint(pytester, suite, monkeypatch):
    from pytest_pdebench.libraries import _detect_runtime as detect_runtime  # the cache itself

    detect_runtime.cache_clear()
    monkeypatch.setenv("PDEBENCH_DOLFINX_PYTHON", "/nonexistent/venv/bin/python")
    try:
        result = pytester.runpytest(*options(suite, "--pde-library=dolfinx", "-rs"))
    finally:
        detect_runtime.cache_clear()
    result.assert_outcomes(skipped=3)  # every case of the suite fixture is on DOLFINx
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # nothing judged is not success
    result.stdout.fnmatch_lines(["*SKIPPED*dolfinx runtime not found*pip install dolfinx-solver-real*"])
    monkeypatch.setenv("PDEBENCH_FIREDRAKE_PYTHON", "/nonexistent/venv/bin/python")
    try:
        result = pytester.runpytest(*options(suite, "--pde-library=firedrake", "-rs"))
    finally:
        detect_runtime.cache_clear()
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*SKIPPED*firedrake runtime not found*pdebench provision firedrake*"])


def test_missing_dolfinx_says_what_to_install(pytester, suite, monkeypatch):
    from pytest_pdebench.libraries import _detect_runtime as detect_runtime  # the cache itself

    detect_runtime.cache_clear()
    monkeypatch.setenv("PDEBENCH_DOLFINX_PYTHON", "/usr/bin/true-python-that-does-not-exist")
    try:
        result = pytester.runpytest(*options(suite, "--pde-library=dolfinx", "-rs", "-k", "poisson_basic"))
    finally:
        detect_runtime.cache_clear()
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*left out of the pass rates (the run exits with status 1*",
                                 "*dolfinx runtime not found*pip install dolfinx-solver-real*"])  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_malformed_jsonl_fails_collection_with_file_and_line(pytester, suite):
    bad = pytester.path / "bad.jsonl"
    bad.write_text(json.dumps(record_dict("heat_basic")) + "\n{not json}\n")
    result = pytester.runpytest(*options(bad))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"*{bad}:2: malformed JSON*"])


def test_invalid_record_names_file_line_and_field(pytester, suite):
    data = record_dict()
    data["case_spec"]["eval_grid"]["nx"] = 0
    bad = write_jsonl(pytester.path / "bad.jsonl", [data])
    result = pytester.runpytest(*options(bad))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"*{bad}:1: record 'poisson_basic' does not match*case_spec/eval_grid/nx*"])


def test_duplicate_ids_fail_collection(pytester, suite):
    directory = pytester.mkdir("twice")
    write_jsonl(directory / "a.jsonl", [record_dict()])
    write_jsonl(directory / "b.jsonl", [record_dict()])
    result = pytester.runpytest(*options(directory))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*b.jsonl:1: duplicate case id 'poisson_basic' (first at *a.jsonl:1)*"])


def test_missing_calibration_is_an_error_naming_the_fix(pytester, suite, dolfinx_available):
    result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-cases={suite}", f"--pde-submissions={ORACLE}",
                                f"--pde-calibrations={pytester.path / 'empty'}", "--pde-library=dolfinx",
                                "--pde-baseline=stored", "-k", "poisson_circle")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no calibration for case 'poisson_circle' on dolfinx*pdebench calibrate*"])


def test_missing_bubblewrap_stops_with_install_message(pytester, suite, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    result = pytester.runpytest(*options(suite))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*apt-get install bubblewrap*"])


def test_unsandboxed_mode_warns_loudly(pytester, suite):
    result = pytester.runpytest(*options(suite, "--pde-sandbox=none", "--collect-only", "-q"))
    result.stdout.fnmatch_lines(["*UNSANDBOXED*"])


def test_no_solver_for_a_case_is_an_exec_failure(pytester, suite, dolfinx_available):
    """The folder has solvers for the track, none for this case: F-Exec, counted (a folder
    with none for the whole track has its items "not run": tests/test_not_run.py)."""
    empty = pytester.mkdir("no_solvers")
    (empty / "dolfinx").mkdir()
    (empty / "dolfinx" / "heat.py").write_text("def solve(case_spec):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-cases={suite}", f"--pde-submissions={empty}",
                                f"--pde-calibrations={pytester.path / 'calib'}", "--pde-library=dolfinx",
                                "-k", "poisson_basic")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*F-Exec: no solver for case 'poisson_basic'*dolfinx/poisson_basic.py*"])


def test_a_solver_folder_link_is_followed_only_within_the_folder(pytester, suite, dolfinx_available):
    folder = pytester.mkdir("linked")
    (folder / "dolfinx").mkdir()
    (folder / "shared.py").write_text("def solve(case_spec):\n    raise RuntimeError('ran the linked solver')\n")
    (folder / "dolfinx" / "poisson_basic.py").symlink_to(folder / "shared.py")  # inside: followed
    outside = pytester.path / "answer.txt"
    outside.write_text("the stored answer")
    (folder / "_answer.py").symlink_to(outside)  # a helper outside the folder: refused
    common = ["-p", "no:cacheprovider", f"--pde-cases={suite}", f"--pde-submissions={folder}",
              f"--pde-calibrations={pytester.path / 'calib'}", "--pde-library=dolfinx", "-k", "poisson_basic"]
    result = pytester.runpytest(*common)
    result.stdout.fnmatch_lines(["*F-Exec: *_answer.py links to *answer.txt, outside *linked and not a .py file: "
                                 "not followed*"])
    (folder / "_answer.py").unlink()
    result = pytester.runpytest(*common)
    result.stdout.fnmatch_lines(["*F-Exec:*ran the linked solver*"])


def test_header_names_mode_machine_and_sandbox(pytester, suite):
    result = pytester.runpytest(*options(suite, "--collect-only", "-q", "-v"))
    # no --pde-library: the tracks the folder has solvers for (the oracle has all three), said so
    result.stdout.fnmatch_lines(["pdebench: evaluation of *oracle on dolfinx, firedrake, dealii (the tracks *oracle "
                                 "has solvers for; --pde-library chooses); machine *; sandbox bubblewrap*"])


def test_baselines_measured_with_the_other_runner_are_flagged(pytester, suite):
    """A calibration made with a fresh interpreter per run (every one before the warm
    runner) does not time runs forked from a zygote like for like: the header says so."""
    path = next((pytester.path / "calib" / "dolfinx").glob("*.json"))
    data = json.loads(path.read_text())
    data["conditions"] = {"workers": 1, "sandbox": "bubblewrap"}  # no runner: calibrated cold
    path.write_text(json.dumps(data))
    warm = pytester.runpytest(*options(suite, "--collect-only", "--pde-library=dolfinx"))
    warm.stdout.fnmatch_lines(["*WARNING: dolfinx: *other conditions (runner warm here, cold in the calibration)*"
                               "--pde-runner=cold matches them*"])  # fmt: skip
    cold = pytester.runpytest(*options(suite, "--collect-only", "--pde-library=dolfinx", "--pde-runner=cold"))
    assert "other conditions" not in cold.stdout.str()


def test_conditions_that_differ_alike_on_several_tracks_are_one_line_with_the_option(tmp_path):
    from pytest_pdebench.calibration import CalibrationStore
    from pytest_pdebench.settings import Settings
    from pytest_pdebench.speed import RunConditions

    settings = Settings(output_dir=tmp_path / "out", runs=3)
    store = CalibrationStore(tmp_path / "calib", machine="test-machine")
    for library in ("dolfinx", "firedrake", "dealii"):  # timed with -n 2; no probe times: no drift line
        store.write(library, {"c": {"e_base": 1e-3, "t_base": 1.0}}, conditions=RunConditions(settings, store, 2).of(library))
    lines = RunConditions(settings, store, workers=1).mismatches(["dolfinx", "firedrake", "dealii"])
    assert lines == ["dolfinx, firedrake, dealii: runtime baselines were measured under other conditions "
                     "(workers 1 here, 2 in the calibration): t_agent / t_base is not like for like; -n 2 matches them"]


def test_last_failed_reruns_only_the_failed_items(pytester, suite, dolfinx_available):
    """pytest's cache keys are node ids parsed back into structured ids (pytest 9): an item
    named ``case[library]`` must carry the id that parse gives, or ``--lf`` reruns everything."""
    solvers = pytester.path / "solvers" / "dolfinx"
    solvers.mkdir(parents=True)
    (solvers / "solver.py").write_text("def solve(case_spec):\n    raise RuntimeError('no solve')\n")
    args = [f"--pde-cases={suite}", f"--pde-submissions={solvers.parent}", f"--pde-calibrations={suite.parent / 'calib'}",
            "--pde-library=dolfinx", "-p", "no:randomly"]  # fmt: skip
    first = pytester.runpytest_subprocess(*args, "-k", "poisson_basic or heat_l_shape")
    first.assert_outcomes(failed=2, deselected=1)
    again = pytester.runpytest_subprocess(*args, "--lf")
    again.assert_outcomes(failed=2, deselected=1)
    again.stdout.fnmatch_lines(["*run-last-failure: rerun previous 2 failures*"])
    first_failed = pytester.runpytest_subprocess(*args, "--ff", "--co", "-q")
    assert [line.split("::", 1)[1] for line in first_failed.outlines if "::" in line][:2] == [
        "poisson_basic[dolfinx]", "heat_l_shape[dolfinx]"]  # fmt: skip


def test_a_cases_folder_without_records_is_not_a_suite(pytester):
    """A project's cases/ that holds only a schema file (what `pdebench schema` writes) does not
    replace the bundled suite; the header names the case source and its records; a case
    source with no records is an error that says what to do."""
    from pytest_pdebench.bundled import bundled, count_records

    (pytester.path / "cases").mkdir()
    (pytester.path / "cases" / "schema.json").write_text("{}")
    suite = bundled("cases")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-submissions={ORACLE}", "--pde-library=dolfinx",
                                "--collect-only")  # fmt: skip
    result.stdout.fnmatch_lines([f"pdebench: cases {suite.resolve()} ({count_records(suite)} records)"])
    (pytester.path / "none.jsonl").write_text("\n\n")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-submissions={ORACLE}", "--pde-cases=none.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*none.jsonl: no case records in it*pass --pde-cases with a file or folder of records*"])


def test_schema_check_checks_the_schema_a_run_here_uses(tmp_path):
    import subprocess
    import sys

    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "schema.json").write_text("{}")  # a stale file in a folder with no records
    done = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "schema", "--check"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "matches the models" in done.stdout, done.stderr


def test_oracle_and_textbook_name_the_bundled_solver_folders(pytester, suite):
    from pytest_pdebench.bundled import bundled

    for name in ("oracle", "textbook"):
        result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-cases={suite}", f"--pde-submissions={name}",
                                    "--pde-library=dolfinx", "--collect-only")  # fmt: skip
        result.stdout.fnmatch_lines([f"pdebench: evaluation of {bundled(f'submissions/{name}')} on dolfinx*"])
    (pytester.path / "oracle" / "dolfinx").mkdir(parents=True)  # a folder of that name here is the user's own
    (pytester.path / "oracle" / "dolfinx" / "solver.py").write_text("def solve(case_spec):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-cases={suite}", "--pde-submissions=oracle",
                                "--pde-library=dolfinx", "--collect-only")  # fmt: skip
    result.stdout.fnmatch_lines(["pdebench: evaluation of oracle on dolfinx*"])


def test_smoke_names_the_bundled_smoke_suite(pytester):
    from pytest_pdebench.bundled import SMOKE_CASES, count_records

    result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-submissions={ORACLE}", "--pde-cases=smoke",
                                "--pde-library=dolfinx", "--collect-only")  # fmt: skip
    smoke = SMOKE_CASES
    assert count_records(smoke) == 53
    result.stdout.fnmatch_lines([f"pdebench: cases {smoke.resolve()} (53 records)", "*53 tests collected*"])
