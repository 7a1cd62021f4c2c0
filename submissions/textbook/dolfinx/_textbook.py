"""Shared plumbing of the textbook DOLFINx solvers (written from guides/DOLFINX_GUIDE.md):
the case's mesh, expression strings as UFL, boundary facets by tag, Dirichlet and
Neumann/Robin data, one fixed time-step rule, LU solves, grid sampling and output files.

Fixed choices, the same for every case: 64 cells along the domain's largest extent in
2-D (gmsh for every shape that is not a rectangle), 16 per side of the unit cube in 3-D;
MUMPS LU for every linear system; dt = min(0.01, T/10) rounded so that it divides T.
Periodic conditions are not supported (the tutorial way needs dolfinx_mpc, absent here).
"""

import json
import math
import time

import numpy as np
from mpi4py import MPI

import basix.ufl
import dolfinx.fem.petsc
import ufl
from dolfinx import fem, geometry, mesh

CELLS_2D, CELLS_3D = 64, 16
# the scalar solvers' element degree (1: the textbook's); the lifting rung (submissions/lifting)
# sets it and the cells per side to compare plain and lifted solves at other settings
DEGREE = 1
# the lifting rung's closed form (submissions/lifting): where set, S as a function (msh, t) -> UFL,
# and the solvers that ask (burgers, navier_stokes) solve for w = u - S, the forms written in S + w
OFFSET = None
LU = {"ksp_type": "preonly", "pc_type": "lu", "pc_factor_mat_solver_type": "mumps"}
NEWTON = {"snes_type": "newtonls", "snes_rtol": 1e-10, "snes_atol": 1e-12, "snes_max_it": 50, **LU}

# ---- expressions: the case's strings, evaluated with UFL functions only ----

FUNCTIONS = {"sin": ufl.sin, "cos": ufl.cos, "tan": ufl.tan, "exp": ufl.exp, "log": ufl.ln, "sqrt": ufl.sqrt,
             "sinh": ufl.sinh, "cosh": ufl.cosh, "tanh": ufl.tanh, "atan": ufl.atan, "asin": ufl.asin,
             "acos": ufl.acos, "atan2": ufl.atan2, "abs": abs, "Abs": abs, "pi": ufl.pi, "e": ufl.e}


def expr(text, msh, t=0.0, u=None):
    """A case expression (string, number, or list of them for a vector) as UFL; t may be
    a fem.Constant (time-dependent data), u the unknown (reaction terms)."""
    if isinstance(text, (list, tuple)):
        return ufl.as_vector([expr(item, msh, t, u) for item in text])
    x = ufl.SpatialCoordinate(msh)
    names = dict(FUNCTIONS, x=x[0], y=x[1], z=x[2] if len(x) == 3 else 0.0, t=t, u=u)
    value = eval(str(text).replace("^", "**"), {"__builtins__": {}}, names)
    return fem.Constant(msh, float(value)) if isinstance(value, (int, float)) else value


def whole(w, msh, t=0.0):
    """The unknown the forms are written in: w itself, or S + w under the lifting rung."""
    return w if OFFSET is None else w + OFFSET(msh, t)


# ---- meshes ----

def extent(case_spec):
    return max(hi - lo for lo, hi in case_spec["domain"]["bounds"])


def build_mesh(case_spec):
    domain, bc = case_spec["domain"], case_spec.get("bc", {})
    if bc.get("periodic"):
        raise NotImplementedError("periodic conditions need dolfinx_mpc, which this runtime does not have")
    kind, bounds = domain["type"], domain["bounds"]
    if kind == "unit_cube":
        return mesh.create_unit_cube(MPI.COMM_WORLD, CELLS_3D, CELLS_3D, CELLS_3D, mesh.CellType.tetrahedron)
    if kind in ("unit_square", "periodic_square"):
        (x0, x1), (y0, y1) = bounds[:2]
        n = [max(1, round(CELLS_2D * (hi - lo) / extent(case_spec))) for lo, hi in bounds[:2]]
        return mesh.create_rectangle(MPI.COMM_WORLD, [[x0, y0], [x1, y1]], n, mesh.CellType.triangle)
    return gmsh_mesh(kind, domain.get("geometry_params") or {}, extent(case_spec) / CELLS_2D)


def gmsh_mesh(kind, p, h):
    import gmsh
    from dolfinx.io import gmsh as gmshio

    gmsh.initialize(["-noenv"])
    gmsh.option.setNumber("General.Terminal", 0)
    occ = gmsh.model.occ

    def polygon(vertices):
        points = [occ.addPoint(x, y, 0) for x, y in vertices]
        lines = [occ.addLine(points[i - 1], points[i]) for i in range(len(points))]
        return [(2, occ.addPlaneSurface([occ.addCurveLoop(lines)]))]

    def disk(c, r):
        return [(2, occ.addDisk(c[0], c[1], 0, r, r))]

    def rect(x0, x1, y0, y1):
        return [(2, occ.addRectangle(x0, y0, 0, x1 - x0, y1 - y0))]

    if kind == "l_shape":
        polygon(p.get("vertices", [[0, 0], [1, 0], [1, .5], [.5, .5], [.5, 1], [0, 1]]))
    elif kind in ("star", "gear"):
        polygon(p["vertices"] if "vertices" in p else polygon_vertices(kind, p))
    elif kind == "circle":
        disk(p.get("center", (.5, .5)), p.get("radius", .5))
    elif kind == "annulus":
        c = p.get("center", (.5, .5))
        occ.cut(disk(c, p.get("outer_radius", .5)), disk(c, p.get("inner_radius", .25)))
    elif kind == "eccentric_annulus":
        outer, inner = p.get("outer", {}), p.get("inner", {})
        occ.cut(disk(outer.get("center", (.5, .5)), outer.get("radius", .5)),
                disk(inner.get("center", (.65, .5)), inner.get("radius", .2)))
    elif kind == "square_with_hole":
        hole = p.get("hole", {})
        cutter = polygon(hole["vertices"]) if "vertices" in hole else disk(hole.get("center", (.5, .5)),
                                                                           hole.get("radius", .2))
        occ.cut(rect(*p.get("outer", (0, 1, 0, 1))), cutter)
    elif kind == "multi_hole":
        holes = p.get("holes", [{"center": (.3, .3), "radius": .1}, {"center": (.7, .3), "radius": .08},
                                {"center": (.5, .7), "radius": .12}])
        occ.cut(rect(*p.get("outer", (0, 1, 0, 1))), [d for hl in holes for d in disk(hl["center"], hl["radius"])])
    elif kind == "sector":  # the disk cut down to a wedge polygon twice its radius
        c, r, angle = p.get("center", (0, 0)), p.get("radius", 1.0), math.radians(p.get("angle_deg", 90.0))
        wedge = [c] + [(c[0] + 2 * r * math.cos(a), c[1] + 2 * r * math.sin(a)) for a in np.linspace(0, angle, 9)]
        occ.intersect(disk(c, r), polygon(wedge))
    elif kind == "t_junction":
        occ.fuse(rect(*p.get("bar", (0, 1, .8, 1))), rect(*p.get("stem", (.4, .6, 0, .8))))
    elif kind == "dumbbell":
        left, right = p.get("left", {}), p.get("right", {})
        occ.fuse(disk(left.get("center", (.25, .5)), left.get("radius", .25)),
                 disk(right.get("center", (.75, .5)), right.get("radius", .25))
                 + rect(*p.get("bridge", (.25, .75, .4, .6))))
    else:
        raise NotImplementedError(f"no mesh for domain type {kind!r}")
    occ.synchronize()
    gmsh.model.addPhysicalGroup(2, [tag for _, tag in gmsh.model.getEntities(2)], 1)
    gmsh.option.setNumber("Mesh.CharacteristicLengthMax", h)
    gmsh.model.mesh.generate(2)
    msh = gmshio.model_to_mesh(gmsh.model, MPI.COMM_WORLD, 0, gdim=2).mesh
    gmsh.finalize()
    return msh


def polygon_vertices(kind, p):
    """Vertices of the star and gear templates (README / domains.py), when not given."""
    c = p.get("center", (0, 0))
    if kind == "star":
        n, r_in, r_out = p.get("points", 5), p.get("inner_radius", .3), p.get("outer_radius", .7)
        radii = [r_out if k % 2 == 0 else r_in for k in range(2 * n)]
        return [(c[0] + r * math.cos(math.pi / 2 + k * math.pi / n), c[1] + r * math.sin(math.pi / 2 + k * math.pi / n))
                for k, r in enumerate(radii)]
    teeth, base = p.get("teeth", 8), p.get("base_radius", .5)
    tip, pitch = base + p.get("tooth_height", .2), 2 * math.pi / teeth
    return [(c[0] + r * math.cos(a), c[1] + r * math.sin(a)) for k in range(teeth)
            for r, a in ((base, k * pitch), (tip, k * pitch), (tip, (k + .5) * pitch), (base, (k + .5) * pitch))]


# ---- boundary facets by tag ----

def facets(msh, case_spec, on):
    """Exterior facets carrying any of the tags ``on``, found from facet midpoints."""
    tdim = msh.topology.dim
    msh.topology.create_connectivity(tdim - 1, tdim)
    exterior = mesh.exterior_facet_indices(msh.topology)
    mid = mesh.compute_midpoints(msh, tdim - 1, exterior)
    bounds, tol = case_spec["domain"]["bounds"], 1e-8 * extent(case_spec)
    sides = {f"{'xyz'[a]}_{end}": np.abs(mid[:, a] - bounds[a][i]) < tol
             for a in range(tdim) for i, end in enumerate(("min", "max"))}
    p = case_spec["domain"].get("geometry_params") or {}
    keep = np.zeros(len(exterior), dtype=bool)
    for tag in [on] if isinstance(on, str) else on:
        if tag == "boundary":
            keep[:] = True
        elif tag in sides:
            keep |= sides[tag]
        elif tag in ("hole", "holes"):  # whatever is not on the outer rectangle
            keep |= ~np.any(list(sides.values()), axis=0)
        elif tag in ("inner", "outer"):  # annuli: the facets nearer to that circle
            if case_spec["domain"]["type"] == "annulus":
                c = p.get("center", (.5, .5))
                circles = {"inner": (c, p.get("inner_radius", .25)), "outer": (c, p.get("outer_radius", .5))}
            else:
                inner, outer = p.get("inner", {}), p.get("outer", {})
                circles = {"inner": (inner.get("center", (.65, .5)), inner.get("radius", .2)),
                           "outer": (outer.get("center", (.5, .5)), outer.get("radius", .5))}
            d = {k: np.abs(np.hypot(mid[:, 0] - c[0], mid[:, 1] - c[1]) - r) for k, (c, r) in circles.items()}
            keep |= (d["inner"] < d["outer"]) if tag == "inner" else (d["outer"] <= d["inner"])
        elif tag in ("arc", "edge_start", "edge_end"):  # sector: straight edges through the centre
            c, angle = p.get("center", (0, 0)), math.radians(p.get("angle_deg", 90.0))
            dx, dy = mid[:, 0] - c[0], mid[:, 1] - c[1]
            start, end = np.abs(dy) < tol, np.abs(dx * math.sin(angle) - dy * math.cos(angle)) < tol
            keep |= {"edge_start": start, "edge_end": end & ~start, "arc": ~start & ~end}[tag]
        else:
            raise NotImplementedError(f"unknown boundary tag {tag!r}")
    return exterior[keep]


def conditions(case_spec, kind):
    value = case_spec.get("bc", {}).get(kind)
    return [] if value is None else value if isinstance(value, list) else [value]


def dirichlet(V, case_spec, t=0.0, kind="dirichlet", sub=None):
    """DirichletBCs of every ``kind`` condition (V may be a subspace of a mixed space,
    then ``sub`` is it); returns (bcs, update), update() re-interpolates after t changes."""
    msh = V.mesh
    space = sub.collapse()[0] if sub is not None else V
    bcs, pairs = [], []
    for condition in conditions(case_spec, kind):
        g = fem.Function(space)
        expression = fem.Expression(expr(condition["value"], msh, t), space.element.interpolation_points)
        g.interpolate(expression)
        pairs.append((g, expression))
        where = facets(msh, case_spec, condition["on"])
        if sub is None:
            bcs.append(fem.dirichletbc(g, fem.locate_dofs_topological(V, msh.topology.dim - 1, where)))
        else:
            dofs = fem.locate_dofs_topological((sub, space), msh.topology.dim - 1, where)
            bcs.append(fem.dirichletbc(g, dofs, sub))

    def update():
        for g, expression in pairs:
            g.interpolate(expression)
    return bcs, update


_MEASURES = {}


def natural(case_spec, msh, w, v, t=0.0):
    """Boundary term of the weak form for Neumann (c du/dn = g) and Robin
    (c du/dn + alpha u = g) data: sum of (g - alpha w) v ds; add it to the right side."""
    items = conditions(case_spec, "neumann") + conditions(case_spec, "robin")
    if not items:
        return 0
    if id(msh) not in _MEASURES:  # one Measure per mesh, shared by every form
        found = [facets(msh, case_spec, c["on"]) for c in items]
        entities = np.concatenate(found).astype(np.int32)
        markers = np.concatenate([np.full(len(f), i + 1, np.int32) for i, f in enumerate(found)])
        order = np.argsort(entities)
        tags = mesh.meshtags(msh, msh.topology.dim - 1, entities[order], markers[order])
        _MEASURES[id(msh)] = ufl.Measure("ds", domain=msh, subdomain_data=tags)
    ds = _MEASURES[id(msh)]
    term = 0
    for i, c in enumerate(items):
        alpha = expr(c["alpha"], msh, t) if "alpha" in c else 0
        term += (expr(c["value"], msh, t) - alpha * w) * v * ds(i + 1)
    return term


def taylor_hood(case_spec, msh):
    """The P2-P1 space, its boundary conditions (velocity data, a pressure pin when every
    side has velocity data) and the forcing."""
    dim = msh.geometry.dim
    cell = msh.basix_cell()
    W = fem.functionspace(msh, basix.ufl.mixed_element([basix.ufl.element("Lagrange", cell, 2, shape=(dim,)),
                                                        basix.ufl.element("Lagrange", cell, 1)]))
    bcs, _ = dirichlet(W.sub(0), case_spec, sub=W.sub(0))
    dirichlet_facets = sum(len(facets(msh, case_spec, c["on"])) for c in conditions(case_spec, "dirichlet"))
    if dirichlet_facets >= len(facets(msh, case_spec, "boundary")):
        Q = W.sub(1).collapse()[0]
        corner = facets(msh, case_spec, "boundary")[:1]
        dofs = fem.locate_dofs_topological((W.sub(1), Q), msh.topology.dim - 1, corner)
        bcs.append(fem.dirichletbc(fem.Function(Q), [dofs[0][:1], dofs[1][:1]], W.sub(1)))
    return W, bcs, expr(case_spec["pde"]["forcing"]["value"], msh)


# ---- time, solves ----

def time_steps(case_spec):
    """(t0, dt, steps): dt = 0.01, or smaller so that there are at least 10 steps."""
    t0, t_end = case_spec["pde"]["time"].get("t0", 0.0), case_spec["pde"]["time"]["t_end"]
    steps = max(10, math.ceil((t_end - t0) / 0.01 - 1e-9))
    return t0, (t_end - t0) / steps, steps


def linear_problem(F, bcs, name, u=None):
    """A LinearProblem (MUMPS LU) for the linear form F(trial, test) = 0; u receives
    the solution. Built once, it can be solved again after its data changed."""
    return dolfinx.fem.petsc.LinearProblem(ufl.lhs(F), ufl.rhs(F), bcs=bcs, u=u, petsc_options=LU,
                                           petsc_options_prefix=name)


def lu_solve(problem):
    """Solve a LinearProblem and check that the LU solve succeeded."""
    uh = problem.solve()
    if problem.solver.getConvergedReason() <= 0:
        raise RuntimeError(f"LU solve failed (KSP reason {problem.solver.getConvergedReason()})")
    return uh


def linear_solve(F, bcs, name):
    return lu_solve(linear_problem(F, bcs, name))


def newton(F, u, bcs, name):
    """A Newton solver (PETSc SNES, MUMPS LU) for F(u; test) = 0; call .solve() on it."""
    return dolfinx.fem.petsc.NonlinearProblem(F, u, bcs=bcs, petsc_options=NEWTON, petsc_options_prefix=name)


def newton_solve(problem):
    problem.solve()
    reason = problem.solver.getConvergedReason()
    if reason <= 0:
        raise RuntimeError(f"Newton did not converge (SNES reason {reason})")
    return problem.solver.getIterationNumber()


# ---- the evaluation grid and the output files ----

def grid_axes(case_spec):
    g = case_spec["eval_grid"]
    counts = [g["nx"], g["ny"]] + ([g["nz"]] if g.get("nz") else [])
    return [np.linspace(g["bbox"][2 * i], g["bbox"][2 * i + 1], n) for i, n in enumerate(counts)]


def sample(uh, case_spec):
    """uh at the grid points, shape (ny, nx) or (nz, ny, nx) [+ (components,)]. Points in
    no cell (between a polygonal mesh and a curved boundary) take the nearest cell's
    polynomial if that cell is within one mesh size; the rest stay NaN (outside)."""
    axes = grid_axes(case_spec)
    shape = tuple(len(a) for a in reversed(axes))
    mesh_grid = np.meshgrid(*reversed(axes), indexing="ij")
    points = np.zeros((mesh_grid[0].size, 3))
    for i, coordinate in enumerate(reversed(mesh_grid)):
        points[:, i] = coordinate.ravel()
    msh = uh.function_space.mesh
    tdim = msh.topology.dim
    tree = geometry.bb_tree(msh, tdim)
    hits = geometry.compute_colliding_cells(msh, geometry.compute_collisions_points(tree, points), points)
    counts = np.diff(hits.offsets)
    cells = np.full(len(points), -1, dtype=np.int32)
    cells[counts > 0] = hits.array[hits.offsets[:-1][counts > 0]]
    missing = np.flatnonzero(cells < 0)
    h = extent(case_spec) / (CELLS_3D if tdim == 3 else CELLS_2D)
    if len(missing):  # keep the points near the mesh (a cheap search with padded boxes)
        near = geometry.compute_collisions_points(geometry.bb_tree(msh, tdim, padding=h), points[missing])
        missing = missing[np.diff(near.offsets) > 0]
    if len(missing):
        all_cells = np.arange(msh.topology.index_map(tdim).size_local, dtype=np.int32)
        nearest = geometry.compute_closest_entity(tree, geometry.create_midpoint_tree(msh, tdim, all_cells),
                                                  msh, points[missing])
        close = np.sqrt(geometry.squared_distance(msh, tdim, nearest, points[missing])) < h
        cells[missing[close]] = nearest[close]
    size = int(np.prod(uh.ufl_shape)) if uh.ufl_shape else 1
    values = np.full((len(points), size), np.nan)
    found = cells >= 0
    values[found] = uh.eval(points[found], cells[found]).reshape(-1, size)
    return values.reshape(shape + ((size,) if uh.ufl_shape else ()))


def finish(case_spec, uh, started, info):
    """Write solution.npz (the arrays the case asks for) and meta.json."""
    values, axes = sample(uh, case_spec), grid_axes(case_spec)
    output = case_spec["output"]
    names = output.get("components") or (["u"] if output.get("field", "scalar") == "scalar" else [output["field"]])
    arrays = {}
    for name in names:
        if values.ndim == len(axes):
            arrays[name] = values
        elif name.endswith("_magnitude"):
            arrays[name] = np.linalg.norm(values, axis=-1)
        else:  # u_x, velocity_y, ...
            arrays[name] = values[..., "xyz".index(name[-1])]
    np.savez("solution.npz", **arrays, **dict(zip("xyz", axes)))
    info = dict(info, cells_per_side=CELLS_3D if len(axes) == 3 else CELLS_2D, solver="mumps lu")
    with open("meta.json", "w") as handle:
        json.dump({"wall_time_sec": time.perf_counter() - started, "status": "success", "solver_info": info}, handle)
