"""Data that is not the answer (no solver may pass by reading the answer off the data): how
a manufactured record's agent-visible data is made to differ from its exact solution.

- Boundary data h (Dirichlet u, Neumann c du/dn, Robin c du/dn + alpha u, the
  biharmonic lap(u)) becomes h + s * phi * w: phi (boundaries.py) vanishes exactly on
  the boundary parts the condition applies to, w is a smooth field whose coefficients
  are drawn from the case id, and s is the smallest power-of-two multiple of a
  norm-matching scale that puts the data ``MARGIN`` away from the solution on the grid
  (leaks.py measures; as is, and after any scalar multiple); if no draw gets there (the
  magnitude of vector data), the farthest one at least ``SOLUTION_MARGIN`` away. Solvers
  only use h where it applies, so their answer does not change.
- A solution whose forcing or coefficients come within ``SOLUTION_MARGIN`` of it (an
  eigenfunction of the operator: sin(pi x) sin(pi y) for Poisson, exp(x - y) cos(t) for
  heat), or that changes by less than ``TIME_CHANGE`` between t0 and t_end, gets a
  smooth bump B added: A * B(x) for steady cases, A * B(x) * (1 + 2 (t - t0)/(t_end - t0))
  for transient ones (linear in t: no time-stepping error of its own). Flows get the
  curl of the bump (still divergence free), periodic directions a periodic bump.
Everything is deterministic: the seeds come from the case id.
"""

from __future__ import annotations

import hashlib
import math
from typing import cast

import numpy as np
import sympy as sp

from .. import leaks, pdes
from ..boundaries import vanishing_function
from ..expressions import expression_to_string, parse_expression, t, x, y, z

COORDS = (x, y, z)
MARGIN = 0.4  # leaks.LEAK_DISTANCE is 0.3: the builder keeps a margin
# forcing and coefficients: two positive fields (magnitudes of vector data) are rarely
# much further apart than 0.4 after the best scaling, so the margin is thinner there
SOLUTION_MARGIN = 0.35
TIME_CHANGE = 0.6  # leaks.INITIAL_CHANGE_FLOOR is 0.5
MAX_DOUBLINGS = 6
AMPLITUDES = (1.0, 0.5, 2.0, 0.25, 4.0, 0.125, 8.0)  # of the added component, relative to the solution's norm
SEEDS = 6  # w fields tried per boundary condition
CANDIDATE_SEEDS = 3  # draws of the components added to a solution


def case_rng(case_id: str, purpose: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{case_id}:{purpose}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _coefficient(value: float) -> sp.Float:
    return sp.Float(f"{value:.3g}")


def _extent(geometry, axis: int) -> tuple[float, float]:
    return geometry.bbox[2 * axis], geometry.bbox[2 * axis + 1]


def smooth_field(rng: np.random.Generator, geometry, periodic=()) -> sp.Expr:
    """a0 + a linear (or, across a periodic direction, one-period cosine) term per axis +
    one oblique wave: smooth, O(1) on the domain, not a function of u."""
    field = _coefficient(rng.uniform(-0.5, 0.5))
    phase = _coefficient(rng.uniform(0, 2 * math.pi))
    argument = phase
    for axis in range(geometry.dim):
        lo, hi = _extent(geometry, axis)
        length, centre = hi - lo, _coefficient(rng.uniform(lo, hi))
        coordinate = COORDS[axis]
        if "xyz"[axis] in periodic:
            field += _coefficient(rng.uniform(-1, 1)) * sp.cos(2 * sp.pi * (coordinate - centre) / _coefficient(length))
        else:
            field += _coefficient(rng.uniform(-1.5, 1.5)) * (coordinate - centre) / _coefficient(length)
        argument += 2 * sp.pi * int(rng.integers(1, 3)) * coordinate / _coefficient(length)
    return field + _coefficient(rng.uniform(0.3, 1.0)) * sp.sin(argument)


def bump(rng: np.random.Generator, geometry, inside: np.ndarray, periodic=()) -> sp.Expr:
    """A Gaussian bump centred at a seeded interior grid point, a fifth of the domain
    wide (periodic across the periodic directions)."""
    centre = inside[rng.integers(len(inside))]
    exponent = 0
    for axis in range(geometry.dim):
        lo, hi = _extent(geometry, axis)
        length, width = hi - lo, 0.2 * geometry.size
        coordinate, c = COORDS[axis], _coefficient(centre[axis])
        if "xyz"[axis] in periodic:
            k = 2 * sp.pi / _coefficient(length)
            exponent += (sp.cos(k * (coordinate - c)) - 1) / _coefficient((2 * math.pi * width / length) ** 2)
        else:
            exponent -= (coordinate - c) ** 2 / _coefficient(2 * width**2)
    return sp.exp(exponent)


def _values(expr, points: np.ndarray, when: float) -> np.ndarray:
    exprs = expr if isinstance(expr, (list, tuple)) else [expr]
    function = sp.lambdify((x, y, z, t), list(exprs), modules="numpy")
    coords = [points[:, i] if i < points.shape[1] else np.zeros(len(points)) for i in range(3)]
    columns = [np.broadcast_to(np.asarray(v, float), (len(points),)) for v in function(*coords, when)]
    return np.stack(columns, axis=1) if isinstance(expr, (list, tuple)) else columns[0]


def _closest(field, targets: list[np.ndarray], names: list[str], sample: leaks.GridSample) -> float:
    """The smallest distance of a (scalar or vector) field's output columns from the
    solution's: what leaks.py would measure."""
    columns = leaks.output_columns(_values(field, sample.points, sample.t_end), names)
    return min(
        (leaks.distance(c, u, sample.edge).smallest for c, u in zip(columns, targets) if c is not None),
        default=math.inf,
    )


def hidden(value, geometry, tags, case_id: str, purpose: str, targets, names, sample, periodic=()):
    """``value`` (a sympy expression or a list of them) plus s * phi * w, at least
    MARGIN (or, if no draw gets there, SOLUTION_MARGIN) from the solution's output
    columns ``targets``; rendered as record text."""
    phi = vanishing_function(geometry, tags)
    if phi == 1:  # no boundary piece under the tags: s * w would change the data where it applies
        raise ValueError(f"{case_id}: the {geometry.kind} template has no boundary piece tagged {tags}")
    vector = isinstance(value, (list, tuple))
    base = list(value) if vector else [value]
    size = max(float(np.linalg.norm(np.stack(targets))), 1e-12)
    farthest: tuple[float, list | None] = (0.0, None)  # the distance and the data of the farthest draw
    for seed in range(SEEDS):  # a w that is nearly u / phi is drawn again
        rng = case_rng(case_id, f"{purpose}-{seed}")
        extra = [phi * smooth_field(rng, geometry, periodic) for _ in base]
        norm = float(np.linalg.norm(_values(extra, sample.points, sample.t_end)))
        if norm == 0:
            continue
        scale = size / norm  # no floor: phi of a gear's 48 edge lines is about 1e-16 on the whole grid
        for _ in range(MAX_DOUBLINGS):
            data = [b + _coefficient(scale) * e for b, e in zip(base, extra)]
            distance = _closest(data if vector else data[0], targets, names, sample)
            if distance >= MARGIN:
                return _rendered(data, vector)
            farthest = max(farthest, (distance, data), key=lambda pair: pair[0])
            scale *= 2
    # magnitudes of vector data are two positive fields: rarely much further apart than
    # 0.4 after the best scaling, so the farthest draw will do with the thinner margin
    if farthest[0] >= SOLUTION_MARGIN:
        return _rendered(cast(list, farthest[1]), vector)  # a draw (the distance of none is 0)
    raise ValueError(
        f"{case_id}: no multiple of phi * w hides {purpose} (farthest {farthest[0]:.2f} from the "
        f"solution, at least {SOLUTION_MARGIN} needed)"
    )


def _rendered(data: list, vector: bool):
    texts = [expression_to_string(d) for d in data]
    return texts if vector else texts[0]


def _shapes(rng: np.random.Generator, family: str, params: dict, geometry, inside: np.ndarray, periodic=()):
    """Candidate spatial shapes of the added component: a Gaussian bump; a harmonic
    polynomial centred on the domain (adds nothing to a Laplacian's forcing); for
    Helmholtz a plane wave of wavenumber k (adds nothing to its forcing at all)."""
    yield bump(rng, geometry, inside, periodic)
    if not periodic:
        centre = [_coefficient(float(np.mean(inside[:, axis]))) for axis in range(geometry.dim)]
        X, Y = x - centre[0], y - centre[1]
        a, b, c = (_coefficient(v) for v in rng.uniform(-1, 1, 3))
        yield a * (X**2 - Y**2) + b * X * Y + c * (X**3 - 3 * X * Y**2) + 1
    if family == "helmholtz" and len(periodic) < 2:
        # across a periodic direction the wave runs along it: constant in that direction
        k = float(params["k"])
        direction = rng.normal(size=geometry.dim)
        for axis in periodic:
            direction["xyz".index(axis)] = 0.0
        direction /= np.linalg.norm(direction)
        yield sp.cos(
            sum(_coefficient(k * d) * c for d, c in zip(direction, COORDS)) + _coefficient(rng.uniform(0, 2 * math.pi))
        )


def _vectorised(shape, family: str, dim: int, rng: np.random.Generator):
    if family in ("stokes", "navier_stokes"):  # the curl of the shape: still divergence free
        return [sp.diff(shape, y), -sp.diff(shape, x)] + [sp.Integer(0)] * (dim - 2)
    if family == "linear_elasticity":  # the shape mirrored across x = y for the second component: not parallel
        mirrored = [shape, shape.subs({x: y, y: x}, simultaneous=True)] + [shape] * (dim - 2)
        return [m * _coefficient(rng.uniform(0.5, 1.5) * rng.choice([-1, 1])) for m in mirrored]
    return shape


def candidates(
    case_id: str, family: str, params: dict, geometry, sample: leaks.GridSample, dim: int, transient: bool, periodic=()
):
    """Components to add to a solution, in the order they are tried (all seeded)."""
    inside = sample.points[~sample.edge] if (~sample.edge).any() else sample.points
    tau = (t - sample.t0) / _coefficient(sample.t_end - sample.t0)
    growths = (tau, 1 + 2 * tau, 1 - tau / 2, sp.Integer(1)) if transient else (sp.Integer(1),)
    for attempt in range(CANDIDATE_SEEDS):
        rng = case_rng(case_id, f"component-{attempt}")
        for shape in _shapes(rng, family, params, geometry, inside, periodic):
            for growth in growths:
                extra = _vectorised(shape, family, dim, rng)
                yield [c * growth for c in extra] if isinstance(extra, list) else extra * growth


def solution_problems(
    family: str, params: dict, solution: dict, dim: int, transient: bool, sample: leaks.GridSample, names: list[str]
) -> list[str]:
    """Why a manufactured solution needs a bump: its forcing or a coefficient within
    SOLUTION_MARGIN of it, or too little change in time."""
    u = solution["u"]
    targets = leaks.output_columns(_values(u, sample.points, sample.t_end), names)
    lhs = pdes.operator(family, params, {k: v for k, v in solution.items()}, dim, transient)
    forcing = lhs[:dim] if isinstance(u, list) else lhs[0]
    problems = []
    if _closest(forcing, targets, names, sample) < SOLUTION_MARGIN:
        problems.append("forcing")
    for name, value in params.items():
        if isinstance(value, str) and not leaks._constant(value) and not leaks._mentions_unknown(value):
            if _closest(parse_expression(value), targets, names, sample) < SOLUTION_MARGIN:
                problems.append(f"coefficient {name}")
    if transient:
        start = leaks.output_columns(_values(u, sample.points, sample.t0), names)
        if leaks.relative_gap(start, targets) < TIME_CHANGE:
            problems.append("too little change in time")
    return problems


def with_bump(
    case_id: str,
    family: str,
    params: dict,
    solution: dict,
    geometry,
    sample,
    names,
    dim: int,
    transient: bool,
    periodic=(),
) -> dict:
    """The solution (sympy fields u, p), with the first candidate component (at one of
    a few amplitudes) that leaves ``solution_problems`` nothing to find, if it has any."""
    problems = solution_problems(family, params, solution, dim, transient, sample, names)
    if not problems:
        return solution
    u = solution["u"]
    size = max(float(np.linalg.norm(_values(u, sample.points, sample.t_end))), 1e-3)
    for extra in candidates(case_id, family, params, geometry, sample, dim, transient, periodic):
        norm = max(float(np.linalg.norm(_values(extra, sample.points, sample.t_end))), 1e-12)
        for factor in AMPLITUDES:
            amplitude = _coefficient(factor * size / norm)
            bumped = [a + amplitude * b for a, b in zip(u, extra)] if isinstance(u, list) else u + amplitude * extra
            candidate = dict(solution, u=bumped)
            if not solution_problems(family, params, candidate, dim, transient, sample, names):
                return candidate
    raise ValueError(f"{case_id}: no added component cures {problems}")


class Hiding:
    """A manufactured case's solution, with a component added where it leaks
    (``with_bump``), and the hiding of its boundary data (``hidden``): what generated
    (starter.build_record) and imported (upstream.py) records share."""

    def __init__(
        self,
        case_id: str,
        family: str,
        params: dict,
        solution: dict,
        geometry,
        case_spec: dict,
        names: list[str],
        periodic=(),
    ):
        """``solution``: record texts {"u": str or list, "p": ...}; ``case_spec`` needs its
        pde (time), domain and eval_grid."""
        self.case_id, self.geometry, self.names, self.periodic = case_id, geometry, names, tuple(periodic)
        self.sample = leaks.GridSample.of(case_spec)
        read = lambda v: pdes.exact(parse_expression(v))  # noqa: E731
        fields = {
            name: [read(c) for c in value] if isinstance(value, (list, tuple)) else read(value)
            for name, value in solution.items()
        }
        transient = case_spec["pde"].get("time") is not None
        bumped = with_bump(
            case_id, family, params, fields, geometry, self.sample, names, geometry.dim, transient, self.periodic
        )
        self.bumped = bumped is not fields
        u = bumped["u"]
        self.solution = dict(solution)  # an untouched solution keeps its text (0.3 stays 0.3, not 3/10)
        if self.bumped:
            self.solution["u"] = (
                [expression_to_string(c) for c in u] if isinstance(u, list) else expression_to_string(u)
            )
        self.targets = leaks.output_columns(_values(u, self.sample.points, self.sample.t_end), names)

    def hide(self, bc: dict) -> int:
        """Every boundary condition's data (in place) + s * phi * w, phi zero where it
        applies; returns how many conditions were hidden."""
        count = 0
        for kind in ("dirichlet", "neumann", "robin", "laplacian"):
            conditions = bc.get(kind)
            for index, condition in enumerate(conditions if isinstance(conditions, list) else [conditions]):
                if condition is None:
                    continue
                value = condition["value"]
                parsed = [parse_expression(v) for v in value] if isinstance(value, list) else parse_expression(value)
                condition["value"] = hidden(
                    parsed,
                    self.geometry,
                    condition["on"],
                    self.case_id,
                    f"{kind}{index}",
                    self.targets,
                    self.names,
                    self.sample,
                    self.periodic,
                )
                count += 1
        return count
