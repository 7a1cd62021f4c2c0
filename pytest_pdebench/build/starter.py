"""The starter suite: Poisson and Heat with manufactured solutions on five 2-D
domains and the unit cube. Written to ``cases/starter.jsonl`` by
``pdebench build-starter``; the data below is the whole design, sympy derives the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cases import CaseRecord

GRID_2D = {"unit_square": (50, 50)}
DEFAULT_GRID_2D = (100, 100)

# (domain, geometry_params) for each starter domain; bbox comes from the geometry
DOMAINS = {
    "unit_square": {},
    "l_shape": {"vertices": [[0, 0], [1, 0], [1, 0.5], [0.5, 0.5], [0.5, 1], [0, 1]]},
    "circle": {"center": [0.5, 0.5], "radius": 0.5},
    "annulus": {"center": [0.5, 0.5], "inner_radius": 0.25, "outer_radius": 0.5},
    "square_with_hole": {"outer": [0, 1, 0, 1], "hole": {"center": [0.5, 0.5], "radius": 0.2}},
    "unit_cube": {},
}


@dataclass(frozen=True)
class Design:
    id: str
    family: str
    domain: str
    u: str  # exact solution (evaluator-only)
    kappa: str = "1"
    neumann: tuple[str, ...] = ()
    t_end: float | None = None
    structure: tuple[str, ...] = ()
    difficulty: str = "easy"


DESIGNS = [
    Design("poisson_basic", "poisson", "unit_square", "sin(pi*x)*sin(pi*y)"),
    Design("poisson_variable_kappa", "poisson", "unit_square", "sin(2*pi*x)*sin(2*pi*y)",
           kappa="1 + 0.5*sin(2*pi*x)*sin(2*pi*y)", structure=("variable_coefficient",), difficulty="medium"),
    Design("poisson_mixed_bc", "poisson", "unit_square", "exp(x)*cos(pi*y)", kappa="2",
           neumann=("y_max",), structure=("neumann",), difficulty="medium"),
    Design("poisson_exp_kappa", "poisson", "unit_square", "x*(1 - x)*y*(1 - y)*exp(x + y)",
           kappa="exp(x - y)", structure=("variable_coefficient",)),
    Design("poisson_l_shape", "poisson", "l_shape", "sin(pi*x)*cos(pi*y) + x**2",
           structure=("nonconvex", "reentrant_corner")),
    Design("poisson_l_shape_variable_kappa", "poisson", "l_shape", "exp(-x)*sin(2*y) + y",
           kappa="1 + x**2 + y**2", structure=("nonconvex", "variable_coefficient"), difficulty="medium"),
    Design("poisson_circle", "poisson", "circle", "exp(x + y)", structure=("curved_boundary",)),
    Design("poisson_circle_variable_kappa", "poisson", "circle", "sin(3*x)*cos(2*y)", kappa="2 + sin(pi*x)",
           structure=("curved_boundary", "variable_coefficient"), difficulty="medium"),
    Design("poisson_annulus", "poisson", "annulus", "cos(2*pi*x)*cos(2*pi*y)",
           structure=("curved_boundary", "multiply_connected"), difficulty="medium"),
    Design("poisson_annulus_variable_kappa", "poisson", "annulus", "x**3 - 3*x*y**2 + sin(y)",
           kappa="1 + 0.5*cos(pi*x)*cos(pi*y)", structure=("multiply_connected", "variable_coefficient")),
    Design("poisson_square_with_hole", "poisson", "square_with_hole", "sin(pi*x)*sin(2*pi*y) + x*y",
           structure=("multiply_connected",)),
    Design("poisson_square_with_hole_contrast", "poisson", "square_with_hole", "cos(pi*x)*exp(y)",
           kappa="1 + 9*exp(-20*((x - 0.25)**2 + (y - 0.25)**2))",
           structure=("multiply_connected", "coefficient_contrast"), difficulty="hard"),
    Design("poisson_unit_cube", "poisson", "unit_cube", "sin(pi*x)*sin(pi*y)*sin(pi*z)", structure=("3d",),
           difficulty="medium"),
    Design("heat_basic", "heat", "unit_square", "exp(-t)*sin(pi*x)*sin(pi*y)", t_end=0.1),
    Design("heat_variable_kappa", "heat", "unit_square", "exp(-2*t)*sin(pi*x)*sin(2*pi*y)",
           kappa="1 + 0.5*x*y", t_end=0.2, structure=("variable_coefficient",), difficulty="medium"),
    Design("heat_l_shape", "heat", "l_shape", "(1 + t)*sin(pi*x)*sin(pi*y) + x", t_end=0.1,
           structure=("nonconvex",)),
    Design("heat_l_shape_variable_kappa", "heat", "l_shape", "exp(-t)*cos(pi*x)*cos(pi*y)",
           kappa="1 + x", t_end=0.1, structure=("nonconvex", "variable_coefficient"), difficulty="medium"),
    Design("heat_circle", "heat", "circle", "exp(-t)*(x**2 + y**2)", t_end=0.1, structure=("curved_boundary",)),
    Design("heat_circle_variable_kappa", "heat", "circle", "cos(t)*sin(pi*x)*cos(pi*y)", kappa="1 + 0.5*y",
           t_end=0.2, structure=("curved_boundary", "variable_coefficient"), difficulty="medium"),
    Design("heat_annulus", "heat", "annulus", "exp(-t)*sin(2*pi*x)*sin(2*pi*y)", t_end=0.05,
           structure=("multiply_connected",), difficulty="medium"),
    Design("heat_square_with_hole", "heat", "square_with_hole", "(1 + t**2)*cos(pi*x)*sin(pi*y)", t_end=0.1,
           structure=("multiply_connected",)),
]


def build_record(design: Design) -> CaseRecord:
    from ..domains import resolve_geometry
    from . import mms

    params = DOMAINS[design.domain]
    geometry = resolve_geometry({"type": design.domain, "geometry_params": params})
    dim = geometry.dim
    bbox = list(geometry.bbox)
    if dim == 3:
        eval_grid = {"type": "cartesian", "nx": 20, "ny": 20, "nz": 20, "bbox": bbox}
    else:
        nx, ny = GRID_2D.get(design.domain, DEFAULT_GRID_2D)
        eval_grid = {"type": "cartesian", "nx": nx, "ny": ny, "bbox": bbox}
    pde: dict = {"type": design.family, "params": {"kappa": design.kappa}}
    bc: dict = {}
    ic = None
    if design.family == "heat":
        data = mms.heat_data(design.u, design.kappa, dim, t0=0.0)
        pde["time"] = {"t0": 0.0, "t_end": design.t_end}
        ic = {"value": data["initial"]}
        math_type = ["parabolic"]
    else:
        data = mms.poisson_data(design.u, design.kappa, dim, design.neumann)
        math_type = ["elliptic"]
    pde["forcing"] = {"type": "expression", "value": data["forcing"]}
    if design.neumann:
        dirichlet_tags = [tag for tag in geometry.tags if tag not in design.neumann and tag != "boundary"]
        bc["dirichlet"] = {"on": dirichlet_tags, "value": data["dirichlet"]}
        bc["neumann"] = {"on": list(design.neumann), "value": data["neumann"]}
    else:
        bc["dirichlet"] = {"on": "boundary", "value": data["dirichlet"]}
    domain = {"type": design.domain, "bounds": [bbox[2 * i:2 * i + 2] for i in range(dim)]}
    if params:
        domain["geometry_params"] = params
    case_spec = {"pde": pde, "domain": domain, "bc": bc, "eval_grid": eval_grid, "output": {"format": "npz",
                                                                                            "field": "scalar"}}
    if ic:
        case_spec["ic"] = ic
    return CaseRecord.model_validate({
        "id": design.id,
        "pde_classification": {"equation_family": design.family, "math_type": math_type},
        "case_spec": case_spec,
        "evaluation_config": {},
        "evaluation_metadata": {
            "construction_method": "manufactured_solution",
            "manufactured_solution": {"u": mms.text(mms.parse_expression(design.u))},
            "calibration_config": {"baseline": "submissions/oracle", "libraries": ["dolfinx"]},
        },
        "tags": {"structure": list(design.structure), "difficulty": [design.difficulty]},
        "supported_libraries": ["dolfinx", "firedrake", "dealii"],
    })


def starter_records() -> list[CaseRecord]:
    return [build_record(design) for design in DESIGNS]
