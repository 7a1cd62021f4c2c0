"""Live variants: for a published record, a sibling drawn afresh from the same
design, so that a score on it cannot come from having seen the published answers.

A variant keeps everything that makes the case what it is: family, regime, domain
template, boundary-condition kinds and tags, evaluation grid, time interval, difficulty
tag, evaluation and calibration settings. The regime's scalar coefficients move within 10%
(each its own draw; see KEPT_COEFFICIENTS for those kept); the template's parameters move
within 10% where that keeps the bounding box, hence the evaluation grid (``_moved_geometry``:
a hole's size and place, the L's corner, an annulus' inner radius, a star's inner radius,
a gear's teeth, a junction's stem, a dumbbell's bridge; a disk, a sector and the boxes keep
theirs, which are their box, and Helmholtz keeps its shape: KEPT_GEOMETRY); and the exact
solution changes by a transformation that keeps its structure:

    u_variant(X, t) = A * u(X', t),   X' = c + s * (X - c) - d

with c the domain's box centre, ``s`` a scale of the coordinates (frequencies and widths
change by up to 15%; 1 across a periodic direction, whose period must stay), ``d`` a shift
of up to a tenth of the box per axis (centres move; any shift keeps a periodic direction
periodic) and ``A`` an amplitude (a factor 2 either way; 1.25 for the nonlinear families,
whose difficulty grows with it). The same map applied to every velocity component keeps a
flow divergence free (its divergence is A s (div u)(X')); a pressure gets the amplitude.
From there the record is built as the published one was (``starter.build_record``: sympy
derives forcing, boundary and initial data; the answer is hidden as in data revision 2,
with the hiding's draws keyed on the variant), and ``--pde-validate``'s static checks,
the leak check included, must pass.

Deterministic in (record, seed). Records without an exact solution (a numerical
reference) and the smoke cases are not varied: ``variants`` returns None for them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import sympy as sp

from ..cases import CaseRecord, Variant
from ..domains import resolve_geometry
from ..expressions import expression_to_string, parse_expression, x, y, z
from . import mms
from .designs import DOMAINS, Design
from .hiding import case_rng
from .starter import build_record

SCALE_RANGE = 0.15  # coordinates scaled by 1 +- this: frequencies and widths
COEFFICIENT_RANGE = 0.10  # each scalar coefficient of the regime scaled by 1 +- this
# coefficients a variant keeps: elasticity's Poisson ratio (the regime is its distance from
# 1/2), Helmholtz's k (the published k sit between Dirichlet eigenvalues: 10% would cross
# some and make the problem near-singular); reaction terms are expressions in u, kept too
KEPT_COEFFICIENTS = {("linear_elasticity", "nu"), ("helmholtz", "k")}
# families that keep their shape too: moving a boundary moves the Dirichlet eigenvalues that
# Helmholtz's k sits between (seen: a star's inner radius moved 10% put k = 10 near one, and
# the oracle's error went from 3.6e-4 to 1.1e-2)
KEPT_GEOMETRY = {"helmholtz"}
GEOMETRY_RANGE = 0.10  # each moved length of a domain template scaled by 1 +- this
SHIFT_SHARE = 0.10  # of the box's extent per axis: centres
AMPLITUDE = {"default": 2.0, "burgers": 1.25, "navier_stokes": 1.25, "reaction_diffusion": 1.25}
AXES = (x, y, z)


def redraw_suffix(draw: int, sep: str = ":") -> str:
    """What a key or a folder name of the seed's ``draw``-th draw again adds (nothing for the
    first: its keys stay those of the seeds drawn before redraws existed)."""
    return f"{sep}{draw}" if draw else ""


class VariantError(Exception):
    """A variant that cannot be made, or fails the checks its published record passes."""


class NoPartCarried(VariantError):
    """This seed's draw of a record with a solve-only part gives data its baseline cannot
    carry a part in (the build refused it): the record is left as it is for this seed, as a
    record without an exact solution is; never judged with its answer in its data."""

    NOT_VARIED = "its variant's data carry no solve-only part"


def record_digest(record: CaseRecord) -> str:
    """What a variant names as its origin: a hash of the whole published record."""
    return hashlib.sha256(record.model_dump_json().encode()).hexdigest()[:16]


LONGEST_INTEGER = 10**15  # a fraction with a larger numerator or denominator is written as a float


def _rounded(value: float) -> sp.Rational:
    """Three significant digits, as an exact decimal fraction (sums of binary floats would
    leave constants such as 130000000000001/20000000000000000 in the derived data)."""
    return sp.Rational(f"{value:.3g}")


def _plain_numbers(value):
    """The case data with every fraction of long integers written as a 17-digit float. The
    unsimplified derivation leaves some (expansions of the map's decimals); a solver that
    evaluates the strings with UFL, as a textbook one does, would get integers beyond 64
    bits as C literals and compute garbage (seen: errors of 1e36 on 7 of 33 variants)."""
    if isinstance(value, dict):
        return {key: _plain_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_numbers(item) for item in value]
    if not isinstance(value, str):
        return value
    try:
        expr = parse_expression(value)
    except Exception:  # noqa: BLE001 - a tag, a type name: not an expression
        return value
    long = {r: sp.Float(r, 17) for r in expr.atoms(sp.Rational) if abs(r.p) > LONGEST_INTEGER or r.q > LONGEST_INTEGER}
    return expression_to_string(expr.xreplace(long)) if long else value


def transform(design: Design, seed: int, draw: int = 0) -> Design:
    """The design with its exact solution moved by the variant's map (see the module)."""
    rng = case_rng(design.id, f"variant:{seed}{redraw_suffix(draw)}")
    params = design.geometry if design.geometry is not None else DOMAINS.get(design.domain)
    geometry = resolve_geometry({"type": design.domain, **({"geometry_params": params} if params else {})})
    box = geometry.bbox
    periodic = set(design.periodic)
    scale = 1.0 if periodic else float(rng.uniform(1 - SCALE_RANGE, 1 + SCALE_RANGE))
    spread = AMPLITUDE.get(design.family, AMPLITUDE["default"])
    amplitude = float(spread ** rng.uniform(-1.0, 1.0))
    mapping = {}
    for axis in range(geometry.dim):
        low, high = box[2 * axis], box[2 * axis + 1]
        centre, shift = (low + high) / 2, float(rng.uniform(-SHIFT_SHARE, SHIFT_SHARE)) * (high - low)
        mapping[AXES[axis]] = _rounded(centre) + _rounded(scale) * (AXES[axis] - _rounded(centre)) - _rounded(shift)

    def moved(text: str) -> str:
        expr = parse_expression(text).subs(mapping, simultaneous=True)
        return expression_to_string(_rounded(amplitude) * expr)

    u = design.u
    assert u is not None  # callers vary only manufactured designs
    new_u = tuple(moved(c) for c in u) if isinstance(u, tuple) else moved(u)
    # drawn after the map's: a coefficient's draw never changes the solution a seed gives
    coefficients = tuple((name, _coefficient(design.family, name, value, rng)) for name, value in design.params)
    kappa = _kappa(design.kappa, rng)
    moved_geometry = None
    if design.family not in KEPT_GEOMETRY:
        moved_geometry = _moved_geometry(design.domain, params if params else geometry.params, rng)
    if moved_geometry is not None:
        moved_box = resolve_geometry({"type": design.domain, "geometry_params": moved_geometry}).bbox
        assert all(abs(a - b) < 1e-12 for a, b in zip(moved_box, box)), (design.id, moved_box, box)
    return dataclasses.replace(
        design,
        u=new_u,
        p=moved(design.p) if design.p is not None else None,
        kappa=kappa,
        params=coefficients,
        geometry=moved_geometry if moved_geometry is not None else design.geometry,
    )


def _length(value: float, rng) -> float:
    return float(_rounded(value * rng.uniform(1 - GEOMETRY_RANGE, 1 + GEOMETRY_RANGE)))


def _moved_geometry(kind: str, params: dict, rng) -> dict | None:
    """The template's parameters with the lengths that do not set the bounding box each
    moved within GEOMETRY_RANGE (drawn in a fixed order: deterministic in the seed); None
    for a template whose parameters are its box. Every move keeps the shapes apart by a
    margin: a hole stays at least 0.1 from the outer boundary and the other holes."""
    p = json.loads(json.dumps(params))  # a copy, tuples as lists
    if kind == "l_shape":  # the re-entrant corner, its two edges following it
        vertices = p["vertices"]
        corner = [_length(vertices[3][0], rng), _length(vertices[3][1], rng)]
        vertices[2][1], vertices[3], vertices[4][0] = corner[1], corner, corner[0]
    elif kind == "square_with_hole" and "radius" in p["hole"]:
        hole = p["hole"]
        hole["center"] = [_length(c, rng) for c in hole["center"]]
        hole["radius"] = _length(hole["radius"], rng)
    elif kind == "multi_hole":
        for hole in p["holes"]:
            hole["radius"] = _length(hole["radius"], rng)
    elif kind == "annulus":
        if "inner_radius" in p:
            p["inner_radius"] = _length(p["inner_radius"], rng)
        else:
            p["inner"]["radius"] = _length(p["inner"]["radius"], rng)
    elif kind == "eccentric_annulus":  # the inner disk's offset and radius
        centre, inner = p["outer"]["center"], p["inner"]
        inner["center"][0] = float(_rounded(centre[0] + (inner["center"][0] - centre[0]) * rng.uniform(0.85, 1.15)))
        inner["radius"] = _length(inner["radius"], rng)
    elif kind == "star":
        p.pop("vertices", None)
        p["inner_radius"] = _length(p["inner_radius"], rng)
    elif kind == "gear":  # the teeth's height, their tips where they were
        p.pop("vertices", None)
        tip = p["base_radius"] + p["tooth_height"]
        p["tooth_height"] = _length(p["tooth_height"], rng)
        p["base_radius"] = float(_rounded(tip - p["tooth_height"]))
    elif kind == "t_junction":  # the stem's width and where it meets the bar
        bar, stem = p["bar"], p["stem"]
        middle, half = (stem[0] + stem[1]) / 2, _length((stem[1] - stem[0]) / 2, rng)
        meet = float(_rounded(bar[3] - _length(bar[3] - bar[2], rng)))
        p["bar"] = [bar[0], bar[1], meet, bar[3]]
        p["stem"] = [float(_rounded(middle - half)), float(_rounded(middle + half)), stem[2], meet]
    elif kind == "dumbbell":  # the bridge's thickness
        bridge = p["bridge"]
        middle, half = (bridge[2] + bridge[3]) / 2, _length((bridge[3] - bridge[2]) / 2, rng)
        p["bridge"] = [bridge[0], bridge[1], float(_rounded(middle - half)), float(_rounded(middle + half))]
    else:
        return None
    if kind in ("star", "gear"):  # spelled out as the published record spells them
        p = json.loads(json.dumps(resolve_geometry({"type": kind, "geometry_params": p}).params))
    return p


def _factor(rng) -> float:
    return float(_rounded(rng.uniform(1 - COEFFICIENT_RANGE, 1 + COEFFICIENT_RANGE)))


def _coefficient(family: str, name: str, value, rng):
    """A regime's coefficient within COEFFICIENT_RANGE of the published one (a wind: its
    speed, direction kept); kept where KEPT_COEFFICIENTS says, and expressions."""
    if (family, name) in KEPT_COEFFICIENTS or isinstance(value, (str, bool)):
        return value
    factor = _factor(rng)
    if isinstance(value, list):
        return [float(_rounded(factor * v)) for v in value]
    return float(_rounded(factor * value))


def _kappa(kappa: str, rng) -> str:
    """The diffusivity times a factor within COEFFICIENT_RANGE: its shape and contrast kept."""
    factor = _factor(rng)
    try:
        return expression_to_string(_rounded(factor * float(kappa)))
    except ValueError:
        return expression_to_string(_rounded(factor) * parse_expression(kappa))


def drawn(published: CaseRecord, design: Design, seed: int, draw: int = 0) -> CaseRecord | None:
    """The variant's data as drawn for ``seed`` (its ``draw``-th draw again: another key),
    before its solve-only part and unchecked (``variant`` adds both); None where records are
    not varied."""
    if design.u is None or design.smoke:
        return None
    # sympy's simplify takes minutes on some data with the map's floats in them: the
    # variant's data stay as derived (the same values; the checks parse them back)
    with mms.simplify_limit(0):
        built = build_record(transform(design, seed, draw), key=f"{design.id}:variant:{seed}{redraw_suffix(draw)}")
    meta = published.evaluation_metadata
    record = published.model_copy(
        update={
            "case_spec": type(built.case_spec).model_validate(_plain_numbers(built.case_spec.model_dump())),
            "evaluation_metadata": meta.model_copy(
                update={
                    "manufactured_solution": built.evaluation_metadata.manufactured_solution,
                    "data_revision": built.evaluation_metadata.data_revision,
                    "thresholds": {},  # baselines of the published data say nothing of these
                    "variant": Variant(seed=seed, of=record_digest(published), draw=draw),
                    "solve_only": None,  # the published part drives the published data only
                }
            ),
        }
    )
    return CaseRecord.model_validate(record.model_dump())  # the copy is checked as a loaded record is
