"""Shared pieces of the DOLFINx oracle: meshes, expressions, boundary tags,
sampling on the evaluation grid and the output files.

Everything here works from the agent view (case_spec) alone, like any submission.
"""

import json
import math

import numpy as np
from mpi4py import MPI

import dolfinx
import dolfinx.fem.petsc
import ufl
from dolfinx import fem, geometry, mesh

from _calibration import calibration_setting, discretization, largest_time_step
from _expressions import expression_to_ufl
from _geometry import grade_towards, has_curves, occ_surface, reentrant_corners
from _outputs import grid_points, write_outputs

# ---- expressions: case strings -> UFL, parsed without eval ----

def to_ufl(expression, domain, t=None, u=None):
    """A case expression (string or number) as a UFL expression on ``domain``.

    ``t`` is a dolfinx Constant for time-dependent data, so forms compile once; ``u``
    stands for the unknown in expressions of it (reaction terms).
    """
    def constant(value):
        return fem.Constant(domain, dolfinx.default_scalar_type(value))

    if isinstance(expression, (int, float)):
        return constant(expression)
    return expression_to_ufl(expression, ufl.SpatialCoordinate(domain), constant, t, u)


# ---- meshes ----

def domain_size(domain_spec):
    bounds = np.asarray(domain_spec.get("bounds", [[0, 1], [0, 1]]), dtype=float)
    return float(np.max(bounds[:, 1] - bounds[:, 0]))


# The strong oracle (not a calibration run) meshes curved boundaries with quadratic cells
# and grades the mesh towards re-entrant corners (down to CORNER_SIZE x h): with straight
# cells and a uniform mesh its P2 error was geometry- and singularity-bound, larger than
# the P1 calibration baselines' on those domains.
CORNER_SIZE = 0.1


def build_mesh(domain_spec, h, degree=1, corner_size=CORNER_SIZE):
    """A mesh of the case's domain with cell size about h (gmsh for curved shapes);
    ``corner_size`` x h at re-entrant corners (1: no grading)."""
    kind = domain_spec["type"]
    params = domain_spec.get("geometry_params", {})
    comm = MPI.COMM_WORLD
    if kind in ("unit_square", "periodic_square"):
        x0, x1, y0, y1 = params.get("bounds", (0, 1, 0, 1))
        n = max(2, round(max(x1 - x0, y1 - y0) / h))
        return mesh.create_rectangle(comm, [[x0, y0], [x1, y1]], [n, n], mesh.CellType.triangle,
                                     diagonal=mesh.DiagonalType.crossed if degree == 1 else mesh.DiagonalType.right)
    if kind == "unit_cube":
        n = max(2, round(1 / h))
        return mesh.create_unit_cube(comm, n, n, n, mesh.CellType.tetrahedron)
    return _gmsh_mesh(kind, params, h, degree, corner_size)


def _gmsh_mesh(kind, params, h, degree, corner_size):
    import gmsh
    from dolfinx.io import gmsh as gmshio

    gmsh.initialize(["-noenv"])
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.model.add(kind)
        surface = occ_surface(gmsh.model.occ, kind, params)
        gmsh.model.occ.synchronize()
        gmsh.model.addPhysicalGroup(2, [surface], 1)
        finest = h
        if calibration_setting() is None:  # the strong oracle: curved cells, graded corners
            if has_curves(gmsh.model, surface):
                degree = 2
            corners = reentrant_corners(gmsh.model, surface, 0.01 * h) if corner_size < 1 else []
            if corners:
                finest = corner_size * h
                grade_towards(gmsh.model, corners, h, finest)
                # gmsh otherwise spreads the corner size along every boundary curve
                # into the interior: a star went from 1.4k to 22.6k cells, not 2.3k.
                gmsh.option.setNumber("Mesh.MeshSizeExtendFromBoundary", 0)
        gmsh.option.setNumber("Mesh.CharacteristicLengthMin", finest)
        gmsh.option.setNumber("Mesh.CharacteristicLengthMax", h)
        gmsh.option.setNumber("Mesh.ElementOrder", degree)
        gmsh.model.mesh.generate(2)
        return gmshio.model_to_mesh(gmsh.model, MPI.COMM_WORLD, 0, gdim=2).mesh
    finally:
        gmsh.finalize()


# ---- boundary tags ----

def conditions(bc, kind):
    """The case's conditions of one kind as a list (a record may give one or several)."""
    value = bc.get(kind)
    return [] if value is None else value if isinstance(value, list) else [value]


def boundary_facets(domain, domain_spec, tags):
    """Exterior facet indices carrying any of ``tags`` (see the case's domain template)."""
    tdim = domain.topology.dim
    domain.topology.create_connectivity(tdim - 1, tdim)
    if isinstance(tags, str):
        tags = [tags]
    exterior = mesh.exterior_facet_indices(domain.topology)
    if "boundary" in tags:
        return exterior
    params = domain_spec.get("geometry_params", {})
    lo_hi = params.get("bounds") or params.get("outer") or (0, 1, 0, 1, 0, 1)
    axis = {"x": 0, "y": 1, "z": 2}
    selected = []
    for tag in tags:
        if tag[:1] in axis and tag[1:] in ("_min", "_max"):
            a = axis[tag[0]]
            value = lo_hi[2 * a + (tag.endswith("_max"))]
            selected.append(mesh.locate_entities_boundary(domain, tdim - 1,
                                                          lambda p, a=a, v=value: np.isclose(p[a], v)))
        elif tag in ("hole", "holes"):  # what is not on the outer rectangle
            sides = [boundary_facets(domain, domain_spec, side) for side in ("x_min", "x_max", "y_min", "y_max")]
            selected.append(np.setdiff1d(exterior, np.concatenate(sides)))
        elif tag in ("inner", "outer") and domain_spec["type"] in ("annulus", "eccentric_annulus"):
            selected.append(_annulus_side(domain, params, exterior, tag))
        else:
            raise NotImplementedError(f"the oracle cannot locate boundary tag {tag!r} yet")
    return np.unique(np.concatenate(selected)).astype(np.int32)


def _annulus_side(domain, params, exterior, tag):
    """Facets of the inner or outer circle: the ones nearer that circle."""
    if "inner_radius" in params:  # concentric
        center = np.array(params.get("center", (0.5, 0.5)), dtype=float)
        inner = (center, params.get("inner_radius", 0.25))
        outer = (center, params.get("outer_radius", 0.5))
    else:
        outer = (np.array(params["outer"]["center"], float), params["outer"]["radius"])
        inner = (np.array(params["inner"]["center"], float), params["inner"]["radius"])
    midpoints = mesh.compute_midpoints(domain, domain.topology.dim - 1, exterior)[:, :2]
    distance = {name: np.abs(np.linalg.norm(midpoints - c, axis=1) - r) for name, (c, r) in
                (("inner", inner), ("outer", outer))}
    nearer = distance["inner"] < distance["outer"]
    return exterior[nearer if tag == "inner" else ~nearer]


def check_bc_kinds(bc, handled):
    """Refuse, loudly, boundary conditions an oracle does not implement (rather than
    silently solving another problem). ``handled``: the kinds besides Dirichlet."""
    for kind in ("neumann", "robin", "periodic", "laplacian"):
        if bc.get(kind) and kind not in handled:
            raise NotImplementedError(f"this DOLFINx oracle has no {kind} boundary conditions")


def dirichlet_conditions(V, domain_spec, bc, t=None):
    """(DirichletBC list, refresh()) for every Dirichlet condition; refresh()
    re-interpolates time-dependent data after ``t`` changes."""
    msh = V.mesh
    bcs, pairs = [], []
    for condition in conditions(bc, "dirichlet"):
        facets = boundary_facets(msh, domain_spec, condition["on"])
        value = fem.Function(V)
        expression = fem.Expression(to_ufl(condition["value"], msh, t), V.element.interpolation_points)
        value.interpolate(expression)
        pairs.append((value, expression))
        bcs.append(fem.dirichletbc(value, fem.locate_dofs_topological(V, msh.topology.dim - 1, facets)))

    def refresh():
        for value, expression in pairs:
            value.interpolate(expression)

    return bcs, refresh


def natural_term(w, v, domain_spec, bc, t=None):
    """The boundary integrals of the natural conditions, to add to the right-hand side:
    g v ds on Neumann sides (g = kappa du/dn) and (g - alpha w) v ds on Robin sides
    (kappa du/dn + alpha u = g), with ``w`` the unknown (a TrialFunction or Function)."""
    msh = v.ufl_function_space().mesh
    items = [(kind, c) for kind in ("neumann", "robin") for c in conditions(bc, kind)]
    if not items:
        return 0
    ds = _natural_measure(msh, domain_spec, items)
    term = 0
    for i, (kind, condition) in enumerate(items):
        flux = to_ufl(condition["value"], msh, t)
        if kind == "robin":
            flux = flux - to_ufl(condition.get("alpha", 1.0), msh, t) * w
        term = term + flux * v * ds(i + 1)
    return term


_MEASURES = {}


def _natural_measure(msh, domain_spec, items):
    """ds with marker i + 1 on the facets of items[i]; one Measure per mesh and data, as
    every form must share its subdomain data."""
    key = (id(msh), json.dumps(items, sort_keys=True))
    if key not in _MEASURES:
        facet_lists = [boundary_facets(msh, domain_spec, c["on"]) for _, c in items]
        entities = np.concatenate(facet_lists).astype(np.int32)
        markers = np.concatenate([np.full(len(f), i + 1, dtype=np.int32) for i, f in enumerate(facet_lists)])
        order = np.argsort(entities, kind="stable")
        tags = mesh.meshtags(msh, msh.topology.dim - 1, entities[order], markers[order])
        _MEASURES[key] = (msh, ufl.Measure("ds", domain=msh, subdomain_data=tags))
    return _MEASURES[key][1]


# ---- sampling on the evaluation grid ----

def sample_on_grid(u, eval_grid, h):
    """Values of u at the grid points, shape grid + (value size,) for vector u: points
    just outside the discrete domain (a polygon inscribed in a curved boundary) take the
    nearest cell's polynomial; points farther away than one cell are NaN (outside)."""
    axes, grid, shape = grid_points(eval_grid)
    points = np.zeros((len(grid), 3))
    points[:, :grid.shape[1]] = grid
    domain = u.function_space.mesh
    tdim = domain.topology.dim
    tree = geometry.bb_tree(domain, tdim)
    candidates = geometry.compute_collisions_points(tree, points)
    colliding = geometry.compute_colliding_cells(domain, candidates, points)
    cells = np.full(len(points), -1, dtype=np.int32)
    for i in range(len(points)):
        links = colliding.links(i)
        if len(links):
            cells[i] = links[0]
    missing = np.flatnonzero(cells < 0)
    missing = missing[_near(points[missing], domain.geometry.x, 1.5 * h)]  # far points: outside, no search
    if len(missing):
        domain.topology.create_entities(tdim)
        midpoint_tree = geometry.create_midpoint_tree(domain, tdim, np.arange(
            domain.topology.index_map(tdim).size_local, dtype=np.int32))
        nearest = geometry.compute_closest_entity(tree, midpoint_tree, domain, points[missing])
        vertices = domain.geometry.x[domain.geometry.dofmaps[0][nearest]]  # (missing, nodes, 3)
        gap = np.linalg.norm(vertices - points[missing][:, None, :], axis=2).min(axis=1)
        close = gap <= 1.5 * h
        cells[missing[close]] = nearest[close]
    size = int(np.prod(u.ufl_shape)) if u.ufl_shape else 1
    values = np.full((len(points), size), np.nan)
    found = cells >= 0
    if found.any():
        try:
            values[found] = u.eval(points[found], cells[found]).reshape(-1, size)
        except RuntimeError:  # curved cells: the pull-back of a point far outside one may not converge
            for i in np.flatnonzero(found):
                try:
                    values[i] = u.eval(points[i:i + 1], cells[i:i + 1]).reshape(size)
                except RuntimeError:
                    pass  # NaN: outside the domain (a point inside lies in or next to a cell)
    return axes, values.reshape(shape + ((size,) if u.ufl_shape else ()))


def _near(points, vertices, radius):
    """Which points may lie within ``radius`` of a mesh vertex: those in a bin (of side
    radius) next to a bin holding a vertex. A cheap filter before the closest-entity
    search, which costs seconds for the thousands of grid points far outside a disk."""
    def keys(coordinates, shift=(0, 0, 0)):
        bins = np.floor(coordinates / radius).astype(np.int64) + np.asarray(shift)
        return (bins[:, 0] * 1_000_003 + bins[:, 1]) * 1_000_033 + bins[:, 2]

    occupied = np.unique(keys(vertices))
    near = np.zeros(len(points), dtype=bool)
    for shift in np.ndindex(3, 3, 3):
        near |= np.isin(keys(points, np.asarray(shift) - 1), occupied)
    return near


# ---- outputs ----

def linear_solver(A, prefix, options):
    """A PETSc KSP on A with the given options; returns the KSP."""
    from petsc4py import PETSc

    ksp = PETSc.KSP().create(A.getComm())
    ksp.setOperators(A)
    ksp.setOptionsPrefix(prefix)
    opts = PETSc.Options()
    for key, value in options.items():
        opts[f"{prefix}{key}"] = value
    ksp.setFromOptions()
    return ksp


DT_MAX = 0.005  # largest time step of the time-dependent oracles


def time_grid(time_spec, min_steps=10, strong_dt_share=1.0):
    """(t0, dt, steps) with steps >= min_steps and dt <= DT_MAX (or the calibration's dt);
    ``strong_dt_share`` x DT_MAX outside calibration runs (a family whose time error leads)."""
    t0, t_end = time_spec.get("t0", 0.0), time_spec["t_end"]
    largest = largest_time_step(DT_MAX) if calibration_setting() is not None else DT_MAX * strong_dt_share
    steps = max(min_steps, math.ceil((t_end - t0) / largest))
    return t0, (t_end - t0) / steps, steps


STARTUP_SUBSTEPS = 4  # the first step: implicit Euler sub-steps (Rannacher start)


class Stepping:
    """theta and dt of a theta scheme as Constants in the forms, and the schedule the
    time loops follow: the first step as STARTUP_SUBSTEPS implicit Euler sub-steps, then
    Crank-Nicolson. Crank-Nicolson alone rings on data that do not fit at t0 (a source
    switched on against zero initial and boundary values); the sub-steps damp that at a
    cost of O(dt^2 / 8) once."""

    def __init__(self, msh, dt):
        from petsc4py import PETSc

        self.theta = fem.Constant(msh, PETSc.ScalarType(0.5))
        self.dt = fem.Constant(msh, PETSc.ScalarType(dt))

    def schedule(self, t0, dt, steps):
        """(t_old, t_new, theta, dt) of every (sub-)step."""
        small = dt / STARTUP_SUBSTEPS
        for k in range(STARTUP_SUBSTEPS):
            yield t0 + k * small, t0 + (k + 1) * small, 1.0, small
        for step in range(2, steps + 1):
            yield t0 + (step - 1) * dt, t0 + step * dt, 0.5, dt


def run_linear_steps(a, L, dirichlet, refresh, u_new, u_old, t_old, t_new, t0, dt, steps, prefix, periodic=None,
                     stepping=None):
    """Time loop of a linear one-step scheme: the matrix is assembled and factorized once
    per (theta, dt) of the Stepping schedule (or once, without one); each step
    re-assembles only the right-hand side. Returns the worst KSP reason."""
    solvers = {}
    reason = 1
    schedule = (stepping.schedule(t0, dt, steps) if stepping is not None
                else ((t0 + (k - 1) * dt, t0 + k * dt, None, dt) for k in range(1, steps + 1)))
    for old, new, theta, step_dt in schedule:
        t_old.value, t_new.value = old, new
        if stepping is not None:
            stepping.theta.value, stepping.dt.value = theta, step_dt
        if (theta, step_dt) not in solvers:  # assembled with this step's theta and dt
            solvers[theta, step_dt] = LinearStep(a, L, dirichlet, u_new, prefix, periodic)
        refresh()
        reason = min(reason, solvers[theta, step_dt].solve())
        u_old.x.array[:] = u_new.x.array
    return reason


class LinearStep:
    """A fixed matrix, factorized once; solve() re-assembles the right-hand side L with
    the current Dirichlet data and writes the solution into u. Returns the KSP reason.
    With a PeriodicMap the system is the periodic one, (P^T A P) u_r = P^T b."""

    def __init__(self, a, L, dirichlet, u, prefix, periodic=None):
        from dolfinx.fem.petsc import assemble_matrix, create_vector

        self.a, self.L = fem.form(a), fem.form(L)
        self.dirichlet, self.u, self.periodic = dirichlet, u, periodic
        A = assemble_matrix(self.a, bcs=dirichlet)
        A.assemble()
        if periodic is not None:
            A = periodic.reduce_matrix(A)
            self.u_r = periodic.new_reduced_vector()
        self.ksp = linear_solver(A, prefix, direct_solver_options())
        self.b = create_vector(u.function_space)

    def solve(self):
        from dolfinx.fem.petsc import apply_lifting, assemble_vector, set_bc
        from petsc4py import PETSc

        with self.b.localForm() as local:
            local.set(0.0)
        assemble_vector(self.b, self.L)
        apply_lifting(self.b, [self.a], [self.dirichlet])
        self.b.ghostUpdate(addv=PETSc.InsertMode.ADD, mode=PETSc.ScatterMode.REVERSE)
        set_bc(self.b, self.dirichlet)
        if self.periodic is None:
            self.ksp.solve(self.b, self.u.x.petsc_vec)
        else:
            self.ksp.solve(self.periodic.reduce_vector(self.b), self.u_r)
            self.periodic.expand(self.u_r, self.u.x.petsc_vec)
        self.u.x.scatter_forward()
        return self.ksp.getConvergedReason()


def solve_linear(a, L, dirichlet, V, prefix, periodic=None):
    """One linear solve (direct LU); returns (solution Function, KSP reason)."""
    uh = fem.Function(V)
    return uh, LinearStep(a, L, dirichlet, uh, prefix, periodic).solve()


def covers_whole_boundary(msh, domain_spec, condition_list):
    """Whether Dirichlet conditions are given on every exterior facet (then the
    pressure of an incompressible flow is only known up to a constant)."""
    exterior = mesh.exterior_facet_indices(msh.topology)
    given = np.unique(np.concatenate([boundary_facets(msh, domain_spec, c["on"]) for c in condition_list]
                                     or [np.zeros(0, dtype=np.int32)]))
    return len(np.setdiff1d(exterior, given)) == 0


def vector_dirichlet_conditions(W, V_sub, domain_spec, bc):
    """Dirichlet conditions on the vector part of W (or on W itself when V_sub is None)."""
    msh = W.mesh
    bcs = []
    space = V_sub.collapse()[0] if V_sub is not None else W
    for condition in conditions(bc, "dirichlet"):
        facets = boundary_facets(msh, domain_spec, condition["on"])
        value = fem.Function(space)
        components = [to_ufl(c, msh) for c in condition["value"]]
        value.interpolate(fem.Expression(ufl.as_vector(components), space.element.interpolation_points))
        if V_sub is None:
            dofs = fem.locate_dofs_topological(W, msh.topology.dim - 1, facets)
            bcs.append(fem.dirichletbc(value, dofs))
        else:
            dofs = fem.locate_dofs_topological((V_sub, space), msh.topology.dim - 1, facets)
            bcs.append(fem.dirichletbc(value, dofs, V_sub))
    return bcs


def pressure_pin(W, msh):
    """Fix p = 0 at one mesh vertex (pure-Dirichlet flows): removes the constant null space."""
    Q_sub = W.sub(1)
    Q = Q_sub.collapse()[0]
    corner = msh.geometry.x[0]
    dim = msh.geometry.dim
    dofs = fem.locate_dofs_geometrical(
        (Q_sub, Q), lambda p: np.all([np.isclose(p[i], corner[i]) for i in range(dim)], axis=0))
    zero = fem.Function(Q)
    return fem.dirichletbc(zero, dofs, Q_sub)


def forcing_of(pde, components=None):
    """The case's source term; a case without one has f = 0 (a vector for vector PDEs)."""
    if "forcing" in pde:
        return pde["forcing"]["value"]
    return [0.0] * components if components else 0.0


def vector_forcing(pde, msh):
    return ufl.as_vector([to_ufl(c, msh) for c in forcing_of(pde, msh.geometry.dim)])


class Newton:
    """Newton's method for F(u) = 0 with Dirichlet data and, optionally, periodicity:
    J du = -F on the (periodic) system, MUMPS LU, stopping at ||F|| <= max(atol,
    rtol ||F_0||). ``solve()`` returns (converged, iterations)."""

    def __init__(self, F, u, dirichlet, prefix, periodic=None, rtol=1e-10, atol=1e-12, max_it=25):
        from dolfinx.fem.petsc import create_matrix, create_vector

        self.F, self.J = fem.form(F), fem.form(ufl.derivative(F, u))
        self.u, self.dirichlet, self.periodic = u, dirichlet, periodic
        self.rtol, self.atol, self.max_it, self.prefix = rtol, atol, max_it, prefix
        self.A, self.b = create_matrix(self.J), create_vector(u.function_space)
        self.du = self.b.duplicate()

    def _residual(self):
        from dolfinx.fem.petsc import apply_lifting, assemble_vector, set_bc
        from petsc4py import PETSc

        with self.b.localForm() as local:
            local.set(0.0)
        assemble_vector(self.b, self.F)
        apply_lifting(self.b, [self.J], [self.dirichlet], x0=[self.u.x.petsc_vec], alpha=-1.0)
        self.b.ghostUpdate(addv=PETSc.InsertMode.ADD, mode=PETSc.ScatterMode.REVERSE)
        set_bc(self.b, self.dirichlet, self.u.x.petsc_vec, -1.0)
        return self.b if self.periodic is None else self.periodic.reduce_vector(self.b)

    def solve(self):
        from dolfinx.fem.petsc import assemble_matrix

        first = None
        for iteration in range(self.max_it + 1):
            residual = self._residual()
            norm = residual.norm()
            first = norm if first is None else first
            if norm <= max(self.atol, self.rtol * first):
                return True, iteration
            if iteration == self.max_it or not np.isfinite(norm):
                return False, iteration
            self.A.zeroEntries()
            assemble_matrix(self.A, self.J, bcs=self.dirichlet)
            self.A.assemble()
            A = self.A if self.periodic is None else self.periodic.reduce_matrix(self.A)
            ksp = linear_solver(A, self.prefix, direct_solver_options())
            step = residual.duplicate()
            ksp.solve(residual, step)
            if ksp.getConvergedReason() <= 0:
                return False, iteration
            if self.periodic is not None:
                self.periodic.expand(step, self.du)
                step = self.du
            self.u.x.petsc_vec.axpy(-1.0, step)
            self.u.x.scatter_forward()
            ksp.destroy()
        return False, self.max_it


def run_newton_steps(F, uh, u_old, dirichlet, refresh, t_old, t_new, t0, dt, steps, prefix, periodic, stepping):
    """Time loop of a nonlinear theta scheme with residual F(uh; u_old), following the
    Stepping schedule: one Newton solve per step. Returns (all converged, iterations)."""
    newton = Newton(F, uh, dirichlet, prefix, periodic)
    converged, iterations = True, 0
    for old, new, theta, step_dt in stepping.schedule(t0, dt, steps):
        t_old.value, t_new.value = old, new
        stepping.theta.value, stepping.dt.value = theta, step_dt
        refresh()
        ok, count = newton.solve()
        converged, iterations = converged and ok, iterations + count
        if not ok:
            break
        u_old.x.array[:] = uh.x.array
    return converged, iterations


SCALAR_BC_KINDS = ("neumann", "robin", "periodic")  # what the scalar second-order oracles implement


def cell_diameter(msh):
    """The cell diameter as a UFL coefficient: ufl.CellDiameter on straight cells, and on
    quadratic (curved) cells, which FFCx cannot take it of, the vertices' diameter per cell."""
    if msh.geometry.cmaps[0].degree == 1:
        return ufl.CellDiameter(msh)
    tdim = msh.topology.dim
    cells = np.arange(msh.topology.index_map(tdim).size_local + msh.topology.index_map(tdim).num_ghosts, dtype=np.int32)
    diameter = fem.Function(fem.functionspace(msh, ("DG", 0)))
    diameter.x.array[:] = dolfinx.cpp.mesh.h(msh._cpp_object, tdim, cells)
    return diameter


def element_degree(V):
    return V.ufl_element().embedded_superdegree


def mesh_and_space(case_spec, cells_2d, cells_3d, degree=2, vector=False, bc_kinds=(), corner_size=CORNER_SIZE):
    """(mesh, Lagrange space, h, domain size) at h = L / cells (degree and cells: the
    calibration settings in a calibration run); refuses boundary condition kinds (besides
    Dirichlet) that are not in ``bc_kinds``."""
    check_bc_kinds(case_spec.get("bc", {}), bc_kinds)
    domain_spec = case_spec["domain"]
    dim = 3 if "nz" in case_spec["eval_grid"] else 2
    size = domain_size(domain_spec)
    degree, cells = discretization(degree, cells_3d if dim == 3 else cells_2d)
    h = size / cells
    msh = build_mesh(domain_spec, h, corner_size=corner_size)
    V = fem.functionspace(msh, ("Lagrange", degree, (dim,)) if vector else ("Lagrange", degree))
    return msh, V, h, size


def scalar_transient_setup(case_spec, cells_2d, cells_3d, degree=2, bc_kinds=SCALAR_BC_KINDS, strong_dt_share=1.0,
                           corner_size=CORNER_SIZE):
    """Mesh, space, time grid, time Constants, u_old = ic, uh = copy, Dirichlet data,
    the periodic map (or None)."""
    from petsc4py import PETSc

    from _periodic import periodic_map

    domain_spec, pde, bc = case_spec["domain"], case_spec["pde"], case_spec["bc"]
    msh, V, h, _ = mesh_and_space(case_spec, cells_2d, cells_3d, degree, bc_kinds=bc_kinds, corner_size=corner_size)
    t0, dt, steps = time_grid(pde["time"], strong_dt_share=strong_dt_share)
    t_new, t_old = fem.Constant(msh, PETSc.ScalarType(t0)), fem.Constant(msh, PETSc.ScalarType(t0))
    u_old = fem.Function(V)
    u_old.interpolate(fem.Expression(to_ufl(case_spec["ic"]["value"], msh), V.element.interpolation_points))
    uh = fem.Function(V)
    uh.x.array[:] = u_old.x.array
    dirichlet, refresh = dirichlet_conditions(V, domain_spec, bc, t_new)
    return dict(msh=msh, V=V, h=h, t0=t0, dt=dt, steps=steps, t_new=t_new, t_old=t_old, u_old=u_old, uh=uh,
                dirichlet=dirichlet, refresh=refresh, periodic=periodic_map(V, case_spec, dirichlet))


def solve_crank_nicolson_newton(case_spec, operator, prefix, cells_2d, cells_3d, degree, started,
                                corner_size=CORNER_SIZE):
    """u_t + N(u) = f, with ``operator(w, v)`` the weak form of N (a UFL integrand):
    Crank-Nicolson in time (implicit Euler start), a Newton solve per step; writes the outputs."""
    s = scalar_transient_setup(case_spec, cells_2d, cells_3d, degree, corner_size=corner_size)
    msh, uh, u_old, t_new, t_old, dt = s["msh"], s["uh"], s["u_old"], s["t_new"], s["t_old"], s["dt"]
    domain_spec, bc = case_spec["domain"], case_spec["bc"]
    v = ufl.TestFunction(s["V"])
    forcing = forcing_of(case_spec["pde"])
    stepping = Stepping(msh, dt)
    theta = stepping.theta

    def part(w, when):  # N(w) - f(when) - boundary terms, as a residual integrand
        return ((operator(w, v) - to_ufl(forcing, msh, when) * v) * ufl.dx
                - natural_term(w, v, domain_spec, bc, when))

    F = (uh - u_old) / stepping.dt * v * ufl.dx + theta * part(uh, t_new) + (1 - theta) * part(u_old, t_old)
    converged, newton = run_newton_steps(F, uh, u_old, s["dirichlet"], s["refresh"], t_old, t_new, s["t0"], dt,
                                         s["steps"], prefix, s["periodic"], stepping)
    axes, u_grid = sample_on_grid(uh, case_spec["eval_grid"], s["h"])
    write_outputs(u_grid, axes, started, {
        "mesh_resolution": round(domain_size(domain_spec) / s["h"]), "element_degree": element_degree(s["V"]),
        "num_dofs": s["V"].dofmap.index_map.size_global, "num_time_steps": s["steps"], "dt": dt,
        "time_scheme": "crank_nicolson_euler_start", "newton_iterations": newton, "nonlinear_solver": "newton", "pc_type": "lu",
        "periodic": s["periodic"] is not None, "converged": bool(converged),
    })


def direct_solver_options():
    return {"ksp_type": "preonly", "pc_type": "lu", "pc_factor_mat_solver_type": "mumps"}
