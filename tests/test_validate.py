"""`--pde-validate`: one test per record, each failure naming the record and the check."""

from __future__ import annotations

import json

import pytest

from pytest_pdebench.testing import record_dict


def broken(change, new_id):
    data = record_dict(new_id=new_id)
    change(data)
    return data


RECORDS = [
    record_dict(new_id="good_case"),
    broken(lambda d: d["pde_classification"].update(math_type=["hyperbolic"]), "wrong_math_type"),
    broken(lambda d: d["case_spec"]["pde"]["forcing"].update(value="2*pi**2*sin(pi*x)*sin(pi*y) + 1"),
           "inconsistent_forcing"),
    broken(lambda d: d["case_spec"]["eval_grid"].update(bbox=[2, 3, 2, 3]), "grid_outside"),
    broken(lambda d: d["case_spec"]["bc"].pop("dirichlet"), "no_boundary_data"),
    broken(lambda d: d["case_spec"]["eval_grid"].update(ny=1), "bad_schema"),
    broken(lambda d: d["case_spec"]["bc"]["dirichlet"].update(value="sin(pi*x)*sin(pi*y)*exp(-t)"), "steady_uses_t"),
    broken(lambda d: d["case_spec"]["bc"].update(
        dirichlet={"on": ["x_min", "y_min", "y_max"], "value": "sin(pi*x)*sin(pi*y)"},
        robin={"on": "x_max", "alpha": "2", "value": "pi*sin(pi*y)"}), "robin_data_off"),
    broken(lambda d: (d["case_spec"].update(domain={"type": "periodic_square", "bounds": [[0, 1], [0, 1]]}),
                      d["case_spec"]["bc"].update(periodic={"directions": ["x", "y"]})), "not_periodic"),
    broken(lambda d: (d["case_spec"]["pde"].update(type="biharmonic", params={},
                                                   forcing={"type": "expression", "value": "4*pi**4*sin(pi*x)*sin(pi*y)"}),
                      d["pde_classification"].update(equation_family="biharmonic")), "plate_missing_second_bc"),
]

EXPECTED = {
    "wrong_math_type[validate]": "record wrong_math_type: math type: math_type ['hyperbolic'] does not fit poisson",
    "inconsistent_forcing[validate]": "manufactured solution: the manufactured solution does not satisfy the PDE",
    "grid_outside[validate]": "evaluation grid: only 0 grid points (0%) lie inside the domain",
    "no_boundary_data[validate]": "boundary data: no Dirichlet, Robin or periodic condition",
    "robin_data_off[validate]": "boundary values: bc.robin[0] on x_max differs from the manufactured solution's "
                                "robin data",
    "not_periodic[validate]": "periodicity: case_spec.pde.forcing.value is not periodic in x",
    "plate_missing_second_bc[validate]": "needs bc.laplacian on the same tags as bc.dirichlet",
    "steady_uses_t[validate]": "time: a steady case uses t in ['case_spec.bc.dirichlet[0].value']",
    "bad_schema[validate]": "new_cases.jsonl:6: record 'bad_schema' does not match cases/schema.json",
    "line12[validate]": "new_cases.jsonl:12: malformed JSON",
    "good_case[validate:line11]": "new_cases.jsonl:11: duplicate case id 'good_case'",
}


@pytest.fixture
def cases_file(pytester):
    path = pytester.path / "new_cases.jsonl"
    lines = [json.dumps(r) for r in RECORDS] + [json.dumps(record_dict(new_id="good_case")), "{oops"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_static_checks_name_record_and_check(pytester, cases_file):
    report = pytester.path / "report.json"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-validate={cases_file}", "--pde-validate-static",
                                "--json-report", f"--json-report-file={report}")
    result.assert_outcomes(passed=1, failed=11)
    # the summary says what was checked, even where every record passes
    result.stdout.fnmatch_lines(["*PDEAgent-Bench validation*", "12 records: 1 passed, 11 failed",
                                 "checks on each record: on loading, the schema*; then math type, *, leaks, *",
                                 "trial runs: none (--pde-validate-static)"])
    tests = json.loads(report.read_text())["tests"]
    failures = {t["nodeid"].split("::")[-1]: t["call"]["longrepr"] for t in tests if t["outcome"] == "failed"}
    assert set(failures) == set(EXPECTED)
    for name, fragment in EXPECTED.items():
        assert fragment in failures[name], (name, failures[name])


@pytest.mark.usefixtures("dolfinx_available")
def test_trial_run_calibrates_the_oracle(pytester):
    good = pytester.path / "good.jsonl"
    periodic = record_dict(new_id="periodic_in_x")  # u periodic in x
    periodic["case_spec"]["domain"] = {"type": "periodic_square", "bounds": [[0, 1], [0, 1]]}
    periodic["case_spec"]["pde"]["forcing"]["value"] = "5*pi**2*sin(2*pi*x)*sin(pi*y)"
    periodic["case_spec"]["bc"] = {"periodic": {"directions": ["x"]},
                                   "dirichlet": {"on": ["y_min", "y_max"], "value": "sin(2*pi*x)*sin(pi*y)"}}
    periodic["evaluation_metadata"]["manufactured_solution"] = {"u": "sin(2*pi*x)*sin(pi*y)"}
    curved = record_dict(new_id="neumann_on_an_arc")  # a tag the oracle cannot locate
    curved["case_spec"]["domain"] = {"type": "sector", "bounds": [[0, 1], [0, 1]]}
    curved["case_spec"]["bc"] = {"dirichlet": {"on": ["edge_start", "edge_end"], "value": "0"},
                                 "neumann": {"on": "arc", "value": "0"}}
    good.write_text("\n".join(json.dumps(r) for r in (record_dict(new_id="fine"), periodic, curved)) + "\n")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-validate={good}", "--pde-library=dolfinx",
                                f"--pde-output={pytester.path / 'out'}", "-rf")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["trial runs of the oracle (the error finite, the thresholds within bounds): "
                                 "3 on dolfinx"])
    result.stdout.fnmatch_lines(["*record neumann_on_an_arc: trial run on dolfinx: F-Exec: *"
                                 "NotImplementedError: the oracle cannot locate boundary tag 'arc'*"])
    assert not (pytester.path / "calibrations").exists(), "validation must not write calibrations"


def test_run_folders_go_under_the_folder_it_was_started_from(pytester):
    """Not beside the case file (a case under review in another folder, say a checkout's)."""
    elsewhere = pytester.mkdir("elsewhere")
    (elsewhere / "new.jsonl").write_text(json.dumps(record_dict(new_id="fine")) + "\n")
    work = pytester.mkdir("work")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--pde-validate", "../elsewhere/new.jsonl",
                                               "--pde-validate-static", "--pde-library=dolfinx")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*artifacts in {work / 'reports' / 'validation'}*"])
    assert not (pytester.path / "reports").exists() and not (elsewhere / "reports").exists()


def test_the_summary_says_what_lifting_gains_by_the_builds_estimates(pytester):
    """Issue 66: each record with a part gets the build's lifting estimate in the summary;
    one over 2 x is named, its family flagged when over 5% of it, a part built before the
    pricing counted as unpriced; over 3 x is refused by the static check, with the figure."""
    from pytest_pdebench.testing import STARTER

    (pytester.path / "references").symlink_to(STARTER / "references")
    records = {json.loads(line)["id"]: json.loads(line) for line in (STARTER / "starter.jsonl").read_text().splitlines()}
    unpriced, priced, over = (json.loads(json.dumps(records[name]))
                              for name in ("poisson_basic", "poisson_l_shape", "poisson_mixed_bc"))
    priced["evaluation_metadata"]["solve_only"]["build"]["lifting_gain"] = {"calibration": 1.3, "P1/12": 2.4}
    over["evaluation_metadata"]["solve_only"]["build"]["lifting_gain"] = {"P2/6": 3.2}
    path = pytester.path / "priced.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (unpriced, priced, over)) + "\n")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--pde-validate={path}", "--pde-validate-static", "-rf")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*poisson_mixed_bc*lifting the manufactured u out of the data's text gains over 3 x: 3.20 x at P2/6*",
        "lifting u_m out of the text (the builds' estimates; over 3 x is refused): 1 of 2 records with a part priced, "
        "median 2.40 x, largest 2.40 x",
        "lifting u_m out of the text gains over 2 x on 1 records:",
        "  poisson_l_shape: 2.40 x",
        "over 2 x on more than 5% of the records of: poisson",
        "1 records' parts were built before the lifting gain was priced: no estimate",
    ])
