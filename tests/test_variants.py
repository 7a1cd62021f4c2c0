"""Live variants (issue 39): a published record's sibling drawn afresh from its design."""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
from functools import cache

import numpy as np
import pytest
import sympy as sp

from pytest_pdebench import live_variants as variants
from pytest_pdebench.live_variants import variant
from pytest_pdebench.making.suite import suite_designs
from pytest_pdebench.making.variants import (
    KEPT_COEFFICIENTS,
    KEPT_GEOMETRY,
    LONGEST_INTEGER,
    drawn,
    record_digest,
)
from pytest_pdebench.cases import FAMILIES, CaseRecord, iter_case_file, load_cases
from pytest_pdebench.expressions import parse_expression, x, y
from pytest_pdebench.testing import REPO
from pytest_pdebench.validation import BUILT_LATER, static_problems

CASES = REPO / "cases"


@cache
def published() -> dict[str, CaseRecord]:
    return {record.id: record for _, _, record in load_cases(CASES)}


@cache
def designs() -> dict:
    return {design.id: design for design in suite_designs()}


def first_manufactured(family: str) -> CaseRecord:
    return next(r for r in published().values() if r.family == family and designs()[r.id].u is not None)


def what_stays(record: CaseRecord) -> dict:
    spec = record.case_spec_dict()
    # the kinds of condition, where they apply, and which fields they give (not the values)
    bc = {
        kind: [(c.get("on"), sorted(c)) for c in (conds if isinstance(conds, list) else [conds])]
        for kind, conds in spec["bc"].items()
    }
    return {
        "family": record.family,
        "math_type": record.pde_classification.math_type,
        "domain": {key: value for key, value in spec["domain"].items() if key != "geometry_params"},
        "pde_params": sorted(spec["pde"]["params"]),  # the names; their values: coefficients_within
        "time": spec["pde"].get("time"),
        "bc": json.dumps(bc, sort_keys=True, default=str),
        "eval_grid": spec["eval_grid"],
        "output": spec["output"],
        "tags": record.tags,
        "evaluation_config": record.evaluation_config,
        "calibration_config": record.evaluation_metadata.calibration_config,
        "libraries": record.supported_libraries,
    }


def drawn_checked(record: CaseRecord, design, seed: int) -> CaseRecord | None:
    """The variant's data as drawn: they pass the static and leak checks but the text check,
    which the variant's own solve-only part answers (built by DOLFINx: the tests below)."""
    made = drawn(record, design, seed)
    if made is not None:
        assert [p for p in static_problems(made, CASES) if not p.startswith(BUILT_LATER)] == []
    return made


@pytest.mark.parametrize("family", FAMILIES)
def test_a_variant_keeps_the_design_and_draws_a_new_answer(family):
    record = first_manufactured(family)
    made = drawn_checked(record, designs()[record.id], 11)
    assert made is not None and made.id == record.id
    assert what_stays(made) == what_stays(record)
    new, old = made.evaluation_metadata.manufactured_solution, record.evaluation_metadata.manufactured_solution
    assert new != old and made.case_spec_dict()["pde"].get("forcing") != record.case_spec_dict()["pde"].get("forcing")
    assert made.evaluation_metadata.variant.seed == 11
    assert made.evaluation_metadata.variant.of == record_digest(record)
    assert made.evaluation_metadata.thresholds == {}  # the published data's baselines do not apply
    coefficients_within(made, record)
    geometry_within(made, record)
    # no integer a solver's form compiler could not write as a 64-bit literal (see _plain_numbers)
    integers = re.findall(r"(?<![\d.eE])\d+(?![\d.])", json.dumps(made.case_spec_dict()))
    assert max(int(i) for i in integers) <= LONGEST_INTEGER


def coefficients_within(made: CaseRecord, record: CaseRecord) -> None:
    """Each numeric coefficient within 10% of the published one (the kept ones equal, a
    diffusivity expression the published one times a factor within 10%)."""
    new, old = made.case_spec_dict()["pde"]["params"], record.case_spec_dict()["pde"]["params"]
    movable = [n for n, v in old.items() if (record.family, n) not in KEPT_COEFFICIENTS and not isinstance(v, bool)]
    if any(not isinstance(old[n], str) or n == "kappa" for n in movable):
        assert new != old  # a regime with coefficients to move has them moved
    for name, value in old.items():
        if (record.family, name) in KEPT_COEFFICIENTS or (isinstance(value, str) and name != "kappa"):
            assert new[name] == value, name
            continue
        if isinstance(value, str):  # kappa: an expression in x, y, z
            ratio = parse_expression(new[name]) / parse_expression(value)
            points = np.random.default_rng(1).uniform(0, 1, size=(5, 2))
            values = [float(sp.lambdify((x, y), ratio)(*p)) for p in points]
            assert max(values) - min(values) < 1e-9 and abs(values[0] - 1) <= 0.1 + 1e-3, (name, values)
            continue
        for a, b in zip(np.atleast_1d(new[name]), np.atleast_1d(value)):
            assert abs(a - b) <= 0.1 * abs(b) + 1e-12, (name, a, b)


def numbers(value) -> list[float]:
    if isinstance(value, dict):
        return [n for key in sorted(value) for n in numbers(value[key])]
    if isinstance(value, (list, tuple)):
        return [n for item in value for n in numbers(item)]
    return [float(value)] if isinstance(value, (int, float)) else []


def geometry_within(made: CaseRecord, record: CaseRecord) -> None:
    """The template and its box kept; each of its parameters within 10% (an eccentric
    annulus' inner centre: its offset within 15%; coordinates near zero within 0.01)."""
    new, old = made.case_spec_dict()["domain"], record.case_spec_dict()["domain"]
    assert (new["type"], new["bounds"]) == (old["type"], old["bounds"])
    a, b = numbers(new.get("geometry_params", {})), numbers(old.get("geometry_params", {}))
    assert len(a) == len(b)
    for moved, published in zip(a, b):
        assert abs(moved - published) <= 0.1 * abs(published) + 0.01, (new["type"], moved, published)


MOVED_TEMPLATES = {"l_shape", "square_with_hole", "multi_hole", "annulus", "eccentric_annulus", "star", "gear",
                   "t_junction", "dumbbell"}  # fmt: skip


@pytest.mark.parametrize("template", sorted({d.domain for d in suite_designs() if d.u is not None and not d.smoke}))
def test_a_variant_moves_the_templates_parameters_within_its_box(template):
    design = next(d for d in designs().values() if d.domain == template and d.u is not None and not d.smoke
                  and d.family not in KEPT_GEOMETRY)  # fmt: skip
    record = published()[design.id]
    made = [drawn_checked(record, designs()[record.id], seed) for seed in (1, 2)]
    for one in made:
        geometry_within(one, record)
    params = [one.case_spec_dict()["domain"].get("geometry_params") for one in made]
    published_params = record.case_spec_dict()["domain"].get("geometry_params")
    if template in MOVED_TEMPLATES:  # two seeds, two shapes (one may round back to the published)
        assert params[0] != params[1]
    else:  # a disk, a sector, the boxes: their parameters are their box
        assert params == [published_params, published_params]


def test_helmholtz_keeps_its_shape():
    """Its k sits between the Dirichlet eigenvalues of the published shape."""
    design = next(d for d in designs().values() if d.family == "helmholtz" and d.domain == "star" and d.u is not None)
    record = published()[design.id]
    made = drawn_checked(record, design, 2)
    assert made.case_spec_dict()["domain"] == record.case_spec_dict()["domain"]


def test_variants_are_deterministic_in_record_and_seed():
    record = first_manufactured("poisson")
    design = designs()[record.id]
    once, again = drawn_checked(record, design, 5), drawn_checked(record, design, 5)
    other = drawn_checked(record, design, 6)
    assert once.model_dump_json() == again.model_dump_json()
    assert other.evaluation_metadata.manufactured_solution != once.evaluation_metadata.manufactured_solution


def test_a_flow_variant_stays_divergence_free():
    record = first_manufactured("stokes")
    made = drawn_checked(record, designs()[record.id], 3)
    u = [parse_expression(c) for c in made.evaluation_metadata.manufactured_solution["u"]]
    divergence = sp.lambdify((x, y), sp.diff(u[0], x) + sp.diff(u[1], y), "numpy")
    points = np.random.default_rng(0).uniform(0, 1, size=(50, 2))
    scale = max(abs(float(sp.lambdify((x, y), c)(*p))) for c in u for p in points[:5]) or 1.0
    assert np.max(np.abs(divergence(points[:, 0], points[:, 1]))) < 1e-9 * scale


def test_records_without_an_exact_solution_are_not_varied():
    record = next(r for r in published().values() if designs()[r.id].u is None)
    assert variant(record, designs()[record.id], 1, CASES) is None
    assert drawn_checked(record, designs()[record.id], 1) is None


@pytest.mark.fem
@pytest.mark.slow  # each variant's solve-only part is built: about 10 s here on a fresh cache
def test_the_command_writes_the_variants_and_says_what_it_left(tmp_path):
    out = tmp_path / "v.jsonl"
    pattern = "biharmonic_*_00[0-4]"  # five with an exact solution, four without
    done = subprocess.run(
        [sys.executable, "-m", "pytest_pdebench.cli", "variants", "--seed", "4", "--family", "biharmonic",
         "--match", pattern, "--output", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    written = [record for _, record in iter_case_file(out)]
    chosen = [r for r in published().values() if r.family == "biharmonic" and fnmatch.fnmatch(r.id, pattern)]
    no_exact = sum(designs()[r.id].u is None for r in chosen)
    assert len(chosen) == 9 and no_exact == 4
    # a draw whose data the build refuses a part is left as it is, and said so with the reason
    refused = re.search(r"(\d+) its variant's data carry no solve-only part", done.stdout)
    not_carried = int(refused.group(1)) if refused else 0
    assert done.stdout.count(f"(seed 4, {variants.REDRAWS + 1} draws): no solve-only part: ") == not_carried
    assert not_carried <= 1, done.stdout  # a rare draw, not the rule
    assert len(written) == len(chosen) - no_exact - not_carried
    assert f"{len(written)} variants of {len(chosen)} records (seed 4)" in done.stdout
    assert f"{no_exact} no exact solution" in done.stdout
    assert all(r.evaluation_metadata.variant.seed == 4 for r in written)
    assert all(r.evaluation_metadata.solve_only is not None for r in written if not designs()[r.id].smoke)


def test_the_command_says_when_its_filters_leave_nothing(tmp_path):
    out = tmp_path / "v.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_pdebench.cli", "variants", "--seed", "4", "--match", "no_such_*",
         "--output", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "is selected (--family, --match): nothing to vary" in done.stdout + done.stderr
    assert not out.exists()


# ---- a published record with a solve-only part (issue 46): its variants get parts of their own ----


@pytest.fixture(scope="module")
def with_part(tmp_path_factory, dolfinx_available):
    """The suite's first manufactured Poisson record with its solve-only part (the suite's own,
    beside its file; built here for a record that has none)."""
    from pytest_pdebench.making import solve_only
    from pytest_pdebench.testing import ORACLE

    record = first_manufactured("poisson").model_copy(deep=True)
    folder = tmp_path_factory.mktemp("published")
    if record.evaluation_metadata.solve_only is not None:  # its file, in a folder of its own
        part = folder / record.evaluation_metadata.solve_only.path
        part.parent.mkdir(parents=True)
        part.write_bytes((REPO / "cases" / record.evaluation_metadata.solve_only.path).read_bytes())
        return record, folder
    outcome = solve_only.build_part(record, folder, ORACLE / "dolfinx")
    assert outcome.kept, outcome.reason
    return record, folder


@pytest.mark.fem
@pytest.mark.slow
def test_a_variant_of_a_record_with_a_part_gets_its_own_and_nothing_reads_it(with_part, tmp_path):
    from pytest_pdebench import text_leaks
    from pytest_pdebench.testing import ansatz_fit_error

    record, folder = with_part
    made = variant(record, designs()[record.id], 7, folder, parts=tmp_path / "parts")
    part, published_part = made.evaluation_metadata.solve_only, record.evaluation_metadata.solve_only
    assert part is not None and part.forcing != published_part.forcing  # F drawn for the variant
    assert str(tmp_path / "parts") in part.path and made.evaluation_metadata.thresholds == {}
    assert part.share >= 5 * max(t.tau_acc for t in record.evaluation_metadata.thresholds.values())
    assert text_leaks.text_leak_problems(made) == []
    tau = record.evaluation_metadata.thresholds["dolfinx"].tau_acc
    assert ansatz_fit_error(made, folder) > tau
    # built once: a second draw reads the part back
    again = variant(record, designs()[record.id], 7, folder, parts=tmp_path / "parts")
    assert again == made


@pytest.mark.fem
@pytest.mark.slow
def test_a_draw_that_carries_no_part_is_drawn_again(with_part, tmp_path, monkeypatch):
    """A seed's first draw the build refuses a part: the record is drawn again (another key
    from the seed, said in the variant), not left out; every draw refused leaves it out."""
    from pytest_pdebench.live_variants import PartNotKept

    record, folder = with_part
    design = designs()[record.id]
    first, second = drawn(record, design, 7), drawn(record, design, 7, draw=1)
    assert first.case_spec != second.case_spec and second == drawn(record, design, 7, draw=1)
    built = variants.variant_part

    def refuses_the_first_draw(varied, published, part_folder, oracle_dir):
        if varied.evaluation_metadata.variant.draw == 0:
            raise PartNotKept("the calibration baseline's error grows 2 x with the part")
        return built(varied, published, part_folder, oracle_dir)

    monkeypatch.setattr(variants, "variant_part", refuses_the_first_draw)
    made = variant(record, design, 7, folder, parts=tmp_path / "parts")
    assert made.evaluation_metadata.variant.draw == 1 and made.evaluation_metadata.solve_only is not None
    assert made.case_spec.domain == second.case_spec.domain

    def refuses_all(*_):
        raise PartNotKept("the part is too small")

    monkeypatch.setattr(variants, "variant_part", refuses_all)
    with pytest.raises(variants.NoPartCarried, match=rf"seed 7, {variants.REDRAWS + 1} draws\): no solve-only part"):
        variant(record, design, 7, folder, parts=tmp_path / "parts")


@pytest.mark.fem
def test_a_variant_whose_part_cannot_be_built_says_why(with_part, tmp_path):
    from pytest_pdebench.live_variants import VariantError

    record, folder = with_part
    with pytest.raises(VariantError, match="solve-only part failed"):
        variant(record, designs()[record.id], 8, folder, parts=tmp_path / "parts", oracle_dir=tmp_path / "no-oracle")


@pytest.mark.fem
@pytest.mark.slow
def test_the_command_writes_the_variants_parts_beside_its_file(with_part, tmp_path):
    from pytest_pdebench.authoring.variants import write_variants
    from pytest_pdebench.cases import write_case_file

    record, folder = with_part
    cases = folder / "one.jsonl"
    write_case_file(cases, [record])
    out = tmp_path / "variants" / "seed-3.jsonl"
    assert write_variants(cases, 3, out, log=lambda _: None) == 0
    ((_, written),) = iter_case_file(out)
    part = written.evaluation_metadata.solve_only
    assert part.path.startswith("seed-3.parts/") and (out.parent / part.path).is_file()
