"""The design matrix of the full suite: the paper's composition, distinct cases, and
records that pass the static checks."""

from __future__ import annotations

import collections

import pytest

from pytest_pdebench.making.starter import build_record, libraries_for
from pytest_pdebench.making.suite import load_design, suite_designs
from pytest_pdebench.validation import BUILT_LATER, static_problems

TABLE_3A = {"poisson": 91, "helmholtz": 62, "biharmonic": 57, "linear_elasticity": 63, "heat": 50,
            "convection_diffusion": 84, "reaction_diffusion": 64, "stokes": 61, "navier_stokes": 28, "burgers": 43,
            "wave": 42}
DESIGNS = suite_designs()


def test_composition_follows_table_3a():
    assert collections.Counter(d.family for d in DESIGNS) == TABLE_3A
    assert len(DESIGNS) == 645 and len({d.id for d in DESIGNS}) == 645
    assert sum(d.u is None for d in DESIGNS) == 111  # about 1 in 6 without an exact solution
    from pytest_pdebench.domains import TEMPLATES

    assert {d.domain for d in DESIGNS} == set(TEMPLATES)  # all 14, 2-D and the cube


def test_boundary_condition_types_vary_where_the_family_allows():
    kinds = collections.defaultdict(set)
    for design in DESIGNS:
        kinds[design.family] |= {s for s in design.structure if s in ("neumann", "robin", "periodic")}
        assert bool(design.periodic) == (design.domain == "periodic_square"), design.id
    for family in ("poisson", "helmholtz", "heat", "convection_diffusion", "reaction_diffusion"):
        assert kinds[family] == {"neumann", "robin", "periodic"}, family
    assert kinds["burgers"] == {"neumann", "periodic"}
    record = build_record(next(d for d in DESIGNS if d.robin))
    assert record.case_spec.bc.robin is not None and record.case_spec.bc.dirichlet is not None


def test_cases_are_distinct_regimes_not_repeats():
    keys = [(d.family, d.structure[0], d.domain, d.u, d.forcing) for d in DESIGNS]
    assert len(set(keys)) == len(keys)


def test_library_coverage_follows_table_3b():
    coverage = collections.Counter(library for design in DESIGNS for library in design.libraries)
    assert coverage == {"dolfinx": 645, "firedrake": 510, "dealii": 313}
    dealii = collections.Counter(d.family for d in DESIGNS if "dealii" in d.libraries)
    assert dealii["poisson"] == 60 and dealii["navier_stokes"] == 28 and "burgers" not in dealii
    # the families a track carries are those of the starter suite's rule
    assert all(set(d.libraries) <= set(libraries_for(d.family)) for d in DESIGNS)


@pytest.mark.parametrize("family", sorted(TABLE_3A))
def test_a_sample_per_family_passes_the_static_checks(family):
    sample = [next(d for d in DESIGNS if d.family == family and d.u is not None),
              next((d for d in DESIGNS if d.family == family and d.u is None), None)]
    for design in filter(None, sample):
        record = build_record(design)
        # references are built, and calibration settings drawn (from the upstream file), after build_record
        problems = [p for p in static_problems(record) if not p.startswith((*BUILT_LATER, "calibration settings:"))]
        assert problems == [], (design.id, problems)


def test_design_file_is_readable_data():
    design = load_design()
    assert set(design) == set(TABLE_3A)
    assert all({"count", "no_exact", "domains", "regimes"} <= set(spec) for spec in design.values())


def test_no_numerical_reference_in_a_regime_marked_without_references():
    """Regimes whose layers the strong oracle does not resolve (references = false) get
    manufactured cases only; the other records keep the ids they had before the mark."""
    unmarked = {(family, regime["name"]) for family, spec in load_design().items() for regime in spec["regimes"]
                if not regime.get("references", True)}
    assert unmarked, "the design marks some regimes"
    assert not [d.id for d in DESIGNS if d.u is None and (d.family, d.structure[0]) in unmarked]
    assert "cd_low_pe_sector_noexact_008" in {d.id for d in DESIGNS}  # numbered before the filter
