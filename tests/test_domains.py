import math

import numpy as np
import pytest

from pytest_pdebench.domains import DOMAIN_TYPES, DomainError, resolve_geometry
from pytest_pdebench.grid import EvalGrid, valid_mask

# (template, params, points inside, points outside); boundary points count as inside
CASES = [
    ("unit_square", {}, [(0, 0), (0.5, 1.0), (1, 1)], [(1.01, 0.5), (-1e-6, 0.5)]),
    ("periodic_square", {"bounds": [0, 2, 0, 1]}, [(1.9, 0.5), (2, 1)], [(2.1, 0.5)]),
    ("l_shape", {}, [(0.25, 0.75), (0.75, 0.25), (0.5, 0.5), (0, 1)], [(0.75, 0.75), (0.51, 0.6)]),
    ("square_with_hole", {}, [(0.1, 0.1), (0.5, 0.3)], [(0.5, 0.5), (0.6, 0.5)]),
    ("square_with_hole", {"hole": {"vertices": [[0.4, 0.4], [0.6, 0.4], [0.5, 0.7]]}},
     [(0.1, 0.1), (0.5, 0.4), (0.55, 0.55)], [(0.5, 0.5), (0.5, 0.6)]),
    ("multi_hole", {}, [(0.05, 0.05), (0.5, 0.45)], [(0.3, 0.3), (0.7, 0.3), (0.5, 0.7)]),
    ("circle", {"center": [0, 0], "radius": 1}, [(0.0, 0.0), (1.0, 0.0), (0.7, 0.7)], [(0.72, 0.72)]),
    ("annulus", {}, [(0.5, 0.8), (0.5, 1.0), (0.75, 0.5)], [(0.5, 0.5), (0.6, 0.5), (0.9, 0.9)]),
    ("eccentric_annulus", {}, [(0.2, 0.5), (0.9, 0.5)], [(0.65, 0.5), (0.75, 0.5)]),
    ("sector", {"angle_deg": 90}, [(0.5, 0.5), (1, 0), (0, 1), (0, 0)], [(-0.1, 0.5), (0.8, 0.8)]),
    ("sector", {"angle_deg": 270}, [(-0.5, -0.5), (-0.5, 0.5)], [(0.5, -0.5)]),
    ("star", {}, [(0, 0), (0, 0.69), (0, 0.7)], [(0, 0.71), (0.3, 0.6)]),
    ("gear", {}, [(0, 0), (0.69, 0.05), (0.45, 0.0)], [(0.6, -0.05), (0.75, 0.0)]),
    ("t_junction", {}, [(0.1, 0.9), (0.5, 0.1), (0.5, 0.8)], [(0.1, 0.5), (0.9, 0.1)]),
    ("dumbbell", {}, [(0.1, 0.5), (0.5, 0.5), (0.9, 0.5)], [(0.5, 0.3), (0.5, 0.7)]),
]


def test_every_template_is_covered():
    assert {case[0] for case in CASES} | {"unit_cube"} == set(DOMAIN_TYPES)


@pytest.mark.parametrize("kind, params, inside, outside", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_mask_of_known_points(kind, params, inside, outside):
    geometry = resolve_geometry({"type": kind, "geometry_params": params})
    assert geometry.mask(np.array(inside, dtype=float)).all(), "a point inside was masked out"
    assert not geometry.mask(np.array(outside, dtype=float)).any(), "a point outside was kept"


def test_unit_cube_mask():
    geometry = resolve_geometry({"type": "unit_cube"})
    assert geometry.dim == 3
    np.testing.assert_array_equal(geometry.mask(np.array([[0.5, 0.5, 1.0], [0.5, 0.5, 1.1]])), [True, False])


def test_bounding_boxes():
    assert resolve_geometry({"type": "sector", "geometry_params": {"angle_deg": 90}}).bbox == (0, 1, 0, 1)
    star = resolve_geometry({"type": "star"})
    assert star.bbox[3] == pytest.approx(0.7)
    gear = resolve_geometry({"type": "gear"})
    assert gear.bbox[1] == pytest.approx(0.7)
    dumbbell = resolve_geometry({"type": "dumbbell"})
    assert dumbbell.bbox == (0.0, 1.0, 0.25, 0.75)


@pytest.mark.parametrize("domain, message", [
    ({"type": "hexagon"}, "unknown domain type"),
    ({"type": "annulus", "geometry_params": {"inner_radius": 0.6, "outer_radius": 0.5}}, "inner_radius"),
    ({"type": "square_with_hole", "geometry_params": {"hole": {"center": [0.95, 0.5], "radius": 0.2}}},
     "not strictly inside"),
    ({"type": "l_shape", "geometry_params": {"vertices": [[0, 0], [0, 1], [1, 1], [1, 0]]}}, "counter-clockwise"),
    ({"type": "unit_square", "geometry_params": {"radius": 1}}, "takes no geometry_params"),
    ({"type": "multi_hole", "geometry_params": {"holes": [{"center": [0.3, 0.3], "radius": 0.2},
                                                         {"center": [0.4, 0.3], "radius": 0.2}]}}, "overlap"),
])
def test_bad_parameters_are_rejected(domain, message):
    with pytest.raises(DomainError, match=message):
        resolve_geometry(domain)


def test_grid_axes_and_array_orientation():
    grid = EvalGrid.from_spec({"nx": 5, "ny": 3, "bbox": [0, 1, 0, 2]})
    assert grid.shape == (3, 5)
    np.testing.assert_allclose(grid.axes[1], [0, 1, 2])
    points = grid.points().reshape(3, 5, 2)
    # u[j, i] lives at (x[i], y[j])
    assert tuple(points[2, 1]) == (0.25, 2.0)


def test_valid_mask_on_the_grid_matches_geometry():
    spec = {"domain": {"type": "circle", "geometry_params": {"center": [0.5, 0.5], "radius": 0.5}},
            "eval_grid": {"nx": 101, "ny": 101, "bbox": [0, 1, 0, 1]}}
    mask = valid_mask(spec)
    assert mask.shape == (101, 101)
    assert mask[50, 50] and mask[50, 0] and not mask[0, 0]
    # Gauss circle problem: about pi r^2 lattice points for a radius of 50 spacings
    assert mask.sum() == pytest.approx(math.pi * 50**2, rel=0.01)
