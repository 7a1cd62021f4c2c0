"""Issue 66's lifting rung (submissions/lifting): the closed form it lifts out of a case's text
is the record's manufactured solution, the problem left for the solve is the solve-only part's,
and a record with a numerical reference gives nothing to lift."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import sympy as sp

from pytest_pdebench.cases import load_cases
from pytest_pdebench.testing import REPO

SEARCH = REPO / "submissions" / "lifting" / "dolfinx" / "_closed_form.py"
FAMILIES = ("poisson", "helmholtz", "heat", "convection_diffusion", "reaction_diffusion", "wave", "biharmonic",
            "linear_elasticity", "stokes", "burgers", "navier_stokes")


@pytest.fixture(scope="module")
def search():
    spec = importlib.util.spec_from_file_location("lifting_closed_form", SEARCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _records(per_family: int, construction: str):
    """The first records of each of the rung's families (periodic data aside: its solvers have none)."""
    counts, chosen = {}, []
    for _, _, record in load_cases(REPO / "cases"):
        meta, family = record.evaluation_metadata, record.family
        if (family in FAMILIES and counts.get(family, 0) < per_family
                and meta.construction_method == construction and not record.case_spec_dict()["bc"].get("periodic")):
            counts[family] = counts.get(family, 0) + 1
            chosen.append(record)
    return chosen


def _gap(search, spec, a, b) -> float:
    """Relative distance of two expressions (or vectors of them) at the search's own points."""
    if isinstance(a, list):
        return max(_gap(search, spec, x, y) for x, y in zip(a, b))
    columns = search.sample_points(spec)
    return float(np.linalg.norm(search.values(a - b, columns)) / np.linalg.norm(search.values(b, columns)))


@pytest.mark.parametrize("record", _records(2, "manufactured_solution"), ids=lambda r: r.id)
def test_the_lifted_closed_form_is_the_manufactured_solution(search, record):
    spec = record.case_spec_dict()
    lifted, rest = search.closed_form(spec)
    meta = record.evaluation_metadata
    u, part = meta.manufactured_solution["u"], meta.solve_only.forcing
    parsed = [search.parse(c) for c in u] if isinstance(u, list) else search.parse(u)
    assert _gap(search, spec, lifted, parsed) < 1e-9
    driving = [search.parse(c) for c in part] if isinstance(part, list) else search.parse(part)
    if record.family == "navier_stokes":  # its solver takes S + w and f as it is: nothing to compare
        return
    if record.family == "stokes":  # the rest is the whole f - L(S): its curl is the part's forcing's
        rest, driving = (search.curl(spec, v) for v in (rest, driving))
    assert _gap(search, spec, rest, driving) < 1e-9  # what drives the part


@pytest.mark.parametrize("record", _records(1, "reference_numerical"), ids=lambda r: r.id)
def test_a_record_without_a_closed_form_gives_nothing_to_lift(search, record):
    lifted, rest = search.closed_form(record.case_spec_dict())
    forcing = record.case_spec_dict()["pde"]["forcing"]["value"]
    if isinstance(forcing, list):  # a vector family: a component each
        assert lifted == [0] * len(forcing) and rest == [search.parse(c) for c in forcing]
    else:
        assert lifted == 0 and rest == search.parse(forcing)


def test_the_lifted_problem_has_the_data_less_the_closed_form(search):
    record = next(r for r in _records(8, "manufactured_solution") if r.case_spec.pde.time and r.family == "heat")
    spec = record.case_spec_dict()
    lifted, rest = search.closed_form(spec)
    problem = search.lifted_spec(spec, lifted, rest)
    for before, after in zip(search.conditions(spec, "dirichlet"), search.conditions(problem, "dirichlet")):
        assert _gap(search, spec, search.parse(after["value"]) + lifted, search.parse(before["value"])) < 1e-12
    t0 = spec["pde"]["time"].get("t0", 0.0)
    initial = search.parse(problem["ic"]["value"]) + lifted.subs(search.T, t0)
    assert sp.simplify(initial - search.parse(spec["ic"]["value"])) == 0


def _folder(tmp_path, lift: bool):
    """The rung's files linked into a folder of its own, with LIFT set."""
    from pytest_pdebench.making.lifting import rung_folder

    return rung_folder(tmp_path / ("lifted" if lift else "plain") / "dolfinx", 32, 8, 1, lift, SEARCH.parent).parent


def test_the_lifted_solve_is_closer_than_the_plain_one_on_the_same_mesh(tmp_path, dolfinx_available):
    import json as json_

    from pytest_pdebench.testing import run_track

    record = next(r for _, _, r in load_cases(REPO / "cases") if r.family == "poisson"
                  and r.case_spec.domain.type == "unit_square" and r.evaluation_metadata.solve_only is not None)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json_.dumps(record.model_dump(mode="json", exclude_none=True)) + "\n")
    (tmp_path / "references").symlink_to(REPO / "cases" / "references")
    errors = {}
    for lift in (False, True):
        done, outcomes = run_track(tmp_path / str(lift), "dolfinx", cases, _folder(tmp_path, lift), "--pde-runs=1",
                                   "--pde-baseline=stored", "-p", "no:randomly")
        verdict = outcomes.get(record.id) or {}
        assert verdict.get("error") is not None, done.stdout[-2000:]
        errors[lift] = verdict["error"]
    assert errors[True] < 0.8 * errors[False], errors
