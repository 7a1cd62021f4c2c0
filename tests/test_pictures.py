"""fields.png: solution, reference and pointwise error, one row per component (a vector's
magnitude first), for 2-D templates with holes and curved pieces and for a cube's slice."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_pdebench.domains import resolve_geometry
from pytest_pdebench.grid import EvalGrid, valid_mask
from pytest_pdebench.pictures import draw_fields, wanted

matplotlib = pytest.importorskip("matplotlib")


@pytest.mark.parametrize(("domain", "names", "rows"), [
    ({"type": "annulus"}, ["u"], 1),
    ({"type": "square_with_hole"}, ["ux", "uy"], 3),
    ({"type": "unit_cube"}, ["u"], 1),
])  # fmt: skip
def test_the_picture_has_a_row_per_component_and_three_panels(tmp_path, domain, names, rows):
    geometry = resolve_geometry(domain)
    bbox = list(geometry.bbox)
    grid = EvalGrid.from_spec({"bbox": bbox, "nx": 31, "ny": 31, **({"nz": 9} if len(bbox) == 6 else {})})
    valid = valid_mask({"domain": domain}, grid, geometry)
    points = grid.points()
    reference = np.stack([np.sin(points[:, 0] + k) * np.cos(points[:, 1]) for k in range(len(names))], axis=-1)
    reference = reference.reshape(*grid.shape, len(names))
    solution = reference + 0.01 * (points[:, 1].reshape(*grid.shape, 1) > 0.8)
    path = draw_fields(tmp_path / "fields.png", solution, reference, valid, grid, geometry, names, "a title")
    image = matplotlib.image.imread(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width = image.shape[:2]
    assert width == pytest.approx(3 * 3.2 * 90, rel=0.02) and height == pytest.approx(rows * 3.2 * 0.9 * 90, rel=0.02)
    assert image[..., :3].std() > 0.1  # drawn, not blank


def test_which_items_get_pictures():
    assert [wanted(choice, "F-Acc") for choice in ("failed", "all", "none")] == [True, True, False]
    assert [wanted(choice, "PASS") for choice in ("failed", "all", "none")] == [False, True, False]
