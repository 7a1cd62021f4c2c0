"""The 14 domain templates: their parameters, bounding boxes, boundary tags and
the evaluator's inside-domain mask on the evaluation grid.

The mask is computed by the evaluator from ``case_spec.domain`` alone; a solver's
NaNs are never trusted. Points on the boundary (within a tolerance of 1e-9 times the
domain size) are inside. Curved and polygonal shapes are exact here: a solver whose
mesh only approximates a circle must still return finite values on every grid point
of the exact disk.

Parameters of each template (``case_spec.domain.geometry_params``; all optional,
defaults in brackets):

unit_square        none; [0,1]^2. Tags x_min, x_max, y_min, y_max.
unit_cube          none; [0,1]^3. Tags x_min ... z_max.
periodic_square    bounds [0,1,0,1]: a rectangle whose opposite sides are identified
                   by ``bc.periodic``. Tags as unit_square.
l_shape            vertices [(0,0),(1,0),(1,.5),(.5,.5),(.5,1),(0,1)]: a simple polygon
                   listed counter-clockwise. Tag boundary.
square_with_hole   outer [0,1,0,1], hole {center [.5,.5], radius .2}, or a polygonal hole
                   {vertices [[x,y], ...]} (counter-clockwise). Tags x_min..y_max, hole.
multi_hole         outer [0,1,0,1], holes [{center, radius}, ...] (disjoint, inside outer).
                   Tags x_min..y_max, holes.
circle             center [.5,.5], radius .5. Tag boundary.
annulus            center [.5,.5], inner_radius .25, outer_radius .5. Tags inner, outer.
eccentric_annulus  outer {center [.5,.5], radius .5}, inner {center [.65,.5], radius .2}.
                   Tags inner, outer.
sector             center [0,0], radius 1, angle_deg 90: the disk sector from angle 0
                   to angle_deg, counter-clockwise. Tags arc, edge_start, edge_end.
star               center [0,0], points 5, inner_radius .3, outer_radius .7: the polygon
                   whose vertices alternate outer/inner radius, the first outer vertex
                   at angle 90 deg. Tag boundary.
gear               center [0,0], teeth 8, base_radius .5, tooth_height .2: the polygon
                   with ``teeth`` radial teeth, each spanning half the angular pitch
                   starting at angle 2*pi*k/teeth. Tag boundary.
t_junction         bar [0,1,.8,1], stem [.4,.6,0,.8]: union of two rectangles
                   [x0,x1,y0,y1] that overlap or touch. Tag boundary.
dumbbell           left {center [.25,.5], radius .25}, right {center [.75,.5], radius .25},
                   bridge [.25,.75,.4,.6]: union of two disks and a rectangle. Tag boundary.

Every domain also has the tag ``boundary`` (the whole boundary).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .vocabulary import DOMAIN_TYPES

RECT_TAGS_2D = ("x_min", "x_max", "y_min", "y_max")
RECT_TAGS_3D = RECT_TAGS_2D + ("z_min", "z_max")


class DomainError(ValueError):
    """Invalid or inconsistent domain parameters in a case record."""


@dataclass(frozen=True)
class Geometry:
    """A resolved domain: dimension, bounding box, boundary tags and its mask."""

    kind: str
    dim: int
    bbox: tuple[float, ...]  # (x0, x1, y0, y1[, z0, z1])
    tags: tuple[str, ...]
    contains: Callable[[np.ndarray, float], np.ndarray] = field(repr=False)
    params: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def size(self) -> float:
        return max(self.bbox[1] - self.bbox[0], self.bbox[3] - self.bbox[2])

    def mask(self, points: np.ndarray) -> np.ndarray:
        """Boolean array: which of the (N, dim) points lie in the closed domain."""
        return self.contains(np.asarray(points, dtype=float), 1e-9 * self.size)


# ---- elementary shapes (vectorised over points; tol widens them by a hair) ----


def _in_box(p: np.ndarray, box, tol: float) -> np.ndarray:
    inside = np.ones(len(p), dtype=bool)
    for axis in range(len(box) // 2):
        inside &= (p[:, axis] >= box[2 * axis] - tol) & (p[:, axis] <= box[2 * axis + 1] + tol)
    return inside


def _in_disk(p: np.ndarray, center, radius: float, tol: float) -> np.ndarray:
    return np.hypot(p[:, 0] - center[0], p[:, 1] - center[1]) <= radius + tol


def _distance_to_segments(p: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    a = vertices
    b = np.roll(vertices, -1, axis=0)
    ab = b - a  # (M, 2)
    ap = p[:, None, :] - a[None, :, :]  # (N, M, 2)
    s = np.clip((ap * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-300), 0.0, 1.0)
    closest = a[None] + s[..., None] * ab[None]
    return np.linalg.norm(p[:, None, :] - closest, axis=-1).min(axis=1)


def _in_polygon(p: np.ndarray, vertices, tol: float) -> np.ndarray:
    v = np.asarray(vertices, dtype=float)
    px, py = p[:, 0][:, None], p[:, 1][:, None]
    x0, y0 = v[:, 0][None], v[:, 1][None]
    x1, y1 = np.roll(v[:, 0], -1)[None], np.roll(v[:, 1], -1)[None]
    crosses = (y0 > py) != (y1 > py)
    with np.errstate(divide="ignore", invalid="ignore"):
        x_cross = x0 + (py - y0) * (x1 - x0) / (y1 - y0)
    inside = (crosses & (px < x_cross)).sum(axis=1) % 2 == 1
    out = np.zeros(len(p), dtype=bool)
    out |= inside
    # points on (or within tol of) an edge count as inside
    near = ~inside
    if near.any():
        out[near] = _distance_to_segments(p[near], v) <= tol
    return out


def star_vertices(center, points: int, inner_radius: float, outer_radius: float) -> np.ndarray:
    angles = math.pi / 2 + np.arange(2 * points) * math.pi / points
    radii = np.where(np.arange(2 * points) % 2 == 0, outer_radius, inner_radius)
    return np.column_stack([center[0] + radii * np.cos(angles), center[1] + radii * np.sin(angles)])


def gear_vertices(center, teeth: int, base_radius: float, tooth_height: float) -> np.ndarray:
    tip = base_radius + tooth_height
    pitch = 2 * math.pi / teeth
    vertices = []
    for k in range(teeth):
        a0, a1 = k * pitch, k * pitch + pitch / 2
        for radius, angle in ((base_radius, a0), (tip, a0), (tip, a1), (base_radius, a1)):
            vertices.append((center[0] + radius * math.cos(angle), center[1] + radius * math.sin(angle)))
    return np.asarray(vertices)


# ---- templates ----


def _circle_param(spec: dict | None, default_center, default_radius) -> tuple[tuple[float, float], float]:
    spec = spec or {}
    center = tuple(float(c) for c in spec.get("center", default_center))
    radius = float(spec.get("radius", default_radius))
    if len(center) != 2 or radius <= 0:
        raise DomainError(f"a circle needs a 2-D center and a positive radius, got {spec}")
    return center, radius


def _rect_param(value, default) -> tuple[float, float, float, float]:
    box = tuple(float(v) for v in (value if value is not None else default))
    if len(box) != 4 or box[0] >= box[1] or box[2] >= box[3]:
        raise DomainError(f"a rectangle is [x0, x1, y0, y1] with x0 < x1 and y0 < y1, got {value}")
    return box


def _rectangle(kind: str, params: dict) -> Geometry:
    box = _rect_param(params.get("bounds"), (0, 1, 0, 1))
    return Geometry(kind, 2, box, RECT_TAGS_2D + ("boundary",), lambda p, tol: _in_box(p, box, tol), {"bounds": box})


def _unit_square(kind: str, params: dict) -> Geometry:
    if params:
        raise DomainError("unit_square takes no geometry_params")
    return _rectangle(kind, {})


def _unit_cube(kind: str, params: dict) -> Geometry:
    if params:
        raise DomainError("unit_cube takes no geometry_params")
    box = (0.0, 1.0, 0.0, 1.0, 0.0, 1.0)
    return Geometry(kind, 3, box, RECT_TAGS_3D + ("boundary",), lambda p, tol: _in_box(p, box, tol), {})


def _polygon_geometry(kind: str, vertices: np.ndarray, extra: dict) -> Geometry:
    vertices = np.asarray(vertices, dtype=float)
    if vertices.ndim != 2 or vertices.shape[1] != 2 or len(vertices) < 3:
        raise DomainError(f"{kind}: a polygon needs at least 3 (x, y) vertices")
    signed_area = 0.5 * np.sum(
        vertices[:, 0] * np.roll(vertices[:, 1], -1) - np.roll(vertices[:, 0], -1) * vertices[:, 1]
    )
    if signed_area <= 0:
        raise DomainError(f"{kind}: vertices must be listed counter-clockwise (signed area {signed_area:.3g})")
    box = (vertices[:, 0].min(), vertices[:, 0].max(), vertices[:, 1].min(), vertices[:, 1].max())
    params = dict(extra, vertices=vertices.tolist())
    return Geometry(
        kind, 2, tuple(map(float, box)), ("boundary",), lambda p, tol: _in_polygon(p, vertices, tol), params
    )


def _l_shape(kind: str, params: dict) -> Geometry:
    vertices = params.get("vertices", [[0, 0], [1, 0], [1, 0.5], [0.5, 0.5], [0.5, 1], [0, 1]])
    return _polygon_geometry(kind, np.asarray(vertices, dtype=float), {})


def _star(kind: str, params: dict) -> Geometry:
    center = tuple(map(float, params.get("center", (0, 0))))
    points = int(params.get("points", 5))
    inner, outer = float(params.get("inner_radius", 0.3)), float(params.get("outer_radius", 0.7))
    if points < 3 or not 0 < inner < outer:
        raise DomainError("star needs points >= 3 and 0 < inner_radius < outer_radius")
    extra = {"center": center, "points": points, "inner_radius": inner, "outer_radius": outer}
    return _polygon_geometry(kind, star_vertices(center, points, inner, outer), extra)


def _gear(kind: str, params: dict) -> Geometry:
    center = tuple(map(float, params.get("center", (0, 0))))
    teeth = int(params.get("teeth", 8))
    base, height = float(params.get("base_radius", 0.5)), float(params.get("tooth_height", 0.2))
    if teeth < 3 or base <= 0 or height <= 0:
        raise DomainError("gear needs teeth >= 3, base_radius > 0 and tooth_height > 0")
    extra = {"center": center, "teeth": teeth, "base_radius": base, "tooth_height": height}
    return _polygon_geometry(kind, gear_vertices(center, teeth, base, height), extra)


def _polygon_hole(kind: str, outer, vertices, params: dict) -> Geometry:
    vertices = np.asarray(vertices, dtype=float)
    _polygon_geometry(kind, vertices, {})  # same checks as a polygonal domain
    if not (
        _in_box(vertices, outer, 0.0).all()
        and vertices[:, 0].min() > outer[0]
        and vertices[:, 0].max() < outer[1]
        and vertices[:, 1].min() > outer[2]
        and vertices[:, 1].max() < outer[3]
    ):
        raise DomainError(f"{kind}: the polygonal hole is not strictly inside {outer}")

    def contains(p, tol):
        inside = _in_box(p, outer, tol)
        candidates = np.flatnonzero(inside)
        strictly_in_hole = _in_polygon(p[candidates], vertices, 0.0) & (
            _distance_to_segments(p[candidates], vertices) > tol
        )
        inside[candidates[strictly_in_hole]] = False
        return inside

    return Geometry(kind, 2, outer, RECT_TAGS_2D + ("hole", "boundary"), contains, params)


def _with_holes(kind: str, outer, holes: list, tags: tuple[str, ...], params: dict) -> Geometry:
    for center, radius in holes:
        inner_box = (center[0] - radius, center[0] + radius, center[1] - radius, center[1] + radius)
        if not (
            outer[0] < inner_box[0] and inner_box[1] < outer[1] and outer[2] < inner_box[2] and inner_box[3] < outer[3]
        ):
            raise DomainError(f"{kind}: hole at {center} with radius {radius} is not strictly inside {outer}")
    for i, (c1, r1) in enumerate(holes):
        for c2, r2 in holes[i + 1 :]:
            if math.dist(c1, c2) <= r1 + r2:
                raise DomainError(f"{kind}: holes at {c1} and {c2} overlap")

    def contains(p, tol):
        inside = _in_box(p, outer, tol)
        for center, radius in holes:
            inside &= ~_in_disk(p, center, radius - tol, 0.0)
        return inside

    return Geometry(kind, 2, outer, tags, contains, params)


def _square_with_hole(kind: str, params: dict) -> Geometry:
    outer = _rect_param(params.get("outer"), (0, 1, 0, 1))
    if "vertices" in (params.get("hole") or {}):
        vertices = params["hole"]["vertices"]
        return _polygon_hole(kind, outer, vertices, {"outer": outer, "hole": {"vertices": vertices}})
    center, radius = _circle_param(params.get("hole"), (0.5, 0.5), 0.2)
    tags = RECT_TAGS_2D + ("hole", "boundary")
    return _with_holes(
        kind, outer, [(center, radius)], tags, {"outer": outer, "hole": {"center": center, "radius": radius}}
    )


def _multi_hole(kind: str, params: dict) -> Geometry:
    outer = _rect_param(params.get("outer"), (0, 1, 0, 1))
    raw = params.get(
        "holes",
        [
            {"center": [0.3, 0.3], "radius": 0.1},
            {"center": [0.7, 0.3], "radius": 0.08},
            {"center": [0.5, 0.7], "radius": 0.12},
        ],
    )
    holes = [_circle_param(h, None, None) for h in raw]
    if not holes:
        raise DomainError("multi_hole needs at least one hole")
    tags = RECT_TAGS_2D + ("holes", "boundary")
    return _with_holes(
        kind, outer, holes, tags, {"outer": outer, "holes": [{"center": c, "radius": r} for c, r in holes]}
    )


def _circle(kind: str, params: dict) -> Geometry:
    center, radius = _circle_param(params, (0.5, 0.5), 0.5)
    box = (center[0] - radius, center[0] + radius, center[1] - radius, center[1] + radius)
    return Geometry(
        kind,
        2,
        box,
        ("boundary",),
        lambda p, tol: _in_disk(p, center, radius, tol),
        {"center": center, "radius": radius},
    )


def _ring(kind: str, outer_c, outer_r, inner_c, inner_r) -> Geometry:
    if math.dist(outer_c, inner_c) + inner_r >= outer_r:
        raise DomainError(f"{kind}: the inner circle must lie strictly inside the outer one")
    box = (outer_c[0] - outer_r, outer_c[0] + outer_r, outer_c[1] - outer_r, outer_c[1] + outer_r)

    def contains(p, tol):
        return _in_disk(p, outer_c, outer_r, tol) & ~_in_disk(p, inner_c, inner_r - tol, 0.0)

    params = {"outer": {"center": outer_c, "radius": outer_r}, "inner": {"center": inner_c, "radius": inner_r}}
    return Geometry(kind, 2, box, ("inner", "outer", "boundary"), contains, params)


def _annulus(kind: str, params: dict) -> Geometry:
    center = tuple(map(float, params.get("center", (0.5, 0.5))))
    inner, outer = float(params.get("inner_radius", 0.25)), float(params.get("outer_radius", 0.5))
    if not 0 < inner < outer:
        raise DomainError("annulus needs 0 < inner_radius < outer_radius")
    return _ring(kind, center, outer, center, inner)


def _eccentric_annulus(kind: str, params: dict) -> Geometry:
    outer_c, outer_r = _circle_param(params.get("outer"), (0.5, 0.5), 0.5)
    inner_c, inner_r = _circle_param(params.get("inner"), (0.65, 0.5), 0.2)
    return _ring(kind, outer_c, outer_r, inner_c, inner_r)


def _sector(kind: str, params: dict) -> Geometry:
    center = tuple(map(float, params.get("center", (0, 0))))
    radius = float(params.get("radius", 1.0))
    angle = float(params.get("angle_deg", 90.0))
    if radius <= 0 or not 0 < angle < 360:
        raise DomainError("sector needs radius > 0 and 0 < angle_deg < 360")
    theta = math.radians(angle)
    # bounding box: the centre, the two edge ends and any axis crossing of the arc
    xs, ys = [center[0], center[0] + radius], [center[1], center[1]]
    xs.append(center[0] + radius * math.cos(theta))
    ys.append(center[1] + radius * math.sin(theta))
    for quarter in (0.5 * math.pi, math.pi, 1.5 * math.pi):
        if quarter < theta:
            xs.append(center[0] + radius * math.cos(quarter))
            ys.append(center[1] + radius * math.sin(quarter))
    box = (min(xs), max(xs), min(ys), max(ys))

    def contains(p, tol):
        dx, dy = p[:, 0] - center[0], p[:, 1] - center[1]
        r = np.hypot(dx, dy)
        phi = np.mod(np.arctan2(dy, dx), 2 * math.pi)
        # an angular tolerance that is tol long at radius r
        slack = np.where(r > 0, tol / np.maximum(r, 1e-300), 2 * math.pi)
        in_angle = (phi <= theta + slack) | (phi >= 2 * math.pi - slack)
        return (r <= radius + tol) & in_angle

    params_out = {"center": center, "radius": radius, "angle_deg": angle}
    return Geometry(
        kind, 2, tuple(map(float, box)), ("arc", "edge_start", "edge_end", "boundary"), contains, params_out
    )


def _t_junction(kind: str, params: dict) -> Geometry:
    bar = _rect_param(params.get("bar"), (0, 1, 0.8, 1.0))
    stem = _rect_param(params.get("stem"), (0.4, 0.6, 0, 0.8))
    if stem[3] < bar[2] or stem[2] > bar[3] or stem[0] > bar[1] or stem[1] < bar[0]:
        raise DomainError("t_junction: bar and stem must overlap or touch")
    box = (min(bar[0], stem[0]), max(bar[1], stem[1]), min(bar[2], stem[2]), max(bar[3], stem[3]))
    return Geometry(
        kind,
        2,
        box,
        ("boundary",),
        lambda p, tol: _in_box(p, bar, tol) | _in_box(p, stem, tol),
        {"bar": bar, "stem": stem},
    )


def _dumbbell(kind: str, params: dict) -> Geometry:
    left_c, left_r = _circle_param(params.get("left"), (0.25, 0.5), 0.25)
    right_c, right_r = _circle_param(params.get("right"), (0.75, 0.5), 0.25)
    bridge = _rect_param(params.get("bridge"), (0.25, 0.75, 0.4, 0.6))
    box = (
        min(left_c[0] - left_r, bridge[0]),
        max(right_c[0] + right_r, bridge[1]),
        min(left_c[1] - left_r, right_c[1] - right_r, bridge[2]),
        max(left_c[1] + left_r, right_c[1] + right_r, bridge[3]),
    )

    def contains(p, tol):
        return _in_disk(p, left_c, left_r, tol) | _in_disk(p, right_c, right_r, tol) | _in_box(p, bridge, tol)

    params_out = {
        "left": {"center": left_c, "radius": left_r},
        "right": {"center": right_c, "radius": right_r},
        "bridge": bridge,
    }
    return Geometry(kind, 2, tuple(map(float, box)), ("boundary",), contains, params_out)


TEMPLATES: dict[str, Callable[[str, dict], Geometry]] = {
    "unit_square": _unit_square,
    "unit_cube": _unit_cube,
    "l_shape": _l_shape,
    "square_with_hole": _square_with_hole,
    "multi_hole": _multi_hole,
    "circle": _circle,
    "annulus": _annulus,
    "eccentric_annulus": _eccentric_annulus,
    "sector": _sector,
    "star": _star,
    "gear": _gear,
    "t_junction": _t_junction,
    "dumbbell": _dumbbell,
    "periodic_square": _rectangle,
}

if tuple(TEMPLATES) != DOMAIN_TYPES:  # one list of names (vocabulary.py), one builder each
    raise ImportError(f"TEMPLATES and vocabulary.DOMAIN_TYPES differ: {sorted(set(TEMPLATES) ^ set(DOMAIN_TYPES))}")


def resolve_geometry(domain: dict) -> Geometry:
    """Build the Geometry of a ``case_spec.domain`` block (type + geometry_params)."""
    kind = domain.get("type")
    if kind not in TEMPLATES:
        raise DomainError(f"unknown domain type {kind!r}; known: {', '.join(DOMAIN_TYPES)}")
    params = domain.get("geometry_params") or {}
    try:
        return TEMPLATES[kind](kind, params)
    except (TypeError, KeyError, IndexError) as exc:
        raise DomainError(f"{kind}: malformed geometry_params {params}: {exc}") from None
