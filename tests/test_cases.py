import copy
import json

import pytest

from pytest_pdebench.making.starter import starter_records
from pytest_pdebench.cases import CaseFileError, CaseRecord, agent_view, load_cases, schema_errors, schema_text
from pytest_pdebench.testing import REPO, STARTER, UPSTREAM, record_dict, write_jsonl
from pytest_pdebench.testing.suite_checks import (
    CHECK_MODULES,
    checked_digest,
    modules_the_checks_import,
    problems_of,
    sample_records,
    suite_digest,
)

CASES_DIR = REPO / "cases"


def test_committed_schema_is_the_models_schema():
    assert (CASES_DIR / "schema.json").read_text() == schema_text(), "run `pdebench schema`"


def _mutations():
    base = record_dict()
    yield "valid", base, True

    def mutate(name, change):
        data = copy.deepcopy(base)
        change(data)
        return name, data

    yield (*mutate("unknown family", lambda d: d["pde_classification"].update(equation_family="maxwell")), False)
    yield (*mutate("extra key", lambda d: d["case_spec"].update(hint="use P2")), False)
    yield (*mutate("library case", lambda d: d.update(supported_libraries=["DOLFINx"])), False)
    yield (*mutate("no math type", lambda d: d["pde_classification"].update(math_type=[])), False)
    yield (*mutate("grid too small", lambda d: d["case_spec"]["eval_grid"].update(nx=1)), False)
    yield (*mutate("timeout negative", lambda d: d["evaluation_config"].update(timeout_sec=-1)), False)
    yield (*mutate("bad id", lambda d: d.update(id="Has Spaces")), False)
    yield (*mutate("string grid", lambda d: d["case_spec"]["eval_grid"].update(nx="50")), False)


@pytest.mark.parametrize("name, data, valid", list(_mutations()), ids=lambda v: v if isinstance(v, str) else "")
def test_schema_and_models_agree(name, data, valid):
    schema_ok = not schema_errors(data)
    try:
        CaseRecord.model_validate(data)
        model_ok = True
    except Exception:
        model_ok = False
    assert (schema_ok, model_ok) == (valid, valid)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["case_spec"]["pde"].update(type="heat"), "differs from equation_family"),
    (lambda d: d["case_spec"]["bc"]["dirichlet"].update(on=["north"]), "unknown tags"),
    (lambda d: d["case_spec"]["pde"]["forcing"].update(value="sin(pi*x"), "cannot parse"),
    (lambda d: d["case_spec"]["pde"]["params"].update(kappa="__import__('os')"), "unknown function"),
    (lambda d: d["case_spec"]["eval_grid"].update(nz=10), "3-D eval_grid"),
    # a typo in a parameter's name would be the solver's failure: refused with the family's names
    (lambda d: d["case_spec"]["pde"]["params"].update(kapa="2.0"), "pde.params names kapa, which poisson does not "
                                                                    "have; its parameters: kappa"),
    (lambda d: d["evaluation_metadata"].pop("manufactured_solution"), "needs evaluation_metadata.manufactured"),
])
def test_semantic_checks_name_the_problem(tmp_path, change, message):
    data = record_dict()
    change(data)
    path = write_jsonl(tmp_path / "bad.jsonl", [record_dict("heat_basic"), data])
    with pytest.raises(CaseFileError, match=message) as info:
        load_cases(path)
    assert str(info.value).startswith(f"{path}:2:")


def test_a_case_file_checked_whole_is_not_walked_again_until_a_byte_changes(tmp_path, monkeypatch):
    """The expression checks are most of a load: a file whose every record passed them is
    marked in the cache (by its bytes and the checks' code) and loads without them; the
    same file with one expression broken is checked, refused, and never marked."""
    from pytest_pdebench import cases

    monkeypatch.setenv("PDEBENCH_CACHE", str(tmp_path / "cache"))
    walked = []
    monkeypatch.setattr(cases, "check_expression", lambda source, allow=(): walked.append(source))
    path = write_jsonl(tmp_path / "suite.jsonl", [record_dict(), record_dict("heat_basic")])
    load_cases(path)
    assert walked and len(list((tmp_path / "cache" / "checked-cases").iterdir())) == 1
    walked.clear()
    load_cases(path)
    assert walked == []  # the same bytes: marked
    broken = record_dict("heat_basic")
    broken["case_spec"]["pde"]["forcing"]["value"] = "__import__('os')"
    write_jsonl(path, [record_dict(), broken])
    monkeypatch.undo()  # the real checks again, on the changed file
    monkeypatch.setenv("PDEBENCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(CaseFileError, match=r"suite.jsonl:2: .*unknown function '__import__'"):
        load_cases(path)
    assert len(list((tmp_path / "cache" / "checked-cases").iterdir())) == 1  # the broken file is not marked


def test_malformed_json_names_file_and_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(record_dict()) + "\n\n{\"id\": \"x\",\n")
    with pytest.raises(CaseFileError, match=r"broken.jsonl:3: malformed JSON"):
        load_cases(path)


def test_duplicate_ids_across_files(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [record_dict()])
    write_jsonl(tmp_path / "b.jsonl", [record_dict("heat_basic"), record_dict()])
    with pytest.raises(CaseFileError, match=r"b.jsonl:2: duplicate case id 'poisson_basic' \(first at .*a.jsonl:1\)"):
        load_cases(tmp_path)


def test_agent_view_holds_only_case_spec_and_library():
    record = CaseRecord.model_validate(record_dict())
    view = agent_view(record, "dolfinx")
    assert set(view) == {"case_spec", "target_library"}
    text = json.dumps(view)
    assert "manufactured_solution" not in text and "thresholds" not in text


def test_committed_cases_are_the_generated_starter_suite():
    committed = {r.id: r for _, _, r in load_cases(STARTER / "starter.jsonl")}
    generated = {r.id: r for r in starter_records()}
    assert committed.keys() == generated.keys()
    # calibration settings are drawn from the upstream records in a separate step (below)
    # and so are the solve-only parts (build-solve-only), with their term of the forcing
    built_later = {"evaluation_metadata": {"thresholds", "reference_path", "reference_config", "calibration_config",
                                           "solve_only"}}  # fmt: skip
    for case_id, record in generated.items():
        assert _same_data(_without_part(committed[case_id]).model_dump(exclude=built_later),
                          record.model_dump(exclude=built_later)), case_id


def _without_part(record):
    """The record as generated: its solve-only part's term taken out of the forcing again."""
    from pytest_pdebench.making.part_field import forcing_without_part

    part = record.evaluation_metadata.solve_only
    if part is None:
        return record
    data = record.model_dump(mode="json", exclude_none=True)
    forcing = data["case_spec"]["pde"]["forcing"]
    forcing["value"] = forcing_without_part(forcing["value"], part.forcing)
    return type(record).model_validate(data)


def _same_data(a, b, path="") -> bool:
    """Equal, except that two expression strings may be printed differently if they are the
    same function (sympy's term order depends on the process's hash seed)."""
    import numpy as np

    from pytest_pdebench import expressions

    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_data(a[k], b[k], f"{path}.{k}") for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_data(x, y, path) for x, y in zip(a, b))
    if a == b:
        return True
    if not (isinstance(a, str) and isinstance(b, str)):
        return False
    points = np.random.default_rng(0).uniform(0, 1, (40, 3))
    try:
        return bool(np.allclose(expressions.evaluate(a, points, 0.1), expressions.evaluate(b, points, 0.1),
                                rtol=1e-9, atol=1e-12, equal_nan=True))
    except Exception:  # not an expression (a name, a tag): they differ
        return False


@pytest.mark.skipif(not UPSTREAM.is_file(), reason="the upstream file is not on this machine")
@pytest.mark.parametrize("folder", [CASES_DIR, STARTER])
def test_committed_calibration_settings_are_the_drawn_ones(folder):
    """Generated records: the upstream draw, scaled (authoring/calibration_configs.py), then
    the steps the source names, in order: a refinement may only make a mesh finer (or the
    degree higher), a coarsening only fewer cells of the same degree."""
    from pytest_pdebench.authoring.calibration_configs import calibration_config, read_distribution
    from pytest_pdebench.authoring.rebuilds import setting_steps as steps

    pools = read_distribution(UPSTREAM)
    for _, _, record in load_cases(folder):
        config = record.evaluation_metadata.calibration_config
        drawn = calibration_config(record, pools)
        for library, setting in config.settings.items():
            wanted, own = drawn["settings"][library], False
            for kind, only, before, after in steps(config.source):
                if only not in (None, library):
                    continue
                if (before != (wanted["element_degree"], wanted["cells_per_side"])) and only is None and own:
                    continue  # a shared step after this library's own one passed it by
                if kind != "adjusted":  # set by hand (the reason in the source), perhaps before a redraw
                    assert before == (wanted["element_degree"], wanted["cells_per_side"]), (record.id, library)
                if kind == "refined":
                    assert after > before, record.id
                elif kind == "coarsened":
                    assert after[0] == before[0] and after[1] < before[1], record.id
                wanted, own = {**wanted, "element_degree": after[0], "cells_per_side": after[1]}, own or bool(only)
            assert setting.model_dump(exclude_none=True) == {"solver": "direct", **wanted}, (record.id, library)


# the shipped suite and the smoke suite: (case file, record)
ALL_CASES = [(file, r) for folder in (CASES_DIR, STARTER) for file, _, r in load_cases(folder)]


def test_starter_suite_composition():
    records = [r for _, _, r in load_cases(STARTER)]
    assert len(records) >= 20
    domains = {r.domain_type for r in records}
    assert {"unit_square", "l_shape", "circle", "annulus", "square_with_hole", "unit_cube"} <= domains
    for family in ("poisson", "heat"):
        kappas = {r.case_spec.pde.params["kappa"] for r in records if r.family == family}
        assert "1" in kappas and len(kappas) > 1, f"{family} needs constant and variable kappa"
    basic = next(r for r in records if r.id == "poisson_basic")
    assert basic.case_spec.eval_grid.nx == basic.case_spec.eval_grid.ny == 50
    assert basic.evaluation_metadata.manufactured_solution == {"u": "sin(pi*x)*sin(pi*y)"}


# The per-record checks over the whole suite are benchmarks/suite_checks.py (7 minutes of sympy):
# here on a sample, and the digest it wrote when every record passed must be today's suite's.
SAMPLE = sample_records()


@pytest.mark.parametrize("case", SAMPLE, ids=lambda case: case[1].id)
def test_a_sample_of_the_suite_passes_every_per_record_check(case):
    """Static checks, the exact solution satisfies the stored PDE, boundary and initial data
    are the exact solution (testing/suite_checks.py)."""
    assert problems_of(*case) == []


def test_the_whole_suite_was_checked_as_it_is_now():
    assert checked_digest() == suite_digest(), (
        "a case file or a check changed since the whole suite was checked: run "
        "`.venv/bin/python benchmarks/suite_checks.py` (it writes tests/suite-checked.json when all pass)")


def test_the_digest_covers_the_code_the_checks_run():
    kinds = {}
    for file, record in SAMPLE:
        kinds.setdefault(record.evaluation_metadata.construction_method, (file, record.id))
    for file, case_id in kinds.values():
        assert modules_the_checks_import(file, case_id) <= set(CHECK_MODULES)


def test_the_sample_holds_every_family_and_construction_method():
    def kinds(cases):
        return {(r.family, r.evaluation_metadata.construction_method) for _, r in cases}

    assert kinds(SAMPLE) == kinds(ALL_CASES) and len(SAMPLE) < len(ALL_CASES) / 10


def test_numerical_reference_cases_have_their_files():
    numerical = [(f, r) for f, r in ALL_CASES if r.evaluation_metadata.construction_method == "reference_numerical"]
    assert len(numerical) >= 109 + 5
    for file, record in numerical:
        assert (file.parent / record.evaluation_metadata.reference_path).is_file(), record.id
        assert record.evaluation_metadata.reference_config["e_base_estimate"] < 0.05


def test_library_coverage_follows_table_3b():
    records = [r for _, r in ALL_CASES]
    assert all("dolfinx" in r.supported_libraries for r in records)
    assert {r.family for r in records if "firedrake" in r.supported_libraries} == {
        "poisson", "helmholtz", "biharmonic", "linear_elasticity", "heat", "convection_diffusion",
        "reaction_diffusion", "stokes"}
    assert {r.family for r in records if "dealii" in r.supported_libraries} - {
        r.family for r in records if "firedrake" in r.supported_libraries} == {"navier_stokes"}
