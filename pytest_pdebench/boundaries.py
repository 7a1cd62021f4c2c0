"""The boundary of each domain template as pieces (segments, arcs, planes), each with
its tag, an implicit function that is exactly zero on the whole line, circle or plane
carrying it, and a sampler of points on the piece.

Contract:
- ``vanishing_function(geometry, tags)`` is the product of the implicit functions of
  every piece under those tags (``boundary``: all pieces). It is zero on the true
  boundary curves of the template, not on a mesh's approximation of them, and it may be
  zero on extra curves (a polygon's edge lines run on through the domain; a union's
  pieces include the parts that lie inside the other shapes).
- ``boundary_points(geometry, tag, n)`` samples points on the pieces under a tag and
  keeps those on the true boundary (inside on one side, outside on the other).
Both read only ``Geometry.params``, so they follow the same parameters as the mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import sympy as sp

from .domains import Geometry, gear_vertices, star_vertices
from .expressions import x, y, z

COORDS = (x, y, z)


def _number(value: float) -> sp.Float:
    return sp.Float(repr(float(value)))  # every digit of the float: zero where the mask has its edge


@dataclass(frozen=True)
class Segment:
    tag: str
    a: tuple[float, float]
    b: tuple[float, float]

    def implicit(self) -> sp.Expr:
        (ax, ay), (bx, by) = self.a, self.b
        length = math.hypot(bx - ax, by - ay)
        if bx == ax:  # axis-parallel sides keep the short form x - x0
            return (x - _number(ax)) * _number(math.copysign(1, by - ay))
        if by == ay:
            return (y - _number(ay)) * _number(math.copysign(1, ax - bx))
        return _number((bx - ax) / length) * (y - _number(ay)) - _number((by - ay) / length) * (x - _number(ax))

    @property
    def length(self) -> float:
        return math.hypot(self.b[0] - self.a[0], self.b[1] - self.a[1])

    def sample(self, s: np.ndarray) -> np.ndarray:
        a, b = np.asarray(self.a), np.asarray(self.b)
        return a[None] + s[:, None] * (b - a)[None]

    def normal(self, s: np.ndarray) -> np.ndarray:
        d = np.asarray(self.b, float) - np.asarray(self.a, float)
        return np.broadcast_to(np.array([-d[1], d[0]]) / np.hypot(*d), (len(s), 2))


@dataclass(frozen=True)
class Arc:
    tag: str
    center: tuple[float, float]
    radius: float
    start: float = 0.0  # angles in radians, counter-clockwise
    stop: float = 2 * math.pi

    def implicit(self) -> sp.Expr:
        """Squared: a mesh puts P2 edge midpoints on chords, a sagitta off the circle,
        where data built with this factor would differ from the solution; squaring makes
        that gap second order in the sagitta."""
        cx, cy = self.center
        return (
            ((x - _number(cx)) ** 2 + (y - _number(cy)) ** 2 - _number(self.radius) ** 2) / _number(self.radius)
        ) ** 2

    @property
    def length(self) -> float:
        return self.radius * (self.stop - self.start)

    def sample(self, s: np.ndarray) -> np.ndarray:
        angle = self.start + s * (self.stop - self.start)
        return np.column_stack(
            [self.center[0] + self.radius * np.cos(angle), self.center[1] + self.radius * np.sin(angle)]
        )

    def normal(self, s: np.ndarray) -> np.ndarray:
        angle = self.start + s * (self.stop - self.start)
        return np.column_stack([np.cos(angle), np.sin(angle)])


@dataclass(frozen=True)
class Plane:
    tag: str
    axis: int
    value: float
    box: tuple[float, ...]

    def implicit(self) -> sp.Expr:
        return COORDS[self.axis] - _number(self.value)

    def sample(self, s: np.ndarray) -> np.ndarray:
        rng = np.random.default_rng(len(s))
        points = rng.uniform(self.box[0::2], self.box[1::2], size=(len(s), 3))
        points[:, self.axis] = self.value
        return points

    def normal(self, s: np.ndarray) -> np.ndarray:
        normal = np.zeros((len(s), 3))
        normal[:, self.axis] = 1.0
        return normal


def _box_sides(box) -> list[Segment]:
    x0, x1, y0, y1 = box
    return [
        Segment("y_min", (x0, y0), (x1, y0)),
        Segment("x_max", (x1, y0), (x1, y1)),
        Segment("y_max", (x1, y1), (x0, y1)),
        Segment("x_min", (x0, y1), (x0, y0)),
    ]


def _polygon(tag: str, vertices) -> list[Segment]:
    vertices = [tuple(map(float, v)) for v in vertices]
    return [Segment(tag, a, b) for a, b in zip(vertices, vertices[1:] + vertices[:1])]


def _circle(tag: str, spec: dict) -> Arc:
    return Arc(tag, cast(tuple[float, float], tuple(map(float, spec["center"]))), float(spec["radius"]))


def boundary_pieces(geometry: Geometry) -> list:
    """The pieces of a resolved geometry's boundary, each with its tag."""
    kind, p = geometry.kind, geometry.params
    if kind in ("unit_square", "periodic_square"):
        return _box_sides(geometry.bbox)
    if kind == "unit_cube":
        names = ("x_min", "x_max", "y_min", "y_max", "z_min", "z_max")
        return [Plane(name, i // 2, geometry.bbox[i], geometry.bbox) for i, name in enumerate(names)]
    if kind == "l_shape":
        return _polygon("boundary", p["vertices"])
    if kind == "star":
        return _polygon("boundary", star_vertices(p["center"], p["points"], p["inner_radius"], p["outer_radius"]))
    if kind == "gear":
        return _polygon("boundary", gear_vertices(p["center"], p["teeth"], p["base_radius"], p["tooth_height"]))
    if kind == "square_with_hole":
        hole = p["hole"]
        inner = _polygon("hole", hole["vertices"]) if "vertices" in hole else [_circle("hole", hole)]
        return _box_sides(p["outer"]) + inner
    if kind == "multi_hole":
        return _box_sides(p["outer"]) + [_circle("holes", hole) for hole in p["holes"]]
    if kind == "circle":
        return [_circle("boundary", p)]
    if kind in ("annulus", "eccentric_annulus"):
        return [_circle("inner", p["inner"]), _circle("outer", p["outer"])]
    if kind == "sector":
        (cx, cy), radius, theta = p["center"], p["radius"], math.radians(p["angle_deg"])
        end = (cx + radius * math.cos(theta), cy + radius * math.sin(theta))
        if p["angle_deg"] in (90.0, 180.0, 270.0):  # exact ends: cos(pi/2) is 6e-17 in floats
            end = (cx + radius * round(math.cos(theta)), cy + radius * round(math.sin(theta)))
        return [
            Arc("arc", (cx, cy), radius, 0.0, theta),
            Segment("edge_start", (cx, cy), (cx + radius, cy)),
            Segment("edge_end", end, (cx, cy)),
        ]
    if kind == "t_junction":
        return _box_sides(p["bar"]) + _box_sides(p["stem"])
    if kind == "dumbbell":
        return [_circle("boundary", p["left"]), _circle("boundary", p["right"])] + _box_sides(p["bridge"])
    raise ValueError(f"no boundary pieces for domain type {kind!r}")


def _selected(geometry: Geometry, tags) -> list:
    tags = [tags] if isinstance(tags, str) else list(tags)
    pieces = boundary_pieces(geometry)
    if "boundary" in tags:
        return pieces
    # a piece tagged "boundary" belongs to every part of a template that has no finer tags
    return [piece for piece in pieces if piece.tag in tags]


def vanishing_function(geometry: Geometry, tags) -> sp.Expr:
    """A function that is zero on the boundary parts named by ``tags``."""
    factors: list[sp.Expr] = []
    seen: list[np.ndarray] = []
    probe = np.random.default_rng(0).uniform(-1, 2, size=(3, 5))
    for piece in _selected(geometry, tags):
        factor = piece.implicit()
        values = np.broadcast_to(np.asarray(sp.lambdify(COORDS, factor, "numpy")(*probe), float), (5,))
        # the same line or circle twice (a polygon's collinear edges): one factor is enough
        if not any(
            np.allclose(values, v, rtol=1e-12, atol=1e-12) or np.allclose(values, -v, rtol=1e-12, atol=1e-12)
            for v in seen
        ):
            factors.append(factor)
            seen.append(values)
    return sp.Mul(*factors)


def boundary_points(geometry: Geometry, tag: str, n: int = 40, spacing: float | None = None) -> np.ndarray:
    """Points on the true boundary parts under ``tag`` (those of its pieces that are not
    inside the domain: a union's inner segments are dropped): ``n`` on each piece, or with
    ``spacing`` (2-D) one per that length along each piece."""
    out = []
    step = 1e-6 * geometry.size
    for piece in _selected(geometry, tag):
        count = n if spacing is None else max(2, math.ceil(piece.length / spacing))
        s = np.linspace(0.0, 1.0, count + 2)[1:-1]
        points, normal = piece.sample(s)[:, : geometry.dim], piece.normal(s)[:, : geometry.dim]
        inside_plus, inside_minus = geometry.mask(points + step * normal), geometry.mask(points - step * normal)
        out.append(points[inside_plus != inside_minus])
    return np.concatenate(out) if out else np.zeros((0, geometry.dim))
