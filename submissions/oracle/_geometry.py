"""The 14 domain templates as gmsh OpenCASCADE geometry, shared by the oracles of every
Python library (helpers at the top of a submissions folder travel with each solver).

``mesh_domain(kind, params, h, path)`` meshes a template with cell size h, writes a
gmsh file with one physical group per boundary curve, and returns the boundary tag
names of the template mapped to those group ids (``boundary`` is all of them).
"""

import math

import numpy as np

SURFACE_GROUP = 100000  # physical id of the 2-D domain (curve ids are their gmsh tags)


def _polygon(occ, vertices):
    points = [occ.addPoint(vx, vy, 0) for vx, vy in vertices]
    lines = [occ.addLine(points[i], points[(i + 1) % len(points)]) for i in range(len(points))]
    return occ.addPlaneSurface([occ.addCurveLoop(lines)])


def _disk(occ, spec):
    (cx, cy), r = spec["center"], spec["radius"]
    return occ.addDisk(cx, cy, 0, r, r)


def _rectangle(occ, box):
    x0, x1, y0, y1 = box
    return occ.addRectangle(x0, y0, 0, x1 - x0, y1 - y0)


def _single(result):
    surfaces = [tag for dim, tag in result[0] if dim == 2]
    if len(surfaces) != 1:
        raise ValueError(f"expected one connected surface, got {len(surfaces)}")
    return surfaces[0]


def star_vertices(center, points, inner, outer):
    angles = math.pi / 2 + np.arange(2 * points) * math.pi / points
    radii = np.where(np.arange(2 * points) % 2 == 0, outer, inner)
    return np.column_stack([center[0] + radii * np.cos(angles), center[1] + radii * np.sin(angles)])


def gear_vertices(center, teeth, base, height):
    pitch, tip, vertices = 2 * math.pi / teeth, base + height, []
    for k in range(teeth):
        for radius, angle in ((base, k * pitch), (tip, k * pitch), (tip, (k + 0.5) * pitch), (base, (k + 0.5) * pitch)):
            vertices.append((center[0] + radius * math.cos(angle), center[1] + radius * math.sin(angle)))
    return vertices


def occ_surface(occ, kind, p):
    """The domain as one OCC surface, from the template's geometry_params."""
    if kind in ("unit_square", "periodic_square"):
        return _rectangle(occ, p.get("bounds", (0, 1, 0, 1)))
    if kind == "l_shape":
        return _polygon(occ, p.get("vertices", [[0, 0], [1, 0], [1, 0.5], [0.5, 0.5], [0.5, 1], [0, 1]]))
    if kind == "circle":
        return _disk(occ, {"center": p.get("center", (0.5, 0.5)), "radius": p.get("radius", 0.5)})
    if kind == "annulus":
        center = p.get("center", (0.5, 0.5))
        outer = _disk(occ, {"center": center, "radius": p.get("outer_radius", 0.5)})
        inner = _disk(occ, {"center": center, "radius": p.get("inner_radius", 0.25)})
        return _single(occ.cut([(2, outer)], [(2, inner)]))
    if kind == "eccentric_annulus":
        outer = _disk(occ, p.get("outer", {"center": (0.5, 0.5), "radius": 0.5}))
        inner = _disk(occ, p.get("inner", {"center": (0.65, 0.5), "radius": 0.2}))
        return _single(occ.cut([(2, outer)], [(2, inner)]))
    if kind in ("square_with_hole", "multi_hole"):
        box = _rectangle(occ, p.get("outer", (0, 1, 0, 1)))
        if kind == "square_with_hole":
            hole = p.get("hole", {"center": (0.5, 0.5), "radius": 0.2})
            holes = [_polygon(occ, hole["vertices"]) if "vertices" in hole else _disk(occ, hole)]
        else:
            holes = [_disk(occ, hole) for hole in p["holes"]]
        return _single(occ.cut([(2, box)], [(2, h) for h in holes]))
    if kind == "sector":
        (cx, cy), r = p.get("center", (0, 0)), p.get("radius", 1.0)
        theta = math.radians(p.get("angle_deg", 90.0))
        disk = occ.addDisk(cx, cy, 0, r, r)
        # a wedge polygon reaching past the arc, intersected with the disk
        steps = max(2, int(math.ceil(theta / (math.pi / 8))))
        far = [(cx + 2 * r * math.cos(a), cy + 2 * r * math.sin(a)) for a in np.linspace(0, theta, steps + 1)]
        wedge = _polygon(occ, [(cx, cy)] + far)
        return _single(occ.intersect([(2, disk)], [(2, wedge)]))
    if kind == "star":
        return _polygon(occ, star_vertices(p.get("center", (0, 0)), p.get("points", 5), p.get("inner_radius", 0.3),
                                           p.get("outer_radius", 0.7)))
    if kind == "gear":
        return _polygon(occ, gear_vertices(p.get("center", (0, 0)), p.get("teeth", 8), p.get("base_radius", 0.5),
                                           p.get("tooth_height", 0.2)))
    if kind == "t_junction":
        bar = _rectangle(occ, p.get("bar", (0, 1, 0.8, 1.0)))
        stem = _rectangle(occ, p.get("stem", (0.4, 0.6, 0, 0.8)))
        return _single(occ.fuse([(2, bar)], [(2, stem)]))
    if kind == "dumbbell":
        left = _disk(occ, p.get("left", {"center": (0.25, 0.5), "radius": 0.25}))
        right = _disk(occ, p.get("right", {"center": (0.75, 0.5), "radius": 0.25}))
        bridge = _rectangle(occ, p.get("bridge", (0.25, 0.75, 0.4, 0.6)))
        return _single(occ.fuse([(2, left)], [(2, right), (2, bridge)]))
    raise NotImplementedError(f"the oracle has no mesher for domain {kind!r}")


def reentrant_corners(model, surface, probe):
    """Boundary points of ``surface`` where the domain's interior angle exceeds pi
    (found by sampling a circle of radius ``probe`` around each point)."""
    angles = np.linspace(0, 2 * math.pi, 72, endpoint=False)
    corners = []
    for _, point in model.getBoundary([(2, surface)], combined=False, recursive=True):
        x, y, _ = model.getValue(0, point, [])
        ring = np.column_stack([x + probe * np.cos(angles), y + probe * np.sin(angles), np.zeros_like(angles)])
        inside = sum(model.isInside(2, surface, list(xyz)) > 0 for xyz in ring)
        if inside > 0.55 * len(angles):
            corners.append(point)
    return corners


def grade_towards(model, points, h, finest, slope=0.3):
    """A mesh-size field: ``finest`` at the given points, growing linearly with the
    distance (``slope`` cells' size per unit length) up to h. Returns the field id.
    Set Mesh.MeshSizeExtendFromBoundary to 0 with it, or the fine size leaks inwards."""
    distance = model.mesh.field.add("Distance")
    model.mesh.field.setNumbers(distance, "PointsList", points)
    threshold = model.mesh.field.add("Threshold")
    model.mesh.field.setNumber(threshold, "InField", distance)
    model.mesh.field.setNumber(threshold, "SizeMin", finest)
    model.mesh.field.setNumber(threshold, "SizeMax", h)
    model.mesh.field.setNumber(threshold, "DistMin", finest)
    model.mesh.field.setNumber(threshold, "DistMax", finest + (h - finest) / slope)
    model.mesh.field.setAsBackgroundMesh(threshold)
    return threshold


def has_curves(model, surface):
    return any(model.getType(1, curve) != "Line" for _, curve in model.getBoundary([(2, surface)], oriented=False))


def curve_tags(model, kind, p, curves):
    """Template tag name -> curve ids, from where each boundary curve lies."""
    tags = {"boundary": list(curves)}
    box = p.get("outer") or p.get("bounds") or (0, 1, 0, 1)
    for curve in curves:
        x0, y0, _, x1, y1, _ = model.getBoundingBox(1, curve)
        names = []
        if kind in ("unit_square", "periodic_square", "square_with_hole", "multi_hole"):
            near = lambda a, b: abs(a - b) < 1e-6 * (box[1] - box[0])  # noqa: E731 (gmsh pads its boxes)
            sides = {"x_min": near(x0, box[0]) and near(x1, box[0]), "x_max": near(x0, box[1]) and near(x1, box[1]),
                     "y_min": near(y0, box[2]) and near(y1, box[2]), "y_max": near(y0, box[3]) and near(y1, box[3])}
            names = [name for name, hit in sides.items() if hit] or ["hole" if kind == "square_with_hole" else "holes"]
        elif kind in ("annulus", "eccentric_annulus"):
            inner = p.get("inner_radius", 0.25) if kind == "annulus" else p.get("inner", {"radius": 0.2})["radius"]
            names = ["inner" if max(x1 - x0, y1 - y0) < 2 * inner + 1e-6 else "outer"]
        elif kind == "sector":
            names = [_sector_part(model, curve, p.get("center", (0, 0)), math.radians(p.get("angle_deg", 90.0)))]
        for name in names:
            tags.setdefault(name, []).append(curve)
    return tags


def _sector_part(model, curve, center, theta):
    """arc, edge_start (along angle 0) or edge_end (along angle theta)."""
    low, high = model.getParametrizationBounds(1, curve)
    middle = np.array(model.getValue(1, curve, [0.5 * (low[0] + high[0])])[:2]) - np.array(center)
    angle = math.atan2(middle[1], middle[0]) % (2 * math.pi)
    if abs(angle) < 1e-6 or abs(angle - 2 * math.pi) < 1e-6:
        return "edge_start"
    if abs(angle - theta) < 1e-6:
        return "edge_end"
    return "arc"


def mesh_domain(kind, params, h, path, degree=1):
    """Mesh a 2-D template with gmsh at cell size h into ``path`` (gmsh format 2.2);
    returns {tag name: [physical curve ids]}."""
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
        gmsh.option.setNumber("Mesh.CharacteristicLengthMin", h)
        gmsh.option.setNumber("Mesh.CharacteristicLengthMax", h)
        gmsh.option.setNumber("Mesh.ElementOrder", degree)
        gmsh.option.setNumber("Mesh.MshFileVersion", 2.2)
        gmsh.model.mesh.generate(2)
        gmsh.write(str(path))
        return tags
    finally:
        gmsh.finalize()
