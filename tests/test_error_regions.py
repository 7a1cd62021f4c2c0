"""Where the error sits: the band of each boundary piece and the interior, on real domain
templates and evaluation grids, and the phrase a failed accuracy gate adds."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_pdebench.domains import resolve_geometry
from pytest_pdebench.error_regions import region_of_points, where_largest, where_wrong
from pytest_pdebench.grid import EvalGrid, valid_mask

NEUMANN_TOP = {"dirichlet": {"on": ["x_min", "x_max", "y_min"], "value": 0.0}, "neumann": {"on": "y_max", "value": 1.0}}


def _case(domain: dict, bbox: list[float], n: int = 41, bc: dict | None = None) -> dict:
    grid = {"bbox": bbox, "nx": n, "ny": n, **({"nz": n} if len(bbox) == 6 else {})}
    return {"domain": domain, "eval_grid": grid, "bc": bc or {"dirichlet": {"on": "boundary", "value": 0.0}}}


def _where(case: dict, wrong) -> tuple[list[dict], str]:
    """The regions and the phrase for a solution off the reference by ``wrong(points)``."""
    grid = EvalGrid.from_spec(case["eval_grid"])
    geometry = resolve_geometry(case["domain"])
    valid = valid_mask(case, grid, geometry)
    points = grid.points()
    reference = (1.0 + np.sin(3 * points[:, 0]) * np.cos(2 * points[:, 1])).reshape(*grid.shape, 1)
    solution = reference + np.asarray(wrong(points), float).reshape(*grid.shape, 1)
    regions = where_wrong(case, geometry, grid, valid, solution, reference)
    return regions, where_largest(regions)


def test_an_error_on_the_neumann_edge_is_named_with_its_condition():
    """The flipped-Neumann example: the error grows toward y_max and is tiny elsewhere."""
    case = _case({"type": "unit_square"}, [0, 1, 0, 1], bc=NEUMANN_TOP)
    regions, said = _where(case, lambda p: 0.1 * np.exp(-40 * (1 - p[:, 1])))
    assert said.startswith("largest near the y_max (Neumann) edge"), said
    by_name = {region["region"]: region for region in regions}
    assert set(by_name) == {"y_min", "x_max", "y_max", "x_min", "interior"}
    assert by_name["x_min"]["conditions"] == ["dirichlet"] and by_name["y_max"]["conditions"] == ["neumann"]
    assert by_name["y_max"]["max"] == pytest.approx(0.1)
    assert sum(region["share"] for region in regions) == pytest.approx(1.0)
    assert sum(region["points"] for region in regions) == 41 * 41


def test_an_error_spread_over_the_domain_is_said_to_be_spread():
    case = _case({"type": "unit_square"}, [0, 1, 0, 1])
    _, said = _where(case, lambda p: 1e-3 * np.random.default_rng(0).standard_normal(len(p)))
    assert said.startswith("error spread over the domain"), said


def test_an_error_in_the_interior_is_named_so():
    case = _case({"type": "unit_square"}, [0, 1, 0, 1])
    _, said = _where(case, lambda p: np.exp(-200 * ((p[:, 0] - 0.5) ** 2 + (p[:, 1] - 0.5) ** 2)))
    assert said.startswith("largest in the interior"), said


def test_curved_pieces_and_holes_get_bands_of_their_own():
    """An annulus: the error on the inner circle is the 'inner' piece's, not the outer's."""
    domain = {"type": "annulus", "geometry_params": {"inner_radius": 0.25, "outer_radius": 1.0}}
    geometry = resolve_geometry(domain)
    case = _case(domain, list(geometry.bbox), n=61)
    labels, names = region_of_points(geometry, EvalGrid.from_spec(case["eval_grid"]), valid_mask(case))
    assert names == ["interior", "inner", "outer"] and {0, 1, 2} <= set(np.unique(labels))
    inner = geometry.params["inner"]
    _, said = _where(case, lambda p: np.exp(-2000 * (np.hypot(*(p - inner["center"]).T) - inner["radius"]) ** 2))
    assert said.startswith("largest near the 'inner' boundary (Dirichlet)"), said


def test_a_cube_face_is_a_face():
    case = _case({"type": "unit_cube"}, [0, 1, 0, 1, 0, 1], n=13)
    _, said = _where(case, lambda p: 0.5 * (p[:, 2] < 1e-9))
    assert said.startswith("largest near the z_min (Dirichlet) face"), said
