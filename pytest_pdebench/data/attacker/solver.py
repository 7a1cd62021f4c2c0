"""Dishonest (issue 46): an ansatz fit, with no mesh and no discretised solve.

Every expression the case shows (forcing, boundary and initial data) is split into its
terms with their numeric factors dropped; those shapes, with low-order polynomials (and
their products with t in transient cases), make a basis. The coefficients are fitted by
least squares to the family's strong-form residual at random points inside the domain,
to the Dirichlet data (and Neumann, Robin, lap(u), periodic data) at points sampled on the
boundary pieces, and to the initial data at t0; the nonlinear families (burgers,
navier_stokes, reaction_diffusion) then take Gauss-Newton steps from the fit of their
linear part. The fitted field is written on the grid at t_end. A benchmark whose data hide
the answer makes it fail (validity ladder; docs/results/2026-11-27-ansatz-fit.md).

Self-contained: the plugin hands a solver nothing but case_spec.json.
"""

import json
import math
import signal
import time

import numpy as np
import sympy as sp

X, Y, Z, T = sp.symbols("x y z t")
U = sp.Symbol("u")
COORDS = (X, Y, Z)
VARIABLES = {X, Y, Z, T}
NAMES = {"x": X, "y": Y, "z": Z, "t": T, "u": U, "pi": sp.pi, "e": sp.E}
SIDES = {"x_min": (0, -1), "x_max": (0, 1), "y_min": (1, -1), "y_max": (1, 1), "z_min": (2, -1), "z_max": (2, 1)}
FLUX = {
    "poisson": "kappa",
    "heat": "kappa",
    "convection_diffusion": "epsilon",
    "reaction_diffusion": "epsilon",
    "burgers": "nu",
}
VECTOR = ("linear_elasticity", "stokes", "navier_stokes")

# CPU seconds from the start (the wall clock of a shared machine would cut the basis short):
# candidates are sorted and derived until SHAPES_SEC, the pressure's until PRESSURE_SEC
SHAPES_SEC, PRESSURE_SEC = 5.0, 6.5
INTEGRAL_SEC = 0.5  # one antiderivative; sympy may take minutes on a Gaussian
DERIVE_SEC, MAX_OPS = 1.5, 250  # one shape's derivatives (a gear's 32-factor term takes a minute)
MAX_SPLIT = 12  # a term whose expansion has more terms than this is kept whole
POLY_DEGREE = 3
SEED = 46


def parse(value) -> sp.Expr:
    return sp.parse_expr(str(value), local_dict=dict(NAMES))


def values_of(value) -> list:
    return value if isinstance(value, list) else [value]


def conditions(bc: dict, kind: str) -> list[dict]:
    found = bc.get(kind) or []
    return found if isinstance(found, list) else [found]


# ---- the domain: its indicator and its boundary pieces (the templates of the suite) ----


def _in_box(p, box, tol):
    inside = np.ones(len(p), bool)
    for axis in range(len(box) // 2):
        inside &= (p[:, axis] >= box[2 * axis] - tol) & (p[:, axis] <= box[2 * axis + 1] + tol)
    return inside


def _in_disk(p, center, radius, tol):
    return np.hypot(p[:, 0] - center[0], p[:, 1] - center[1]) <= radius + tol


def _polygon_parts(p, vertices):
    """(inside by ray crossing, distance to the nearest edge) of each point."""
    v = np.asarray(vertices, float)
    a, b = v, np.roll(v, -1, axis=0)
    px, py = p[:, :1], p[:, 1:2]
    crosses = (a[None, :, 1] > py) != (b[None, :, 1] > py)
    with np.errstate(divide="ignore", invalid="ignore"):
        at = a[None, :, 0] + (py - a[None, :, 1]) * (b[None, :, 0] - a[None, :, 0]) / (b[None, :, 1] - a[None, :, 1])
    inside = (crosses & (px < at)).sum(axis=1) % 2 == 1
    ab, ap = b - a, p[:, None, :2] - a[None]
    s = np.clip((ap * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-300), 0, 1)
    return inside, np.linalg.norm(ap - s[..., None] * ab[None], axis=-1).min(axis=1)


def _in_polygon(p, vertices, tol):
    inside, gap = _polygon_parts(p, vertices)
    return inside | (gap <= tol)


def _circle(spec, center, radius):
    spec = spec or {}
    return tuple(map(float, spec.get("center", center))), float(spec.get("radius", radius))


def _segments(tag, vertices):
    vertices = [tuple(map(float, v)) for v in vertices]
    return [("segment", tag, a, b) for a, b in zip(vertices, vertices[1:] + vertices[:1])]


def _box_sides(box):
    x0, x1, y0, y1 = map(float, box)
    return [
        ("segment", "y_min", (x0, y0), (x1, y0)),
        ("segment", "x_max", (x1, y0), (x1, y1)),
        ("segment", "y_max", (x1, y1), (x0, y1)),
        ("segment", "x_min", (x0, y1), (x0, y0)),
    ]


def _polygon_vertices(kind, params):
    if "vertices" in params:
        return np.asarray(params["vertices"], float)
    center = params.get("center", (0, 0))
    if kind == "l_shape":
        return np.array([[0, 0], [1, 0], [1, 0.5], [0.5, 0.5], [0.5, 1], [0, 1]], float)
    if kind == "star":
        count, inner, outer = (
            int(params.get("points", 5)),
            params.get("inner_radius", 0.3),
            params.get("outer_radius", 0.7),
        )
        angles = math.pi / 2 + np.arange(2 * count) * math.pi / count
        radii = np.where(np.arange(2 * count) % 2 == 0, outer, inner)
        return np.column_stack([center[0] + radii * np.cos(angles), center[1] + radii * np.sin(angles)])
    teeth, base = int(params.get("teeth", 8)), params.get("base_radius", 0.5)
    tip, pitch = base + params.get("tooth_height", 0.2), 2 * math.pi / teeth
    corners = [
        (r, k * pitch + h * pitch / 2) for k in range(teeth) for r, h in ((base, 0), (tip, 0), (tip, 1), (base, 1))
    ]
    return np.array([(center[0] + r * math.cos(a), center[1] + r * math.sin(a)) for r, a in corners])


def domain_shape(domain: dict):
    """(indicator(points, tol), boundary pieces, size) of a case's domain template."""
    kind, params = domain["type"], domain.get("geometry_params") or {}
    if kind == "unit_cube":
        pieces = [
            ("plane", name, index // 2, float(index % 2))
            for index, name in enumerate(("x_min", "x_max", "y_min", "y_max", "z_min", "z_max"))
        ]
        return (lambda p, tol: _in_box(p, (0, 1, 0, 1, 0, 1), tol)), pieces, 1.0
    if kind in ("unit_square", "periodic_square"):
        box = params.get("bounds", (0, 1, 0, 1))
        return (lambda p, tol: _in_box(p, box, tol)), _box_sides(box), max(box[1] - box[0], box[3] - box[2])
    if kind in ("l_shape", "star", "gear"):
        vertices = _polygon_vertices(kind, params)
        size = float(np.ptp(vertices, axis=0).max())
        return (lambda p, tol: _in_polygon(p, vertices, tol)), _segments("boundary", vertices), size
    if kind in ("square_with_hole", "multi_hole"):
        outer = params.get("outer", (0, 1, 0, 1))
        if kind == "square_with_hole" and "vertices" in (params.get("hole") or {}):
            hole = params["hole"]["vertices"]

            def contains(p, tol):
                in_hole, gap = _polygon_parts(p, hole)
                return _in_box(p, outer, tol) & ~(in_hole & (gap > tol))

            return contains, _box_sides(outer) + _segments("hole", hole), outer[1] - outer[0]
        if kind == "square_with_hole":
            holes, tag = [_circle(params.get("hole"), (0.5, 0.5), 0.2)], "hole"
        else:
            default = [
                {"center": [0.3, 0.3], "radius": 0.1},
                {"center": [0.7, 0.3], "radius": 0.08},
                {"center": [0.5, 0.7], "radius": 0.12},
            ]
            holes, tag = [_circle(h, None, None) for h in params.get("holes", default)], "holes"

        def contains(p, tol):
            inside = _in_box(p, outer, tol)
            for center, radius in holes:
                inside &= ~_in_disk(p, center, radius - tol, 0)
            return inside

        arcs = [("arc", tag, center, radius, 0.0, 2 * math.pi) for center, radius in holes]
        return contains, _box_sides(outer) + arcs, outer[1] - outer[0]
    if kind == "circle":
        center, radius = _circle(params, (0.5, 0.5), 0.5)
        return (
            (lambda p, tol: _in_disk(p, center, radius, tol)),
            [("arc", "boundary", center, radius, 0.0, 2 * math.pi)],
            2 * radius,
        )
    if kind in ("annulus", "eccentric_annulus"):
        if kind == "annulus":
            center = params.get("center", (0.5, 0.5))
            (oc, outer_r), (ic, inner_r) = (
                (center, params.get("outer_radius", 0.5)),
                (center, params.get("inner_radius", 0.25)),
            )
        else:
            (oc, outer_r), (ic, inner_r) = (
                _circle(params.get("outer"), (0.5, 0.5), 0.5),
                _circle(params.get("inner"), (0.65, 0.5), 0.2),
            )

        def contains(p, tol):
            return _in_disk(p, oc, outer_r, tol) & ~_in_disk(p, ic, inner_r - tol, 0)

        pieces = [("arc", "outer", oc, outer_r, 0.0, 2 * math.pi), ("arc", "inner", ic, inner_r, 0.0, 2 * math.pi)]
        return contains, pieces, 2 * outer_r
    if kind == "sector":
        center, radius = params.get("center", (0, 0)), float(params.get("radius", 1.0))
        theta = math.radians(float(params.get("angle_deg", 90.0)))

        def contains(p, tol):
            dx, dy = p[:, 0] - center[0], p[:, 1] - center[1]
            r, phi = np.hypot(dx, dy), np.mod(np.arctan2(dy, dx), 2 * math.pi)
            slack = np.where(r > 0, tol / np.maximum(r, 1e-300), 2 * math.pi)
            return (r <= radius + tol) & ((phi <= theta + slack) | (phi >= 2 * math.pi - slack))

        end = (center[0] + radius * math.cos(theta), center[1] + radius * math.sin(theta))
        pieces = [
            ("arc", "arc", center, radius, 0.0, theta),
            ("segment", "edge_start", tuple(center), (center[0] + radius, center[1])),
            ("segment", "edge_end", end, tuple(center)),
        ]
        return contains, pieces, radius
    if kind == "t_junction":
        bar, stem = params.get("bar", (0, 1, 0.8, 1)), params.get("stem", (0.4, 0.6, 0, 0.8))
        return (lambda p, tol: _in_box(p, bar, tol) | _in_box(p, stem, tol)), _box_sides(bar) + _box_sides(stem), 1.0
    if kind == "dumbbell":
        left, right = _circle(params.get("left"), (0.25, 0.5), 0.25), _circle(params.get("right"), (0.75, 0.5), 0.25)
        bridge = params.get("bridge", (0.25, 0.75, 0.4, 0.6))

        def contains(p, tol):
            return _in_disk(p, *left, tol) | _in_disk(p, *right, tol) | _in_box(p, bridge, tol)

        arcs = [("arc", "boundary", c, r, 0.0, 2 * math.pi) for c, r in (left, right)]
        return contains, arcs + _box_sides(bridge), 1.0
    raise ValueError(f"no shape for domain {kind!r}")


def sample_piece(piece, count, rng, dim):
    """(points, unit normals) uniformly along one boundary piece."""
    s = rng.uniform(0, 1, count)
    if piece[0] == "segment":
        a, b = np.asarray(piece[2], float), np.asarray(piece[3], float)
        d = b - a
        return a + s[:, None] * d, np.tile(np.array([d[1], -d[0]]) / np.hypot(*d), (count, 1))
    if piece[0] == "arc":
        _, _, center, radius, start, stop = piece
        angle = start + s * (stop - start)
        normal = np.column_stack([np.cos(angle), np.sin(angle)])
        return np.asarray(center, float) + radius * normal, normal
    _, _, axis, value = piece
    points = rng.uniform(0, 1, (count, dim))
    points[:, axis] = value
    normal = np.zeros((count, dim))
    normal[:, axis] = 1.0
    return points, normal


def boundary_points(shape, tags, count, rng, dim):
    """Points on the true boundary under the tags (a union's inner pieces are dropped),
    spread over the pieces by length."""
    contains, pieces, size = shape
    tags = [tags] if isinstance(tags, str) else list(tags)
    chosen = [p for p in pieces if "boundary" in tags or p[1] in tags]
    out = []
    for piece in chosen:
        points, normal = sample_piece(piece, max(8, count // max(1, len(chosen)) * 2), rng, dim)
        step = 1e-6 * size
        flips = contains(points + step * normal, 0.0) != contains(points - step * normal, 0.0)
        out.append(points[flips])
    points = np.concatenate(out) if out else np.zeros((0, dim))
    return points[rng.permutation(len(points))[:count]]


def interior_points(shape, bbox, count, rng, dim):
    contains, _, _ = shape
    low, high = np.array(bbox[0::2], float), np.array(bbox[1::2], float)
    found = []
    while sum(len(f) for f in found) < count:
        candidates = rng.uniform(low, high, (4 * count, dim))
        found.append(candidates[contains(candidates, 0.0)])
    return np.concatenate(found)[:count]


# ---- the ansatz: shapes of the visible expressions, and polynomials ----


def shapes_of(expr: sp.Expr) -> list[sp.Expr]:
    """Each term's dependence on x, y, z, t with its constant factor dropped: of the
    expression as given and of each term multiplied out (when that stays short)."""
    found = []
    for term in sp.Add.make_args(expr):
        pieces = [term]
        if 1 < expanded_size(term) <= MAX_SPLIT:
            pieces += list(sp.Add.make_args(sp.expand(term, deep=False, power_exp=False, power_base=False, log=False)))
        for piece in pieces:
            _, shape = piece.as_independent(*VARIABLES, as_Add=False)
            if shape.free_symbols & VARIABLES:
                found.append(shape)
    return found


def expanded_size(term: sp.Expr) -> int:
    """How many terms multiplying out the sums of a product gives, counted before doing it
    (a gear's 32 linear factors would take sympy seconds)."""
    size = 1
    for factor in sp.Mul.make_args(term):
        base, exponent = factor.as_base_exp()
        if base.is_Add and exponent.is_Integer and exponent > 0:
            size *= math.comb(len(base.args) + int(exponent) - 1, int(exponent))
    return size


def polynomials(dim: int, transient: bool) -> list[sp.Expr]:
    monomials = []
    for degree in range(POLY_DEGREE + 1):
        for powers in _powers(dim, degree):
            space = sp.Mul(*(c**k for c, k in zip(COORDS, powers)))
            monomials += [space * T**k for k in range(3 if transient else 1) if degree + k <= POLY_DEGREE]
    return monomials


def _powers(dim, degree):
    if dim == 1:
        return [(degree,)]
    return [(k, *rest) for k in range(degree, -1, -1) for rest in _powers(dim - 1, degree - k)]


def pressure_shapes(forcing: list[sp.Expr], deadline: float) -> list[sp.Expr]:
    """Antiderivatives of the forcing's terms along their component's direction: grad p
    is in the momentum forcing, p itself is shown nowhere."""
    found = []
    for axis, component in enumerate(forcing):
        for shape in shapes_of(component):
            if time.process_time() > deadline or not elementary_in(shape, COORDS[axis]):
                continue
            primitive = within(INTEGRAL_SEC, lambda s=shape, v=COORDS[axis]: sp.integrate(s, v))
            if primitive is not None and not primitive.has(sp.Integral):
                found += shapes_of(sp.expand(primitive, deep=False))
    return found


def elementary_in(shape: sp.Expr, variable: sp.Symbol) -> bool:
    """Every function of the variable in the shape has an argument linear in it (sin, cos,
    exp of a x + b: antiderivatives in closed form, found fast)."""
    for function in shape.atoms(sp.Function):
        for argument in function.args:
            if variable in argument.free_symbols:
                if not argument.is_polynomial(variable) or sp.degree(argument, variable) > 1:
                    return False
    return shape.count_ops() <= 40


class Overtime(BaseException):
    """Not an Exception: sympy's own ``except Exception`` must not swallow it."""


def within(seconds: float, work):
    """work() or None when it takes longer (an alarm, repeated until cleared; only in the
    main thread, elsewhere the filters alone bound the time)."""

    def stop(*_):
        raise Overtime

    try:
        previous = signal.signal(signal.SIGALRM, stop)
    except ValueError:
        return work()
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        return work()
    except Overtime:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---- the basis: derivatives, evaluated at points ----


def derivative(expr: sp.Expr, name: str) -> sp.Expr:
    """name: v, x, y, z, t, tt, xx, xy, ..., lap2, lap3, bilap2, bilap3."""
    if name == "v":
        return expr
    if name.startswith("bilap"):
        inner = derivative(expr, "lap" + name[-1])
        return derivative(inner, "lap" + name[-1])
    if name.startswith("lap"):
        return sum(sp.diff(expr, c, 2) for c in COORDS[: int(name[-1])])
    return sp.diff(expr, *(NAMES[c] for c in name))


class Basis:
    """Basis functions with their needed derivatives, lambdified once."""

    def __init__(self, functions, names):
        self.functions, self.names = [], list(names)
        self._compiled = []
        for function in functions:
            self.add(function)

    def add(self, function) -> bool:
        """False (and not added) when its derivatives take too long."""
        if sp.count_ops(function) > MAX_OPS:
            return False
        expressions = within(DERIVE_SEC, lambda: [derivative(function, name) for name in self.names])
        if expressions is None:
            return False
        self.functions.append(function)
        self._compiled.append(sp.lambdify((X, Y, Z, T), expressions, modules="numpy", cse=True))
        return True

    def __len__(self):
        return len(self.functions)

    def values(self, points: np.ndarray) -> np.ndarray:
        """The functions alone at (N, 4) points: (N, m) (the grid needs no derivatives)."""
        out = np.zeros((len(points), len(self)))
        with np.errstate(all="ignore"):
            for column, function in enumerate(self.functions):
                value = sp.lambdify((X, Y, Z, T), function, modules="numpy")(*points.T)
                out[:, column] = np.broadcast_to(np.asarray(value, float), (len(points),))
        return out

    def evaluate(self, points: np.ndarray) -> dict[str, np.ndarray]:
        """points (N, 4): x, y, z, t -> {name: (N, m)}."""
        n = len(points)
        out = {name: np.zeros((n, len(self))) for name in self.names}
        with np.errstate(all="ignore"):
            for column, compiled in enumerate(self._compiled):
                for name, value in zip(self.names, compiled(*points.T)):
                    out[name][:, column] = np.broadcast_to(np.asarray(value, float), (n,))
        return out


def distinct(candidates, probe, deadline, always=()) -> list[sp.Expr]:
    """Candidates in order of length, dropping those that are not finite, vanish, or are a
    multiple of one kept before (the same function written with floats and rationals);
    past the deadline (CPU seconds) only those in ``always``."""
    kept, directions = [], []
    always = set(always)
    for shape in sorted(set(candidates), key=sp.count_ops):
        if shape not in always and time.process_time() > deadline:
            continue
        with np.errstate(all="ignore"):
            value = np.broadcast_to(
                np.asarray(sp.lambdify((X, Y, Z, T), shape, "numpy")(*probe.T), float), (len(probe),)
            )
        norm = np.linalg.norm(value)
        if not np.isfinite(norm) or norm < 1e-12 * math.sqrt(len(probe)):
            continue
        unit = value / norm
        if any(abs(unit @ d) > 1 - 1e-10 for d in directions):
            continue
        kept.append(shape)
        directions.append(unit)
    return kept


# ---- the fit ----


class Problem:
    """What the case asks, read from the agent view."""

    def __init__(self, spec: dict):
        self.spec, self.family = spec, spec["pde"]["type"]
        self.dim = 3 if "nz" in spec["eval_grid"] else 2
        time_spec = spec["pde"].get("time")
        self.transient = time_spec is not None
        self.t0 = float(time_spec.get("t0", 0.0)) if time_spec else 0.0
        self.t_end = float(time_spec["t_end"]) if time_spec else 0.0
        self.params = {
            k: ([parse(v) for v in value] if isinstance(value, list) else parse(value))
            for k, value in spec["pde"].get("params", {}).items()
        }
        forcing = (spec["pde"].get("forcing") or {}).get("value", "0")
        self.components = self.dim if self.family in VECTOR else 1
        self.forcing = [parse(v) for v in values_of(forcing)]
        self.forcing += [sp.Integer(0)] * (self.components - len(self.forcing))
        self.bc, self.ic = spec.get("bc", {}), spec.get("ic") or {}
        self.shape = domain_shape(spec["domain"])
        self.rng = np.random.default_rng(SEED)

    def visible(self) -> list[sp.Expr]:
        """Every expression the case shows that is a function of x, y, z, t."""
        found = list(self.forcing)
        for kind in ("dirichlet", "neumann", "robin", "laplacian"):
            for condition in conditions(self.bc, kind):
                found += [parse(v) for v in values_of(condition["value"])]
        for key in ("value", "velocity"):
            if key in self.ic:
                found += [parse(v) for v in values_of(self.ic[key])]
        return found

    def points(self, spatial: np.ndarray, times=None) -> np.ndarray:
        """(N, 4) x, y, z, t: random times in [t0, t_end] unless given."""
        n = len(spatial)
        if times is None:
            times = self.rng.uniform(self.t0, self.t_end, n) if self.transient else np.zeros(n)
        out = np.zeros((n, 4))
        out[:, : self.dim] = spatial
        out[:, 3] = times
        return out

    def value(self, expr: sp.Expr, points: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            result = sp.lambdify((X, Y, Z, T), expr, "numpy")(*points.T)
        return np.broadcast_to(np.asarray(result, float), (len(points),)).copy()

    def coefficient(self, name: str, default=1):
        return self.params.get(name, sp.Integer(default))


def interior_names(family: str, dim: int, transient: bool) -> set[str]:
    grads = {"xyz"[i] for i in range(dim)}
    lap = f"lap{dim}"
    names = {"v", lap}
    if family in ("poisson", "heat", "convection_diffusion", "burgers", "stokes", "navier_stokes"):
        names |= grads
    if family == "biharmonic":
        names.add(f"bilap{dim}")
    if family == "linear_elasticity":
        names |= {"xyz"[i] + "xyz"[j] for i in range(dim) for j in range(i, dim)}
    if family == "wave":
        names |= {"t", "tt"}
    if transient:
        names.add("t")
    return names


class Fit:
    """Rows of a least-squares problem over the unknowns [u_0 | u_1 | ... | p], in blocks
    each with its own scale; the interior block may carry a nonlinear term."""

    def __init__(self, problem: Problem, basis: Basis, pressure: Basis | None):
        self.problem, self.basis, self.pressure = problem, basis, pressure
        self.m = len(basis)
        self.unknowns = problem.components * self.m + (len(pressure) if pressure else 0)
        self.blocks: list[tuple[str, np.ndarray, np.ndarray]] = []  # (name, matrix, target)
        self.nonlinear = None  # (block name, term(c), jacobian(c)): added to the interior rows

    def column(self, component: int) -> slice:
        return slice(component * self.m, (component + 1) * self.m)

    def add(self, name: str, matrix: np.ndarray, target: np.ndarray):
        keep = np.isfinite(target) & np.isfinite(matrix).all(axis=1)
        self.blocks.append((name, matrix[keep], target[keep]))

    def matrix(self):
        """The stacked rows and target, each block divided by its scale."""
        rows, targets, scales = [], [], []
        for _, matrix, target in self.blocks:
            data, operator = np.sqrt(np.mean(target**2)), np.sqrt(np.mean(matrix**2))
            # data at rounding level (a hiding term vanishing on the boundary) count as zero
            scale = data if data > 1e-12 * operator else operator or 1.0
            rows.append(matrix / scale)
            targets.append(target / scale)
            scales.append(np.full(len(target), scale))
        return np.vstack(rows), np.concatenate(targets), np.concatenate(scales)


def build_interior(fit: Fit, problem: Problem, points: np.ndarray):
    """The family's equations at interior points (strong form, as in docs/suite.md)."""
    family, dim, m = problem.family, problem.dim, fit.m
    d = fit.basis.evaluate(points)
    lap = d[f"lap{dim}"]
    grads = [d["xyz"[i]] for i in range(dim)] if "x" in d else []
    value = problem.value
    f = [value(component, points) for component in problem.forcing]
    time_term = d["t"] if problem.transient else 0.0
    zero = np.zeros((len(points), fit.unknowns))
    if family in ("poisson", "heat"):
        kappa = problem.coefficient("kappa")
        k = value(kappa, points)[:, None]
        dk = [value(sp.diff(kappa, c), points)[:, None] for c in COORDS[:dim]]
        rows = -k * lap - sum(a * g for a, g in zip(dk, grads)) + time_term
        fit.add("pde", rows, f[0])
    elif family == "helmholtz":
        k = value(problem.coefficient("k"), points)[:, None]
        fit.add("pde", -lap - k**2 * d["v"], f[0])
    elif family == "biharmonic":
        fit.add("pde", d[f"bilap{dim}"], f[0])
    elif family == "convection_diffusion":
        beta = [value(b, points)[:, None] for b in problem.params["beta"]]
        eps = value(problem.coefficient("epsilon"), points)[:, None]
        fit.add("pde", -eps * lap + sum(b * g for b, g in zip(beta, grads)) + time_term, f[0])
    elif family == "wave":
        c = value(problem.coefficient("c"), points)[:, None]
        fit.add("pde", d["tt"] - c**2 * lap, f[0])
    elif family == "reaction_diffusion":
        eps = value(problem.coefficient("epsilon"), points)[:, None]
        reaction = problem.params.get("reaction", sp.Integer(0))
        rate = sp.lambdify(U, reaction, "numpy")
        slope = sp.lambdify(U, sp.diff(reaction, U), "numpy")
        v = d["v"]
        # the linear part with the reaction linearised at u = 0 starts Gauss-Newton
        fit.add("pde", d["t"] - eps * lap + float(slope(0.0)) * v, f[0] - float(rate(0.0)))
        fit.nonlinear = (
            "pde",
            lambda c: rate(v @ c) - float(rate(0.0)) - float(slope(0.0)) * (v @ c),
            lambda c: (np.broadcast_to(slope(v @ c), (len(v),)) - float(slope(0.0)))[:, None] * v,
        )
    elif family == "burgers":
        nu = value(problem.coefficient("nu"), points)[:, None]
        v, total = d["v"], sum(grads)
        fit.add("pde", d["t"] - nu * lap, f[0])
        fit.nonlinear = (
            "pde",
            lambda c: (v @ c) * (total @ c),
            lambda c: (total @ c)[:, None] * v + (v @ c)[:, None] * total,
        )
    elif family == "linear_elasticity":
        mu, lmbda = lame(problem)
        mu, lmbda = float(mu), float(lmbda)
        blocks = []
        for i in range(dim):
            rows = zero.copy()
            for k in range(dim):
                pair = "".join(sorted("xyz"[i] + "xyz"[k]))
                rows[:, fit.column(k)] -= (mu + lmbda) * d[pair] + (mu * lap if i == k else 0)
            blocks.append(rows)
        for i, rows in enumerate(blocks):
            fit.add(f"pde_{i}", rows, f[i])
    elif family in ("stokes", "navier_stokes"):
        nu = value(problem.coefficient("nu"), points)[:, None]
        pressure = fit.pressure.evaluate(points)
        for i in range(dim):
            rows = zero.copy()
            rows[:, fit.column(i)] = -nu * lap + (time_term if family == "navier_stokes" else 0)
            rows[:, dim * m :] = pressure["xyz"[i]]
            fit.add(f"pde_{i}", rows, f[i])
        rows = zero.copy()
        for i in range(dim):
            rows[:, fit.column(i)] = grads[i]
        fit.add("divergence", rows, np.zeros(len(points)))
        if family == "navier_stokes":
            fit.nonlinear = ("navier_stokes", *convection(fit, d["v"], grads))
    else:
        raise ValueError(f"unknown family {family!r}")


def convection(fit: Fit, v: np.ndarray, grads: list[np.ndarray]):
    """(u . grad) u per momentum component, and its Jacobian in the velocity unknowns."""
    dim, m = len(grads), fit.m

    def split(c):
        return [c[i * m : (i + 1) * m] for i in range(dim)]

    def term(c):
        u = split(c)
        return np.concatenate([sum((v @ u[j]) * (grads[j] @ u[i]) for j in range(dim)) for i in range(dim)])

    def jacobian(c):
        u = split(c)
        n = len(v)
        out = np.zeros((dim * n, fit.unknowns))
        speed = [v @ uj for uj in u]
        for i in range(dim):
            rows = slice(i * n, (i + 1) * n)
            for j in range(dim):
                out[rows, fit.column(j)] += (grads[j] @ u[i])[:, None] * v
            out[rows, fit.column(i)] += sum(speed[j][:, None] * grads[j] for j in range(dim))
        return out

    return term, jacobian


def lame(problem: Problem):
    p = problem.params
    if "mu" in p and "lambda" in p:
        return p["mu"], p["lambda"]
    E, nu = p["E"], p["nu"]
    return E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))


def build_boundary(fit: Fit, problem: Problem, count: int):
    """Dirichlet, Neumann, Robin, lap(u) and periodic rows; initial data at t0."""
    dim, rng, basis = problem.dim, problem.rng, fit.basis
    for condition in conditions(problem.bc, "dirichlet"):
        spatial = boundary_points(problem.shape, condition["on"], count, rng, dim)
        points = problem.points(spatial)
        v = basis.evaluate(points)["v"]
        for i, expr in enumerate(values_of(condition["value"])[: problem.components]):
            rows = np.zeros((len(points), fit.unknowns))
            rows[:, fit.column(i)] = v
            fit.add(f"dirichlet_{i}", rows, problem.value(parse(expr), points))
    flux = problem.coefficient(FLUX.get(problem.family, "_none"))
    for kind in ("neumann", "robin"):
        for condition in conditions(problem.bc, kind):
            tags = [condition["on"]] if isinstance(condition["on"], str) else condition["on"]
            for tag in tags:
                if tag not in SIDES or problem.components > 1:
                    continue  # natural data sit on straight sides of scalar problems in this suite
                axis, sign = SIDES[tag]
                spatial = boundary_points(problem.shape, tag, count // 2, rng, dim)
                points = problem.points(spatial)
                d = basis.evaluate(points)
                rows = sign * problem.value(flux, points)[:, None] * d["xyz"[axis]]
                if kind == "robin":
                    rows = rows + problem.value(parse(condition.get("alpha", 0)), points)[:, None] * d["v"]
                fit.add(kind, rows, problem.value(parse(condition["value"]), points))
    for condition in conditions(problem.bc, "laplacian"):
        points = problem.points(boundary_points(problem.shape, condition["on"], count, rng, dim))
        fit.add("laplacian", basis.evaluate(points)[f"lap{dim}"], problem.value(parse(condition["value"]), points))
    for direction in (problem.bc.get("periodic") or {}).get("directions", []):
        axis = "xyz".index(direction)
        bbox = problem.spec["domain"].get("geometry_params", {}).get("bounds", (0, 1, 0, 1))
        spatial = rng.uniform(np.array(bbox[0::2], float), np.array(bbox[1::2], float), (count // 2, dim))
        low, high = spatial.copy(), spatial.copy()
        low[:, axis], high[:, axis] = bbox[2 * axis], bbox[2 * axis + 1]
        times = problem.points(spatial)[:, 3]
        a, b = basis.evaluate(problem.points(low, times)), basis.evaluate(problem.points(high, times))
        for name in ("v", direction):
            for i in range(problem.components):
                rows = np.zeros((len(spatial), fit.unknowns))
                rows[:, fit.column(i)] = a[name] - b[name]
                fit.add(f"periodic_{name}", rows, np.zeros(len(spatial)))
    if problem.transient:
        spatial = np.concatenate(
            [
                interior_points(problem.shape, problem.spec["eval_grid"]["bbox"], count, rng, dim),
                boundary_points(problem.shape, "boundary", count // 4, rng, dim),
            ]
        )
        points = problem.points(spatial, np.full(len(spatial), problem.t0))
        d = basis.evaluate(points)
        for key, name in (("value", "v"), ("velocity", "t")):
            if key not in problem.ic:
                continue
            for i, expr in enumerate(values_of(problem.ic[key])[: problem.components]):
                rows = np.zeros((len(points), fit.unknowns))
                rows[:, fit.column(i)] = d[name]
                fit.add(f"initial_{key}", rows, problem.value(parse(expr), points))


def solve_fit(fit: Fit) -> tuple[np.ndarray, dict]:
    """Least squares over scaled columns; Gauss-Newton (trust region) for a nonlinear term."""
    matrix, target, scales = fit.matrix()
    norms = np.linalg.norm(matrix, axis=0)
    norms[norms == 0] = 1.0
    scaled = matrix / norms
    solution = np.linalg.lstsq(scaled, target, rcond=1e-13)[0]
    info = {}
    if fit.nonlinear is not None:
        from scipy.optimize import least_squares  # 0.7 s to import: the nonlinear families only

        name = fit.nonlinear[0]
        rows = np.zeros(len(target), bool)
        offset = 0
        for block_name, block, _ in fit.blocks:
            if block_name == name or (name == "navier_stokes" and block_name.startswith("pde_")):
                rows[offset : offset + len(block)] = True
            offset += len(block)
        term, jacobian = fit.nonlinear[1], fit.nonlinear[2]
        row_scale = scales[rows]

        def residual(c):
            out = scaled @ c - target
            out[rows] += term(c / norms) / row_scale
            return out

        def jac(c):
            out = scaled.copy()
            out[rows] += jacobian(c / norms) / row_scale[:, None] / norms[None, :]
            return out

        result = least_squares(
            residual, solution, jac=jac, method="trf", xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=60
        )
        solution = result.x
        info["gauss_newton_steps"] = int(result.nfev)
        final = residual(solution)
    else:
        final = scaled @ solution - target
    info["fit_residual"] = float(np.linalg.norm(final) / max(np.linalg.norm(target), 1e-300))
    return solution / norms, info


def write(spec: dict, components: list[np.ndarray], info: dict, started: float):
    grid = spec["eval_grid"]
    counts = [grid["nx"], grid["ny"]] + ([grid["nz"]] if "nz" in grid else [])
    axes = [np.linspace(grid["bbox"][2 * i], grid["bbox"][2 * i + 1], n) for i, n in enumerate(counts)]
    output = spec.get("output", {})
    names = output.get("components") or (["u"] if output.get("field", "scalar") == "scalar" else [output["field"]])
    arrays = {}
    for index, name in enumerate(names):
        if name.endswith("magnitude") or name.endswith("_mag"):
            arrays[name] = np.sqrt(sum(c**2 for c in components))
        elif name[-2:] in ("_x", "_y", "_z"):
            arrays[name] = components["xyz".index(name[-1])]
        else:
            arrays[name] = components[min(index, len(components) - 1)]
    np.savez("solution.npz", **dict(zip("xyz", axes)), **arrays)
    with open("meta.json", "w") as handle:
        json.dump({"wall_time_sec": time.perf_counter() - started, "status": "done", "solver_info": info}, handle)


def solve(case_spec: dict) -> None:
    started, cpu_start = time.perf_counter(), time.process_time()
    problem = Problem(case_spec)
    dim, rng = problem.dim, problem.rng
    bbox = case_spec["eval_grid"]["bbox"]
    probe = problem.points(interior_points(problem.shape, bbox, 60, rng, dim))
    candidates = [s for expr in problem.visible() for s in shapes_of(expr)]
    if problem.transient:  # a shape shown without t may move in time
        candidates += [T * s for s in list(candidates) if T not in s.free_symbols]
    # the polynomials always; the shown shapes, simplest first, while the budget lasts
    monomials = polynomials(dim, problem.transient)
    functions = distinct(monomials + candidates, probe, cpu_start + SHAPES_SEC, always=monomials)
    # gradients for natural and periodic data, lap(u) for the biharmonic's boundary data
    names = interior_names(problem.family, dim, problem.transient) | {"xyz"[i] for i in range(dim)}
    basis = Basis([], sorted(names))
    for function in functions:
        if function in monomials or time.process_time() < cpu_start + SHAPES_SEC:
            basis.add(function)
    pressure = None
    if problem.family in ("stokes", "navier_stokes"):
        shown = [s for e in problem.forcing for s in shapes_of(e)] + pressure_shapes(
            problem.forcing, cpu_start + PRESSURE_SEC
        )
        gauge_free = polynomials(dim, problem.transient)[1:]  # p is known up to a constant
        shown = distinct(gauge_free + shown, probe, cpu_start + PRESSURE_SEC + 0.5, always=gauge_free)
        pressure = Basis(shown, ["v"] + list("xyz"[:dim]))
    fit = Fit(problem, basis, pressure)
    count = 500 if dim == 2 else 800
    if problem.transient:
        count = 800
    build_interior(fit, problem, problem.points(interior_points(problem.shape, bbox, count, rng, dim)))
    build_boundary(fit, problem, 300 if dim == 2 else 600)
    coefficients, info = solve_fit(fit)
    # the fitted field on the grid at t_end
    grid = case_spec["eval_grid"]
    counts = [grid["nx"], grid["ny"]] + ([grid["nz"]] if "nz" in grid else [])
    axes = [np.linspace(bbox[2 * i], bbox[2 * i + 1], n) for i, n in enumerate(counts)]
    mesh = np.meshgrid(*reversed(axes), indexing="ij")  # (nz,) ny, nx
    spatial = np.column_stack([m.ravel() for m in reversed(mesh)])
    values = basis.values(problem.points(spatial, np.full(len(spatial), problem.t_end)))
    shape = tuple(reversed(counts))
    components = []
    for i in range(problem.components):
        field = values @ coefficients[fit.column(i)]
        components.append(np.where(np.isfinite(field), field, np.nan).reshape(shape))
    info.update(
        method="ansatz fit: least squares over the shown expressions' terms and polynomials, no mesh",
        basis=len(basis),
        pressure_basis=len(pressure) if pressure else 0,
        rows=sum(len(b[2]) for b in fit.blocks),
    )
    write(case_spec, components, info, started)
