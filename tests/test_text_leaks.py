"""The exact solution read off the text of a record's data (issue 46): each search finds a
planted u, none undoes a datum that only carries u's trace, and today's suite leaks."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from pytest_pdebench import leaks, text_leaks
from pytest_pdebench.bundled import bundled
from pytest_pdebench.cases import CaseRecord, load_cases
from pytest_pdebench.expressions import evaluate, t, x, y, z
from pytest_pdebench.testing import record_dict
from pytest_pdebench.validation import check_leaks, check_text_leaks


def record(u, bc: dict, domain: str = "unit_square", ic: dict | None = None) -> CaseRecord:
    """A hand-made manufactured record: poisson_basic's (or, with ``ic``, heat_basic's)
    with another domain, boundary data and exact solution (its forcing is left as it is:
    the searches do not read it)."""
    data = copy.deepcopy(record_dict("heat_basic" if ic else "poisson_basic", new_id="hand_made"))
    data["case_spec"]["domain"] = {"type": domain}
    data["case_spec"]["bc"] = bc
    if ic:
        data["case_spec"]["ic"] = ic
    data["evaluation_metadata"]["manufactured_solution"] = {"u": u}
    return CaseRecord.model_validate(data)


def found(case: CaseRecord) -> dict[str, list[str]]:
    """{search: [where, ...]} of every finding."""
    out: dict[str, list[str]] = {}
    for finding in text_leaks.text_findings(case):
        out.setdefault(finding.search, []).append(finding.where)
    return out


@pytest.mark.parametrize(
    "source",
    [
        "atan2(y, x + 2) + Max(x, y, 0.3) - Min(x, 2*y) + sign(x - 0.5)*Abs(y - 0.5)",
        "sqrt(1 + x**2)*log(2 + y) + tan(x/2) + atan(y) + asin(x/2) + acos(y/2) + x**(-2.5) + e**x",
        "sinh(x)*cosh(y)/tanh(1 + x) + (x - 0.5)**3*exp(-t) + 3.5*pi",
    ],
)
def test_the_tree_evaluates_every_function_as_the_evaluator_does(source):
    points = np.random.default_rng(0).uniform(0.1, 0.9, size=(30, 2))
    coords = {x: points[:, 0], y: points[:, 1], z: np.zeros(30), t: np.full(30, 0.3)}
    walked = text_leaks.tree(source)
    assert np.allclose(walked.values(coords)[walked.root], evaluate(source, points, 0.3), rtol=1e-13, atol=0)


BUMP = "2.5*exp(-10*(x - 0.3)**2 - 10*(y - 0.6)**2)"
PHI_W = "3.1*x*y*(x - 1.0)*(y - 1.0)*(0.4 + 0.7*x - 0.2*sin(2*pi*y))"  # zero on the unit square's sides


def test_u_is_found_among_the_top_level_terms_of_its_hidden_data():
    case = record(f"exp(x + y) + {BUMP}", {"dirichlet": {"on": "boundary", "value": f"{PHI_W} + exp(x + y) + {BUMP}"}})
    findings = text_leaks.text_findings(case)
    subset = next(f for f in findings if f.search == "subset")
    assert subset.where == "bc.dirichlet[0].value" and subset.detail.startswith("the sum of 2 of its 3 top-level")
    assert "vanishing" in found(case)  # phi * w is zero on the boundary: set to 0, u is left


def test_subsets_beyond_the_limit_are_searched_within_bounds():
    waves = [f"sin({k}*x + y)" for k in range(1, 21)]  # 20 terms: past SUBSET_LIMIT
    data = " + ".join(waves)
    few = record(f"{waves[3]} + {waves[17]}", {"dirichlet": {"on": "boundary", "value": data}})
    assert found(few) == {"subset": ["bc.dirichlet[0].value"]}  # a subset of at most 3 terms
    half = record(" + ".join(waves[::2]), {"dirichlet": {"on": "boundary", "value": data}})
    assert "subset" in found(half)  # 10 of 20: the least-squares weights, rounded to 0/1


def test_a_multiple_of_a_sub_expression_is_found():
    neumann = "(1 + x**2)*(2.5*sin(pi*x)*exp(y) + y)"  # u inside a product, scaled
    case = record("sin(pi*x)*exp(y)", {"dirichlet": {"on": ["x_min", "y_min", "y_max"], "value": "0"},
                                       "neumann": {"on": "x_max", "value": neumann}})  # fmt: skip
    findings = text_leaks.text_findings(case)
    assert [(f.where, f.search) for f in findings] == [("bc.neumann[0].value", "scaled")]
    assert findings[0].detail.startswith("0.4 times its sub-expression")


def test_a_term_that_vanishes_on_a_box_side_is_set_to_zero():
    # not a top-level term: u and the term share a factor
    case = record("exp(x + y)", {"dirichlet": {"on": "x_min", "value": "exp(y)*(exp(x) + x*(1 + y**2))"},
                                 "neumann": {"on": ["x_max", "y_min", "y_max"], "value": "0"}})  # fmt: skip
    assert found(case) == {"vanishing": ["bc.dirichlet[0].value"]}
    elsewhere = record("exp(x + y)", {"dirichlet": {"on": "x_max", "value": "exp(y)*(exp(x) + x*(1 + y**2))"},
                                      "neumann": {"on": ["x_min", "y_min", "y_max"], "value": "0"}})  # fmt: skip
    assert found(elsewhere) == {}  # x*(1 + y**2) is not zero on x = 1: the datum is not u there


def test_a_term_that_vanishes_on_a_circle_is_set_to_zero():
    circle = "((x - 0.5)**2 + (y - 0.5)**2 - 0.25)"
    case = record("exp(x)*cos(y)", {"dirichlet": {"on": "boundary", "value": f"cos(y)*(exp(x) + {circle}*(1 + x*y))"}},
                  "circle")  # fmt: skip
    assert found(case) == {"vanishing": ["bc.dirichlet[0].value"]}
    smaller = circle.replace("0.25", "0.16")  # zero on a circle inside the domain, not on its boundary
    case = record("exp(x)*cos(y)", {"dirichlet": {"on": "boundary", "value": f"cos(y)*(exp(x) + {smaller}*(1 + x*y))"}},
                  "circle")  # fmt: skip
    assert found(case) == {}


def test_the_side_s_coordinate_printed_as_a_number_is_put_back():
    # u's trace on x = 1, written with the 1 kept apart: exp(y + 1)*cos(1)
    case = record("exp(x + y)*cos(x)", {"dirichlet": {"on": "x_max", "value": "exp(y + 1)*cos(1)"},
                                        "neumann": {"on": ["x_min", "y_min", "y_max"], "value": "0"}})  # fmt: skip
    findings = text_leaks.text_findings(case)
    assert [f.search for f in findings] == ["coordinate"]
    assert "equal to x on x_max" in findings[0].detail


@pytest.mark.parametrize(
    "u, value",
    [
        ("exp(x + y)", "exp(y)"),  # u's trace on x = 0: the x is gone, nothing to put back
        # u + x*(1 + y) expanded: the terms of u and of the hiding term merge (2*x); a 0/1
        # subset cannot split them (a least-squares combination of the terms would)
        ("x + y + sin(y)", "2*x + y + x*y + sin(y)"),
    ],
)
def test_data_that_only_carry_u_s_trace_are_not_flagged(u, value):
    case = record(u, {"dirichlet": {"on": "x_min", "value": value},
                      "neumann": {"on": ["x_max", "y_min", "y_max"], "value": "0"}})  # fmt: skip
    assert text_leaks.text_findings(case) == []


def test_vector_data_are_searched_component_by_component():
    u = ["sin(pi*x)*y", "cos(x) + y**2"]
    value = [f"sin(pi*x)*y + {PHI_W}", f"cos(x) + y**2 - 0.5*{PHI_W}"]
    case = record(u, {"dirichlet": {"on": "boundary", "value": value}})
    findings = text_leaks.text_findings(case)
    assert {(f.where, f.target) for f in findings} == {
        ("bc.dirichlet[0].value[0]", "u[0]"),
        ("bc.dirichlet[0].value[1]", "u[1]"),
    }
    swapped = record(u, {"dirichlet": {"on": "boundary", "value": value[::-1]}})
    assert text_leaks.text_findings(swapped) == []  # each component against its own


def test_transient_data_are_compared_in_space_and_time_and_initial_data_at_t_end():
    u = "(x**2 + y**2)*exp(-2*t)"  # separable: its final state is a multiple of its initial one
    case = record(u, {"dirichlet": {"on": "boundary", "value": f"t*{PHI_W} + {u}"}}, ic={"value": "x**2 + y**2"})
    by_place = {(f.where, f.search): f for f in text_leaks.text_findings(case)}
    assert "space and time" in by_place[("bc.dirichlet[0].value", "subset")].target
    initial = by_place[("ic.value", "scaled")]
    assert initial.target == "u at t_end" and initial.detail.startswith(f"{np.exp(-0.2):.6g} times")
    bumped = f"{u} + t*{BUMP}"  # what the builder adds: no multiple of u(t0) is u(t_end)
    case = record(bumped, {"dirichlet": {"on": "boundary", "value": bumped}}, ic={"value": "x**2 + y**2"})
    assert all(f.where != "ic.value" for f in text_leaks.text_findings(case))


def test_the_text_searches_find_what_the_numerical_check_passes():
    case = CaseRecord.model_validate(record_dict("heat_basic"))  # a built record: data revision 2
    assert leaks.leak_problems(case) == [] and check_leaks(case) is None  # the numerical check passes it
    assert check_text_leaks(case).endswith("(pdebench build-solve-only gives the record a part only a solve recovers)")
    problems = text_leaks.text_leak_problems(case)
    assert len(problems) == 1 and problems[0].startswith(
        "bc.dirichlet[0].value spells out the exact u (as a function of space and time) in its text (subset, vanishing)"
    )


@pytest.mark.slow  # about 15 s: every record of the suite
def test_the_suite_s_data_spell_out_the_manufactured_part_only():
    """Issue 46 as found: the manufactured u is in the text of every manufactured record's
    Dirichlet data; what keeps it from being the answer is the part only a solve recovers
    (without it, every such record fails the check)."""
    records = [r for _, _, r in load_cases(bundled("cases"))]
    manufactured = [r for r in records if text_leaks.manufactured(r)]
    assert len(manufactured) >= 500 and all(r.evaluation_metadata.solve_only for r in manufactured)
    assert not [r.id for r in manufactured if check_text_leaks(r)]
    bare = [r.model_copy(update={"evaluation_metadata": r.evaluation_metadata.model_copy(update={"solve_only": None})})
            for r in manufactured]
    leaking = {r.id for r in bare if check_text_leaks(r)}
    with_dirichlet = {r.id for r in bare if r.case_spec.bc.dirichlet is not None}
    assert with_dirichlet <= leaking and len(leaking) >= 500
