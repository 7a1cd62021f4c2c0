"""Shared pieces of the Firedrake oracle: meshes with named boundary parts, case
expressions as UFL, boundary conditions, sampling on the evaluation grid, output files.

Everything works from the agent view (case_spec) alone, like any submission.
"""

import math

import firedrake as fd
import numpy as np
import ufl

from _calibration import calibration_setting, discretization, largest_time_step
from _expressions import expression_to_ufl
from _geometry import (SURFACE_GROUP, curve_tags, grade_towards, has_curves, occ_surface,
                       reentrant_corners)
from _outputs import grid_points

LU = {"ksp_type": "preonly", "pc_type": "lu", "pc_factor_mat_solver_type": "mumps"}
NEWTON = {"snes_type": "newtonls", "snes_linesearch_type": "basic", "snes_rtol": 1e-10, "snes_atol": 1e-12,
          "snes_max_it": 25, **LU}
BOX_IDS = {"x_min": 1, "x_max": 2, "y_min": 3, "y_max": 4, "z_min": 5, "z_max": 6}  # Firedrake's box meshes

def to_ufl(expression, mesh, t=None, u=None):
    """A case expression (string or number) as UFL on ``mesh``; ``t`` a Constant for
    time-dependent data, ``u`` the unknown in reaction terms."""
    return expression_to_ufl(expression, ufl.SpatialCoordinate(mesh), fd.Constant, t, u)


def domain_size(domain_spec):
    bounds = np.asarray(domain_spec.get("bounds", [[0, 1], [0, 1]]), dtype=float)
    return float(np.max(bounds[:, 1] - bounds[:, 0]))


class Domain:
    """The mesh of a case and its boundary parts: ``ids(tags)`` gives what DirichletBC
    and ds take."""

    straight = None  # a curved mesh's twin with straight cells

    def __init__(self, case_spec, cells_2d, cells_3d):
        spec = case_spec["domain"]
        kind, params = spec["type"], spec.get("geometry_params", {})
        self.dim = 3 if "nz" in case_spec["eval_grid"] else 2
        self.size = domain_size(spec)
        _, cells = discretization(None, cells_3d if self.dim == 3 else cells_2d)  # calibration runs: theirs
        self.h = self.size / cells
        periodic = case_spec.get("bc", {}).get("periodic")
        if kind in ("unit_square", "periodic_square"):
            x0, x1, y0, y1 = params.get("bounds", (0, 1, 0, 1))
            n = max(2, round(max(x1 - x0, y1 - y0) / self.h))
            if periodic:
                directions = periodic["directions"]
                direction = "both" if len(directions) == 2 else directions[0]
                self.mesh = fd.PeriodicRectangleMesh(n, n, x1 - x0, y1 - y0, direction=direction, diagonal="right")
                if (x0, y0) != (0, 0):
                    self.mesh.coordinates.dat.data[:] += (x0, y0)
            else:
                self.mesh = fd.RectangleMesh(n, n, x1 - x0, y1 - y0, originX=x0, originY=y0, diagonal="right")
            self.tags = {name: [i] for name, i in BOX_IDS.items() if i <= 4}
        elif kind == "unit_cube":
            n = max(2, round(1 / self.h))
            self.mesh = fd.UnitCubeMesh(n, n, n)
            self.tags = {name: [i] for name, i in BOX_IDS.items()}
        else:
            strong = calibration_setting() is None
            self.tags, circles = gmsh_domain(kind, params, self.h, "domain.msh", strong)
            self.mesh = fd.Mesh("domain.msh")
            if strong and circles:
                self.straight, self.mesh = self.mesh, curved(self.mesh, circles)

    def cell_diameter(self):
        """Each cell's diameter; TSFC takes CellDiameter on straight cells only, so a curved
        mesh gets its straight twin's (same topology, so the same cell order)."""
        if self.straight is None:
            return ufl.CellDiameter(self.mesh)
        straight = fd.Function(fd.FunctionSpace(self.straight, "DG", 0)).interpolate(ufl.CellDiameter(self.straight))
        diameter = fd.Function(fd.FunctionSpace(self.mesh, "DG", 0))
        diameter.dat.data[:] = straight.dat.data_ro
        return diameter

    def ids(self, on):
        names = [on] if isinstance(on, str) else list(on)
        if "boundary" in names:
            return "on_boundary"
        missing = [name for name in names if name not in self.tags]
        if missing:
            raise NotImplementedError(f"the oracle cannot locate boundary tag(s) {missing}")
        return tuple(sorted({i for name in names for i in self.tags[name]}))



# The strong oracle (not a calibration run) grades the mesh towards re-entrant corners
# (down to CORNER_SIZE x h) and gives curved boundaries quadratic cells, as the DOLFINx
# oracle does: with straight cells and a uniform mesh it was up to 8e-3 from the
# references on annuli, holes and stars (reference-agreement, 51 of 74 records above
# 0.1 x tau_acc), its error bound by geometry and singularities rather than by P2.
CORNER_SIZE = 0.1


def gmsh_domain(kind, params, h, path, strong):
    """Mesh a 2-D template with gmsh at cell size h into ``path``; returns ({tag name:
    [physical curve ids]}, {physical id: (cx, cy, r)} of the circular boundary curves)."""
    import gmsh

    gmsh.initialize(["-noenv"])
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.model.add(kind)
        surface = occ_surface(gmsh.model.occ, kind, params)
        gmsh.model.occ.synchronize()
        curves = [tag for _, tag in gmsh.model.getBoundary([(2, surface)], oriented=False)]
        for curve in curves:
            gmsh.model.addPhysicalGroup(1, [curve], curve)
        gmsh.model.addPhysicalGroup(2, [surface], SURFACE_GROUP)
        tags = curve_tags(gmsh.model, kind, params, curves)
        finest = h
        if strong:
            corners = reentrant_corners(gmsh.model, surface, 0.01 * h)
            if corners:
                finest = CORNER_SIZE * h
                grade_towards(gmsh.model, corners, h, finest)
                gmsh.option.setNumber("Mesh.MeshSizeExtendFromBoundary", 0)  # or the fine size spreads inwards
        circles = {curve: _circle_through(gmsh.model, curve) for curve in curves
                   if strong and has_curves(gmsh.model, surface) and gmsh.model.getType(1, curve) != "Line"}
        gmsh.option.setNumber("Mesh.CharacteristicLengthMin", finest)
        gmsh.option.setNumber("Mesh.CharacteristicLengthMax", h)
        gmsh.option.setNumber("Mesh.MshFileVersion", 2.2)
        gmsh.model.mesh.generate(2)
        gmsh.write(str(path))
        return tags, circles
    finally:
        gmsh.finalize()


def _circle_through(model, curve):
    """(cx, cy, r) of the circle through three points of a curved boundary curve (the
    templates' curves are circles and arcs)."""
    low, high = model.getParametrizationBounds(1, curve)
    (ax, ay), (bx, by), (cx, cy) = (model.getValue(1, curve, [low[0] + f * (high[0] - low[0])])[:2]
                                    for f in (0.1, 0.45, 0.8))
    d = 2 * (ax * (by - cy) + bx * (cy - ay) + cx * (ay - by))
    ux = ((ax**2 + ay**2) * (by - cy) + (bx**2 + by**2) * (cy - ay) + (cx**2 + cy**2) * (ay - by)) / d
    uy = ((ax**2 + ay**2) * (cx - bx) + (bx**2 + by**2) * (ax - cx) + (cx**2 + cy**2) * (bx - ax)) / d
    return ux, uy, math.hypot(ax - ux, ay - uy)


def curved(mesh, circles):
    """The mesh with quadratic cells whose boundary nodes on circular curves lie on them."""
    V = fd.VectorFunctionSpace(mesh, "CG", 2)
    coordinates = fd.Function(V).interpolate(ufl.SpatialCoordinate(mesh))
    points = coordinates.dat.data
    for ident, (cx, cy, r) in circles.items():
        nodes = fd.DirichletBC(V, 0, ident).nodes
        offsets = points[nodes] - (cx, cy)
        points[nodes] = (cx, cy) + r * offsets / np.linalg.norm(offsets, axis=1)[:, None]
    return fd.Mesh(coordinates)

def conditions(bc, kind):
    value = bc.get(kind)
    return [] if value is None else value if isinstance(value, list) else [value]


def check_bc_kinds(bc, handled):
    for kind in ("neumann", "robin", "periodic", "laplacian"):
        if bc.get(kind) and kind not in handled:
            raise NotImplementedError(f"this Firedrake oracle has no {kind} boundary conditions")


class Dirichlet:
    """DirichletBCs of the case on V (or a subspace); refresh() re-interpolates data
    that depends on t after t changed."""

    def __init__(self, V, domain, bc, t=None, vector=False):
        self.pairs, self.bcs = [], []
        for condition in conditions(bc, "dirichlet"):
            value = condition["value"]
            expression = (ufl.as_vector([to_ufl(c, domain.mesh, t) for c in value]) if vector
                          else to_ufl(value, domain.mesh, t))
            if V.parent is not None:  # a subspace (mixed flows, steady): the expression itself
                self.bcs.append(fd.DirichletBC(V, expression, domain.ids(condition["on"])))
                continue
            data = fd.Function(V)
            data.interpolate(expression)
            self.pairs.append((data, expression))
            self.bcs.append(fd.DirichletBC(V, data, domain.ids(condition["on"])))

    def refresh(self):
        for data, expression in self.pairs:
            data.interpolate(expression)


def natural_term(w, v, domain, bc, t=None):
    """g v ds on Neumann parts, (g - alpha w) v ds on Robin parts, for the right-hand side."""
    term = 0
    for kind in ("neumann", "robin"):
        for condition in conditions(bc, kind):
            flux = to_ufl(condition["value"], domain.mesh, t)
            if kind == "robin":
                flux = flux - to_ufl(condition.get("alpha", 1.0), domain.mesh, t) * w
            ids = domain.ids(condition["on"])
            measure = ufl.ds(domain=domain.mesh) if ids == "on_boundary" else ufl.ds(ids, domain=domain.mesh)
            term = term + flux * v * measure
    return term


# ---- the evaluation grid ----

def sample_on_grid(functions, eval_grid):
    """Values of each function at the grid points (a list in, a list out), shape
    grid + (value size,) for vectors. Points outside the mesh within half a cell (the
    sliver between a curved boundary and its polygon) are found by the tolerance; the
    rest are NaN."""
    axes, points, shape = grid_points(eval_grid)
    mesh = functions[0].function_space().mesh()
    evaluator = fd.PointEvaluator(mesh, points, tolerance=0.5, missing_points_behaviour="ignore")
    out = []
    for function in functions:
        values = np.asarray(evaluator.evaluate(function), dtype=float)
        size = int(np.prod(function.ufl_shape)) if function.ufl_shape else 1
        values = values.reshape(len(points), size)
        out.append(values.reshape(shape + ((size,) if function.ufl_shape else ())))
    return axes, out


def converged(solver):
    """Whether a Firedrake variational solver's last solve converged (SNES or KSP)."""
    snes = solver.snes
    return snes.getConvergedReason() > 0 and snes.getKSP().getConvergedReason() > 0


# ---- time stepping ----

DT_MAX = 0.005
STARTUP_SUBSTEPS = 4  # the first step as implicit Euler sub-steps (as the DOLFINx oracle)


def time_grid(time_spec, min_steps=10):
    t0, t_end = time_spec.get("t0", 0.0), time_spec["t_end"]
    steps = max(min_steps, math.ceil((t_end - t0) / largest_time_step(DT_MAX)))
    return t0, (t_end - t0) / steps, steps


class Stepping:
    """theta, dt and the two times as Constants, and the schedule: the first step as
    implicit Euler sub-steps (damps the ringing of data that do not fit at t0), then
    Crank-Nicolson."""

    def __init__(self, time_spec):
        self.t0, self.dt_full, self.steps = time_grid(time_spec)
        self.theta, self.dt = fd.Constant(0.5), fd.Constant(self.dt_full)
        self.t_old, self.t_new = fd.Constant(self.t0), fd.Constant(self.t0)

    def schedule(self):
        """Yields True for the start-up sub-steps and False for the Crank-Nicolson steps,
        with the Constants set for that step."""
        small = self.dt_full / STARTUP_SUBSTEPS
        for k in range(STARTUP_SUBSTEPS):
            self._set(self.t0 + k * small, small, 1.0)
            yield True
        for step in range(2, self.steps + 1):
            self._set(self.t0 + (step - 1) * self.dt_full, self.dt_full, 0.5)
            yield False

    def _set(self, t_old, dt, theta):
        self.t_old.assign(t_old)
        self.t_new.assign(t_old + dt)
        self.dt.assign(dt)
        self.theta.assign(theta)

    def info(self):
        return {"num_time_steps": self.steps, "dt": self.dt_full, "time_scheme": "crank_nicolson_euler_start"}


def run_linear_steps(a, L, u_new, u_old, dirichlet, stepping, prefix):
    """A linear theta scheme: one solver (matrix factorized once) for the start-up
    sub-steps and one for Crank-Nicolson. Returns whether every solve converged."""
    problem = fd.LinearVariationalProblem(a, L, u_new, bcs=dirichlet.bcs, constant_jacobian=True)
    solvers = {}
    ok = True
    for starting in stepping.schedule():
        if starting not in solvers:
            solvers[starting] = fd.LinearVariationalSolver(problem, solver_parameters=LU,
                                                           options_prefix=f"{prefix}{int(starting)}")
        dirichlet.refresh()
        solvers[starting].solve()
        ok = ok and converged(solvers[starting])
        u_old.assign(u_new)
    return ok


def run_newton_steps(F, uh, u_old, dirichlet, stepping, prefix):
    """A nonlinear theta scheme, Newton (MUMPS LU) each step. Returns (converged, iterations)."""
    problem = fd.NonlinearVariationalProblem(F, uh, bcs=dirichlet.bcs)
    solver = fd.NonlinearVariationalSolver(problem, solver_parameters=NEWTON, options_prefix=prefix)
    ok, iterations = True, 0
    for _ in stepping.schedule():
        dirichlet.refresh()
        solver.solve()
        ok = ok and converged(solver)
        iterations += solver.snes.getIterationNumber()
        u_old.assign(uh)
    return ok, iterations


def scalar_space(case_spec, cells_2d, cells_3d, degree, handled=("neumann", "robin", "periodic")):
    check_bc_kinds(case_spec.get("bc", {}), handled)
    domain = Domain(case_spec, cells_2d, cells_3d)
    return domain, fd.FunctionSpace(domain.mesh, "CG", calibrated_degree(degree))


def calibrated_degree(degree):
    """The oracle's degree, or the calibration settings' in a calibration run."""
    return discretization(degree, None)[0]


def element_degree(V):
    return V.ufl_element().embedded_superdegree


def initial_function(V, case_spec, domain):
    u = fd.Function(V)
    u.interpolate(to_ufl(case_spec["ic"]["value"], domain.mesh, fd.Constant(case_spec["pde"]["time"].get("t0", 0.0))))
    return u


def forcing_of(pde):
    return pde.get("forcing", {}).get("value", 0.0)
