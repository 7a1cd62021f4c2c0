"""The closed form a manufactured case's text gives away, and the problem that is left once it
is lifted out (the lifting rung's search: solver.py). numpy and sympy only."""

import itertools
import json

import numpy as np
import sympy as sp

X, Y, Z, T, U = sp.symbols("x y z t u")
COORDS = (X, Y, Z)
NAMES = {"x": X, "y": Y, "z": Z, "t": T, "pi": sp.pi, "e": sp.E}
# the families the rung lifts, and the coefficient of each one's flux (wave's: c, squared)
FLUX = {"poisson": "kappa", "heat": "kappa", "convection_diffusion": "epsilon", "helmholtz": None,
        "reaction_diffusion": "epsilon", "wave": "c", "biharmonic": None,
        "linear_elasticity": None, "stokes": None, "burgers": "nu", "navier_stokes": None}
# the families whose S sits inside a nonlinear convection term: their textbook solvers write the
# forms in S + w (_textbook.OFFSET), so w's problem has the data less S and the same forcing
OFFSET = ("burgers", "navier_stokes")
NORMALS = {f"{axis}_{end}": (index, sign) for index, axis in enumerate("xyz")
           for end, sign in (("min", -1), ("max", 1))}
POINTS, MAX_TERMS, FIT, BINARY = 300, 14, 1e-6, 1e-4
# biharmonic: a term this small is differentiated by sympy (four nested differences lose ~1e-4 to
# rounding, over FIT); a larger one (the hiding term) by differences: it is never part of S
SYMBOLIC_OPS = 400
VECTOR = ("linear_elasticity", "stokes", "navier_stokes")
STEP = 1e-3  # of the box's extent (and of t_end): the differences' step
SEED = 66


def conditions(spec, kind):
    value = spec.get("bc", {}).get(kind)
    return [] if value is None else value if isinstance(value, list) else [value]


def parse(text):
    return sp.parse_expr(str(text).replace("^", "**"), local_dict=dict(NAMES))


def text(expr):
    return sp.sstr(expr).replace("E", "e") if expr.has(sp.E) else sp.sstr(expr)


def dimension(spec):
    return 3 if spec["eval_grid"].get("nz") else 2


def flux_coefficient(spec):
    name = FLUX[spec["pde"]["type"]]
    value = parse(spec["pde"]["params"][name]) if name else sp.Integer(1)
    return value**2 if spec["pde"]["type"] == "wave" else value


def reaction(spec):
    """R(u) as a numpy function of (u's values, the columns); None where the family has none."""
    if spec["pde"]["type"] != "reaction_diffusion":
        return None
    compiled = sp.lambdify((U, X, Y, Z, T), sp.parse_expr(spec["pde"]["params"]["reaction"].replace("^", "**"),
                                                          local_dict=dict(NAMES, u=U)), "numpy")
    return lambda u, columns: np.broadcast_to(compiled(u, *columns), columns[0].shape).astype(float)


def function(expr):
    """expr as a numpy function of the columns x, y, z, t."""
    compiled = sp.lambdify((X, Y, Z, T), expr, "numpy")
    return lambda columns: np.broadcast_to(compiled(*columns), columns[0].shape).astype(float)


def derivative(fn, axis, step):
    """The derivative along column ``axis`` by the fourth-order central difference (sympy's
    derivatives of a gear's hiding term take minutes; these, milliseconds)."""

    def at(columns, shift):
        moved = list(columns)
        moved[axis] = columns[axis] + shift * step
        return fn(moved)

    return lambda columns: (8 * (at(columns, 1) - at(columns, -1)) - at(columns, 2) + at(columns, -2)) / (12 * step)


def operator(spec):
    """L as a function of a term's numpy function: the linear part of the family's strong form
    (without the forcing and a reaction term)."""
    pde, dim = spec["pde"], dimension(spec)
    family = pde["type"]
    if family not in FLUX:
        raise NotImplementedError(f"the lifting rung has no operator for {family}")
    if family == "biharmonic":
        return None  # term by term: ``residual``
    box = spec["eval_grid"]["bbox"]
    steps = [STEP * (box[2 * i + 1] - box[2 * i]) for i in range(dim)]
    c = function(flux_coefficient(spec))

    def apply(s):
        parts = []
        for axis in range(dim):
            grad = derivative(s, axis, steps[axis])
            parts.append(derivative(lambda cols, grad=grad: c(cols) * grad(cols), axis, steps[axis]))
            if family == "convection_diffusion":
                beta = function(parse(pde["params"]["beta"][axis]))
                parts.append(lambda cols, grad=grad, beta=beta: -beta(cols) * grad(cols))
        rate = derivative(s, 3, STEP * pde["time"]["t_end"]) if "time" in pde else None
        if rate and family == "wave":
            rate = derivative(rate, 3, STEP * pde["time"]["t_end"])  # u_tt
        k2 = float(parse(pde["params"]["k"])) ** 2 if family == "helmholtz" else 0.0

        def value(cols):
            total = -sum(part(cols) for part in parts) - k2 * s(cols)
            return total + rate(cols) if rate else total

        return value

    return apply


def residual(spec, apply, term):
    """L(term) as a numpy function of the columns."""
    if spec["pde"]["type"] == "biharmonic" and sp.count_ops(term) <= SYMBOLIC_OPS:
        return function(laplacian(spec, laplacian(spec, term)))
    if spec["pde"]["type"] == "biharmonic":
        return biharmonic_differences(spec, function(term))
    return apply(function(term))


def laplacian(spec, expr):
    return sum(sp.diff(expr, axis, 2) for axis in COORDS[: dimension(spec)])


def biharmonic_differences(spec, fn):
    box = spec["eval_grid"]["bbox"]
    steps = [STEP * (box[2 * i + 1] - box[2 * i]) for i in range(dimension(spec))]

    def lap(g):
        parts = [derivative(derivative(g, axis, steps[axis]), axis, steps[axis]) for axis in range(len(steps))]
        return lambda cols: sum(part(cols) for part in parts)

    return lap(lap(fn))


def as_columns(spatial, times):
    """The columns x, y, z, t the numpy functions take: a 2-D case's z filled in."""
    return list(spatial) + [np.full_like(spatial[0], 0.5)] * (3 - len(spatial)) + [times]


def sample_points(spec):
    rng = np.random.default_rng(SEED)
    box = spec["eval_grid"]["bbox"]
    spatial = [rng.uniform(box[2 * i], box[2 * i + 1], POINTS) for i in range(dimension(spec))]
    time_ = spec["pde"].get("time")
    return as_columns(spatial, rng.uniform(time_.get("t0", 0.0), time_["t_end"], POINTS) if time_ else np.zeros(POINTS))


def values(expr, columns):
    return function(expr)(columns)


def closed_form(spec):
    """(S, the forcing's terms L(S) does not explain): the largest subset of the Dirichlet and
    initial data's terms whose residual is a sum of some of the forcing's terms; (0, the forcing) if
    none. A vector family's S and rest are lists, a component each."""
    if spec["pde"]["type"] in VECTOR:
        return vector_closed_form(spec)
    forcing = parse(spec["pde"]["forcing"]["value"])
    # the initial data too: a term of u that vanishes on the boundary is not in the boundary's
    texts = [c["value"] for c in conditions(spec, "dirichlet")] + ([spec["ic"]["value"]] if spec.get("ic") else [])
    data = list(dict.fromkeys(term for value in texts for term in sp.Add.make_args(parse(value))))
    terms = sp.Add.make_args(forcing)
    if not data or len(data) > MAX_TERMS:
        return sp.Integer(0), forcing
    apply, columns, react = operator(spec), sample_points(spec), reaction(spec)
    residuals = np.stack([residual(spec, apply, term)(columns) for term in data], axis=1)
    shapes = np.stack([function(term)(columns) for term in terms], axis=1)
    burgers = spec["pde"]["type"] == "burgers"
    term_values = np.stack([function(term)(columns) for term in data], axis=1) if react or burgers else None
    if burgers:  # u (sum_i du/dx_i): the sum of a subset's values times the sum of its slopes
        box = spec["eval_grid"]["bbox"]
        slopes = np.stack([sum(derivative(function(term), i, STEP * (box[2 * i + 1] - box[2 * i]))(columns)
                               for i in range(dimension(spec))) for term in data], axis=1)

    def nonlinear(chosen):  # the linear part adds up term by term; R (u grad u) is applied to the sum
        if burgers:
            return term_values[:, list(chosen)].sum(axis=1) * slopes[:, list(chosen)].sum(axis=1)
        return react(term_values[:, list(chosen)].sum(axis=1), columns) if react else 0.0

    found = select(residuals, shapes, nonlinear)
    if found is None:
        return sp.Integer(0), forcing
    chosen, weights = found
    return sp.Add(*[data[i] for i in chosen]), sp.Add(*[t for t, w in zip(terms, weights) if w > 0.5])


def select(residuals, shapes, nonlinear=lambda chosen: 0.0, binary_only=True):
    """(the chosen data terms, the forcing terms' 0/1 weights) of the largest subset whose rest
    (the forcing less its residual) is a sum of forcing terms; None if no subset is. Without
    ``binary_only``, any combination of them (Stokes: the curls of a wave's two components are
    one function, so no 0/1 weights are singled out)."""
    # the rest's weights on the forcing's terms: 1 on each term of what drives w, 0 elsewhere;
    # those terms are independent of L(S)'s (which may depend on one another: x*y*exp(x),
    # x*exp(x)*y/2, ...), so that 0/1 vector is the least-squares solution of least norm
    # (a span only: singular values under 1e-10 of the largest cut, polynomial terms are near-dependent)
    inverse = np.linalg.pinv(shapes) if binary_only else np.linalg.pinv(shapes, rcond=1e-10)
    total = shapes.sum(axis=1)
    size = max(np.linalg.norm(total), 1.0)
    for count in range(residuals.shape[1], 0, -1):
        for chosen in itertools.combinations(range(residuals.shape[1]), count):
            rest = total - residuals[:, list(chosen)].sum(axis=1) - nonlinear(chosen)
            weights = inverse @ rest
            binary = not binary_only or np.all(np.minimum(np.abs(weights), np.abs(weights - 1)) < BINARY)
            if binary and np.linalg.norm(shapes @ weights - rest) < FIT * size:
                return chosen, weights
    return None


def elasticity_operator(spec):
    """L(e in component i) as numpy functions of the columns, a component each:
    -mu lap(e) delta_ij - (mu + lambda) d_i d_j e (plane strain in 2-D)."""
    params, dim = spec["pde"]["params"], dimension(spec)
    if "mu" in params:
        mu, lmbda = float(params["mu"]), float(params["lambda"])
    else:
        young, nu = float(params["E"]), float(params["nu"])
        mu, lmbda = young / (2 * (1 + nu)), young * nu / ((1 + nu) * (1 - 2 * nu))
    box = spec["eval_grid"]["bbox"]
    steps = [STEP * (box[2 * i + 1] - box[2 * i]) for i in range(dim)]

    def apply(fn, i):
        second = {(a, b): derivative(derivative(fn, a, steps[a]), b, steps[b]) for a in range(dim) for b in range(dim)}
        return [lambda cols, j=j: -(mu * sum(second[a, a](cols) for a in range(dim)) if i == j else 0.0)
                - (mu + lmbda) * second[i, j](cols) for j in range(dim)]

    return apply


def curl(spec, vector):
    """The curl of a vector of expressions: a scalar in 2-D, three components in 3-D."""
    x, y, z = COORDS
    if dimension(spec) == 2:
        return [sp.diff(vector[1], x) - sp.diff(vector[0], y)]
    return [sp.diff(vector[2], y) - sp.diff(vector[1], z), sp.diff(vector[0], z) - sp.diff(vector[2], x),
            sp.diff(vector[1], x) - sp.diff(vector[0], y)]


def stokes_residuals(spec, data, columns):
    """The curl of -nu lap(e) in component i, a column per (i, e): the curl takes the
    manufactured pressure's gradient out of the forcing, so the rest is a sum of the curls of
    the forcing's terms. A small term by sympy, a large one (the hiding term: never in S) by
    differences of differences (their rounding does not matter there)."""
    dim, nu = dimension(spec), parse(spec["pde"]["params"]["nu"])
    box = spec["eval_grid"]["bbox"]
    steps = [STEP * (box[2 * i + 1] - box[2 * i]) for i in range(dim)]
    columns_of = []
    for i, term in data:
        if sp.count_ops(term) <= SYMBOLIC_OPS:
            vector = [-nu * laplacian(spec, term) if k == i else sp.Integer(0) for k in range(dim)]
            columns_of.append(np.concatenate([values(c, columns) for c in curl(spec, vector)]))
            continue
        fn = function(term)
        lap = [derivative(derivative(fn, a, steps[a]), a, steps[a]) for a in range(dim)]

        def component(cols, lap=lap):
            return -float(nu) * sum(part(cols) for part in lap)

        def along(axis, k, i=i, component=component):  # d_axis of the vector's k-th component
            return derivative(component, axis, steps[axis]) if k == i else (lambda cols: np.zeros(POINTS))

        if dim == 2:
            parts = [lambda cols: along(0, 1)(cols) - along(1, 0)(cols)]
        else:
            parts = [lambda cols: along(1, 2)(cols) - along(2, 1)(cols), lambda cols: along(2, 0)(cols) - along(0, 2)(cols),
                     lambda cols: along(0, 1)(cols) - along(1, 0)(cols)]
        columns_of.append(np.concatenate([np.broadcast_to(part(columns), (POINTS,)) for part in parts]))
    return np.stack(columns_of, axis=1)


def vector_terms(spec):
    """(the forcing's components, the Dirichlet data's (component, term) pairs) of a vector family."""
    forcing = [parse(value) for value in spec["pde"]["forcing"]["value"]]
    data = list(dict.fromkeys((i, term) for c in conditions(spec, "dirichlet")
                              for i, value in enumerate(c["value"]) for term in sp.Add.make_args(parse(value))))
    return forcing, data


def vector_closed_form(spec):
    """closed_form for linear elasticity and Stokes: the data's terms are (component, term)
    pairs, and a residual stacks every component's (a term of one component drives all of
    them); Stokes compares curls. Stokes's rest is the whole f - L(S) (the pressure's gradient
    with it), not only the forcing's terms that drive the part."""
    dim = dimension(spec)
    if spec["pde"]["type"] in ("stokes", "navier_stokes"):
        return stokes_closed_form(spec)
    forcing, data = vector_terms(spec)
    nothing = ([sp.Integer(0)] * dim, forcing)
    if not data or len(data) > MAX_TERMS:
        return nothing
    apply, columns = elasticity_operator(spec), sample_points(spec)
    zeros = np.zeros(POINTS)
    residuals = np.stack([np.concatenate([np.broadcast_to(part(columns), (POINTS,)) for part in apply(function(term), i)])
                          for i, term in data], axis=1)
    terms = [(j, term) for j, value in enumerate(forcing) for term in sp.Add.make_args(value)]
    shapes = np.stack([np.concatenate([function(term)(columns) if k == j else zeros for k in range(dim)])
                       for j, term in terms], axis=1)
    found = select(residuals, shapes)
    if found is None:
        return nothing
    chosen, weights = found
    s = [sp.Add(*[term for i, term in (data[c] for c in chosen) if i == k]) for k in range(dim)]
    rest = [sp.Add(*[term for (j, term), w in zip(terms, weights) if j == k and w > 0.5]) for k in range(dim)]
    return s, rest


def convection_curl(spec, data, columns):
    """Navier-Stokes: the curl of (S . grad) S for a subset of the data's (component, term)
    pairs, from each term's value, slopes and second derivatives (sympy; differences for a large
    term). 2-D: curl c = d_x c_y - d_y c_x, c_j = sum_k S_k d_k S_j."""
    if dimension(spec) != 2:
        raise NotImplementedError("the lifting rung's Navier-Stokes search is 2-D")
    box = spec["eval_grid"]["bbox"]
    steps = [STEP * (box[2 * i + 1] - box[2 * i]) for i in range(2)]
    value, slope, second = [], [], []
    for _, term in data:
        if sp.count_ops(term) <= SYMBOLIC_OPS:
            value.append(values(term, columns))
            slope.append([values(sp.diff(term, COORDS[a]), columns) for a in range(2)])
            second.append([[values(sp.diff(term, COORDS[a], COORDS[b]), columns) for b in range(2)] for a in range(2)])
        else:
            fn = function(term)
            first = [derivative(fn, a, steps[a]) for a in range(2)]
            value.append(fn(columns))
            slope.append([f(columns) for f in first])
            second.append([[derivative(first[b], a, steps[a])(columns) for b in range(2)] for a in range(2)])
    value, slope, second = np.array(value), np.array(slope), np.array(second)  # (terms, [2, [2,]] points)
    component = np.array([i for i, _ in data])

    def curl_of(chosen):
        chosen = list(chosen)
        u = [value[chosen][component[chosen] == k].sum(axis=0) for k in range(2)]
        du = [[slope[chosen][component[chosen] == k][:, a].sum(axis=0) for a in range(2)] for k in range(2)]
        ddu = [[[second[chosen][component[chosen] == k][:, a, b].sum(axis=0) for b in range(2)] for a in range(2)]
               for k in range(2)]

        def d_c(m, j):  # d_m c_j = sum_k (d_m u_k d_k u_j + u_k d_m d_k u_j)
            return sum(du[k][m] * du[j][k] + u[k] * ddu[j][m][k] for k in range(2))

        return d_c(0, 1) - d_c(1, 0)

    return curl_of


def stokes_closed_form(spec):
    dim = dimension(spec)
    forcing, data = vector_terms(spec)
    nothing = ([sp.Integer(0)] * dim, forcing)
    if not data or len(data) > MAX_TERMS:
        return nothing
    columns = sample_points(spec)
    residuals = stokes_residuals(spec, data, columns)
    convection = convection_curl(spec, data, columns) if spec["pde"]["type"] == "navier_stokes" else None
    terms = [(j, term) for j, value in enumerate(forcing) for term in sp.Add.make_args(value)]
    shapes = np.stack([np.concatenate([values(c, columns) for c in curl(spec, [term if k == j else sp.Integer(0)
                                                                              for k in range(dim)])])
                       for j, term in terms], axis=1)
    found = select(residuals, shapes, convection or (lambda chosen: 0.0), binary_only=False)
    if found is None:
        return nothing
    s = [sp.Add(*[term for i, term in (data[c] for c in found[0]) if i == k]) for k in range(dim)]
    if spec["pde"]["type"] == "navier_stokes":  # the solver writes its forms in S + w: f as it is
        return s, forcing
    nu = parse(spec["pde"]["params"]["nu"])
    return s, [forcing[k] + nu * laplacian(spec, s[k]) for k in range(dim)]


def lifted_spec(spec, s, rest):
    """The problem w = u - S solves: the same operator and boundary pieces, other data."""
    lifted = json.loads(json.dumps(spec))
    if spec["pde"]["type"] in OFFSET:  # the forms take S + w: only the data change
        for condition in conditions(lifted, "dirichlet"):
            value = condition["value"]
            condition["value"] = ([text(parse(v) - part) for v, part in zip(value, s)] if isinstance(s, list)
                                  else text(parse(value) - s))
        if spec.get("ic"):
            lifted["ic"]["value"] = text(parse(spec["ic"]["value"]) - s.subs(T, spec["pde"]["time"].get("t0", 0.0)))
        return lifted
    if isinstance(s, list):  # a vector family: Dirichlet data on the whole boundary only
        lifted["pde"]["forcing"]["value"] = [text(part) for part in rest]
        for condition in conditions(lifted, "dirichlet"):
            condition["value"] = [text(parse(value) - part) for value, part in zip(condition["value"], s)]
        return lifted
    lifted["pde"]["forcing"]["value"] = text(rest)
    if spec["pde"]["type"] == "reaction_diffusion":  # w's reaction: R(w + S) - R(S), so L(S + w) = f
        r = sp.parse_expr(spec["pde"]["params"]["reaction"].replace("^", "**"), local_dict=dict(NAMES, u=U))
        lifted["pde"]["params"]["reaction"] = text(r.subs(U, U + s) - r.subs(U, s))
    for condition in conditions(lifted, "dirichlet"):
        condition["value"] = text(parse(condition["value"]) - s)
    for condition in conditions(lifted, "laplacian"):  # biharmonic: lap(u) on the boundary
        condition["value"] = text(parse(condition["value"]) - laplacian(spec, s))
    c = flux_coefficient(spec)
    for kind in ("neumann", "robin"):
        for condition in conditions(lifted, kind):
            pieces = [condition["on"]] if isinstance(condition["on"], str) else condition["on"]
            if len(pieces) != 1 or pieces[0] not in NORMALS:
                raise NotImplementedError(f"the lifting rung knows the normal of a side only, not {condition['on']}")
            axis, sign = NORMALS[pieces[0]]
            taken = sign * c * sp.diff(s, COORDS[axis]) + (parse(condition["alpha"]) * s if kind == "robin" else 0)
            condition["value"] = text(parse(condition["value"]) - taken)
    if spec.get("ic"):
        t0 = spec["pde"]["time"].get("t0", 0.0)
        lifted["ic"]["value"] = text(parse(spec["ic"]["value"]) - s.subs(T, t0))
        if spec["pde"]["type"] == "wave":  # and u_t at t0
            velocity = parse(spec["ic"].get("velocity", 0))
            lifted["ic"]["velocity"] = text(velocity - sp.diff(s, T).subs(T, t0))
    return lifted
