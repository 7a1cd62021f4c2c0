"""Where a solution's error sits on the evaluation grid: the band along each boundary piece
(named by its tag and the conditions the case puts on it) and the interior, so that a failed
accuracy gate can say "largest near the y_max (Neumann) edge" (verdict.json's
``errors_by_region``). Read from the arrays the gates already hold: nothing is run again.

A valid grid point belongs to the band of the nearest boundary tag when it lies within
``BAND_SPACINGS`` grid spacings of it, else to the interior. In 2-D the distance is to points
sampled on the true boundary (``boundaries.boundary_points``: a union's inner segments are not
boundary); in 3-D (the cube's faces) it is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .boundaries import Plane, boundary_pieces, boundary_points
from .domains import Geometry
from .grid import EvalGrid

BAND_SPACINGS = 1.5  # the band's width, in grid spacings (the largest axis spacing)
SAMPLES_PER_SPACING = 2  # 2-D: points sampled along each piece per grid spacing
CHUNK = 4096  # grid points per block of the distance computation (memory: CHUNK x samples)
CONDITION_KINDS = ("dirichlet", "neumann", "robin", "laplacian")
INTERIOR = "interior"
CLEAR_RATIO = 2.0  # the reason names a region when its RMS error is this many times the next one's


def conditions_on_tags(bc: dict, tags: list[str]) -> dict[str, list[str]]:
    """tag -> the kinds of condition the case puts on it (``boundary``: every tag)."""
    kinds: dict[str, list[str]] = {tag: [] for tag in tags}
    for kind in CONDITION_KINDS:
        conditions = bc.get(kind) or []
        for condition in conditions if isinstance(conditions, list) else [conditions]:
            on = condition["on"] if isinstance(condition["on"], list) else [condition["on"]]
            for tag in tags if "boundary" in on else on:
                if tag in kinds and kind not in kinds[tag]:
                    kinds[tag].append(kind)
    for direction in (bc.get("periodic") or {}).get("directions", []):
        for tag in (f"{direction}_min", f"{direction}_max"):
            if tag in kinds:
                kinds[tag].append("periodic")
    return kinds


def _near_boundary(valid: np.ndarray, cells: int) -> np.ndarray:
    """Valid points within ``cells`` grid cells of an invalid point or of the grid's edge:
    the only candidates for a band (the rest is interior without measuring a distance)."""
    padded = np.pad(valid, cells, constant_values=False)
    kept = np.ones_like(valid)
    for shift in np.ndindex(*(2 * cells + 1,) * valid.ndim):
        kept &= padded[tuple(slice(s, s + n) for s, n in zip(shift, valid.shape))]
    return valid & ~kept


def _distances(geometry: Geometry, tag: str, points: np.ndarray, spacing: float) -> np.ndarray:
    """Each point's distance to the true boundary under ``tag``."""
    pieces = [piece for piece in boundary_pieces(geometry) if piece.tag == tag]
    if geometry.dim == 3 and all(isinstance(piece, Plane) for piece in pieces):
        return np.min([np.abs(points[:, piece.axis] - piece.value) for piece in pieces], axis=0)
    samples = boundary_points(geometry, tag, spacing=spacing / SAMPLES_PER_SPACING)
    if len(samples) == 0:
        return np.full(len(points), np.inf)
    out = np.empty(len(points))
    for start in range(0, len(points), CHUNK):
        block = points[start : start + CHUNK, None, :] - samples[None, :, :]
        out[start : start + CHUNK] = np.sqrt(np.min(np.sum(block * block, axis=2), axis=1))
    return out


def region_of_points(geometry: Geometry, grid: EvalGrid, valid: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """An int array of the grid's shape: -1 outside the domain, 0 interior, i the band of
    ``names[i]`` (names[0] is the interior)."""
    spacing = max(float(axis[1] - axis[0]) for axis in grid.axes if len(axis) > 1)
    tags = list(dict.fromkeys(piece.tag for piece in boundary_pieces(geometry)))
    labels = np.where(valid, 0, -1).ravel()
    candidates = np.flatnonzero(_near_boundary(valid, math.ceil(BAND_SPACINGS)).ravel())
    if len(candidates) and tags:
        points = grid.points()[candidates]
        distance = np.array([_distances(geometry, tag, points, spacing) for tag in tags])
        nearest = np.argmin(distance, axis=0)
        inside = distance[nearest, np.arange(len(points))] <= BAND_SPACINGS * spacing * (1 + 1e-9)
        labels[candidates[inside]] = nearest[inside] + 1
    return labels.reshape(valid.shape), [INTERIOR, *tags]


def errors_by_region(
    solution: np.ndarray, reference: np.ndarray, labels: np.ndarray, names: list[str], conditions: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """Per region (each boundary tag's band, then the interior): its points, the RMS of the
    pointwise error relative to the reference's RMS over the domain, the largest pointwise
    error, and its share of the squared error. Components (stacked on the last axis) add up."""
    pointwise = np.sqrt(np.sum((solution - reference) ** 2, axis=-1))
    valid = labels >= 0
    reference_rms = float(np.sqrt(np.mean(np.sum(reference[valid] ** 2, axis=-1)))) or 1.0
    total = float(np.sum(pointwise[valid] ** 2)) or 1.0
    regions = []
    for index, name in [*enumerate(names)][1:] + [(0, INTERIOR)]:
        errors = pointwise[labels == index]
        if errors.size == 0:
            continue
        regions.append(
            {
                "region": name,
                "where": label(name, conditions.get(name, []), labels.ndim),
                "conditions": conditions.get(name, []),
                "points": int(errors.size),
                "relative_rms": float(np.sqrt(np.mean(errors**2))) / reference_rms,
                "max": float(np.max(errors)),
                "share": float(np.sum(errors**2)) / total,
            }
        )
    return regions


def label(tag: str, conditions: list[str], dim: int) -> str:
    """ "the y_max (Neumann) edge", "the z_min face", "the 'hole' boundary", "the interior"."""
    if tag == INTERIOR:
        return "the interior"
    kinds = ", ".join("Laplacian" if kind == "laplacian" else kind.capitalize() for kind in conditions)
    said = f" ({kinds})" if kinds else ""
    if tag == "boundary":
        return f"the boundary{said}"
    if tag[:1] in "xyz" and tag[1:] in ("_min", "_max"):
        return f"the {tag}{said} {'face' if dim == 3 else 'edge'}"
    return f"the '{tag}' boundary{said}"


def where_largest(regions: list[dict[str, Any]]) -> str:
    """The phrase a failed accuracy gate adds: the region with the largest RMS error, and by
    how much it stands out from the next one (or that the error is spread out)."""
    if not regions:
        return ""
    ranked = sorted(regions, key=lambda region: region["relative_rms"], reverse=True)
    top = ranked[0]
    if len(ranked) == 1:
        return f"error spread over {top['where']}"
    place = "in" if top["region"] == INTERIOR else "near"
    second = ranked[1]["relative_rms"]
    ratio = top["relative_rms"] / second if second > 0 else math.inf
    if ratio < CLEAR_RATIO:
        return f"error spread over the domain (largest RMS {place} {top['where']}, {ratio:.1f} x the next region's)"
    times = "all of it" if math.isinf(ratio) else f"{ratio:.1f} x the next region's"
    return f"largest {place} {top['where']}: RMS {top['relative_rms']:.1e} of the reference's there, {times}"


@dataclass(frozen=True)
class Regions:
    """A case's regions on its grid (``region_of_points``) and the conditions on each tag: the
    same for every run of an item, so made once (the distances are most of the cost)."""

    labels: np.ndarray
    names: list[str]
    conditions: dict[str, list[str]]

    @classmethod
    def of(cls, case_spec: dict, geometry: Geometry, grid: EvalGrid, valid: np.ndarray) -> Regions:
        labels, names = region_of_points(geometry, grid, valid)
        return cls(labels, names, conditions_on_tags(case_spec["bc"], names[1:]))

    def errors(self, solution: np.ndarray, reference: np.ndarray) -> list[dict[str, Any]]:
        return errors_by_region(solution, reference, self.labels, self.names, self.conditions)


def where_wrong(
    case_spec: dict, geometry: Geometry, grid: EvalGrid, valid, solution, reference
) -> list[dict[str, Any]]:
    """errors_by_region for a case (its spec gives the conditions on each tag)."""
    return Regions.of(case_spec, geometry, grid, valid).errors(solution, reference)
