"""The starter designs: what a manufactured-solution case is made of (family, domain, exact
solution, coefficients, boundary kinds) before sympy derives its data (``starter.py``).
A data table: ``Design`` and the starter catalogue, ``DESIGNS``."""

from __future__ import annotations

from dataclasses import dataclass

GRID_2D = {"unit_square": (50, 50)}
DEFAULT_GRID_2D = (100, 100)

# (domain, geometry_params) for each starter domain; bbox comes from the geometry
DOMAINS: dict[str, dict] = {
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
    u: str | tuple[str, ...] | None  # exact solution (evaluator-only); None: a numerical reference
    kappa: str = "1"  # Poisson and Heat
    params: tuple[tuple[str, object], ...] = ()  # other families' parameters
    neumann: tuple[str, ...] = ()  # sides with kappa du/dn given
    robin: tuple[str, ...] = ()  # sides with kappa du/dn + alpha u given
    robin_alpha: str = "1"
    periodic: tuple[str, ...] = ()  # periodic directions (periodic_square)
    t_end: float | None = None
    structure: tuple[str, ...] = ()
    difficulty: str = "easy"
    p: str | None = None  # exact pressure of a flow
    math_types: tuple[str, ...] = ()  # overrides the family's default math type
    libraries: tuple[str, ...] = ()  # overrides the family's default tracks
    output: str | tuple[str, ...] = "scalar"  # a field name, or component array names
    # data of a case without an exact solution: forcing, Dirichlet value(s) per tag, initial value
    forcing: str | tuple[str, ...] = "0"
    dirichlet: tuple[tuple[str | list[str], object], ...] = (("boundary", "0"),)  # tag(s), value(s)
    initial: str = "0"
    smoke: bool = False  # the classic smoke case: its data may give the answer away (tag smoke_case: not leak-checked)
    geometry: dict | None = None  # the template's parameters; None: DOMAINS' or the template's defaults

    def pde_params(self) -> dict:
        return {"kappa": self.kappa} if self.family in ("poisson", "heat") else dict(self.params)

    def math_type(self) -> list[str]:
        if self.math_types:
            return list(self.math_types)
        if self.family == "convection_diffusion":
            return ["parabolic" if self.t_end else "elliptic"]
        return [
            {
                "poisson": "elliptic",
                "heat": "parabolic",
                "helmholtz": "elliptic",
                "reaction_diffusion": "reaction_diffusion",
                "linear_elasticity": "elliptic",
                "stokes": "incompressible_flow",
                "navier_stokes": "incompressible_flow",
                "burgers": "parabolic",
                "wave": "hyperbolic",
                "biharmonic": "elliptic",
            }[self.family]
        ]

    def exact(self) -> dict:
        solution = {"u": list(self.u) if isinstance(self.u, tuple) else self.u}
        if self.p is not None:
            solution["p"] = self.p
        return solution


DESIGNS = [
    Design("poisson_basic", "poisson", "unit_square", "sin(pi*x)*sin(pi*y)", smoke=True),
    Design(
        "poisson_variable_kappa",
        "poisson",
        "unit_square",
        "sin(2*pi*x)*sin(2*pi*y)",
        kappa="1 + 0.5*sin(2*pi*x)*sin(2*pi*y)",
        structure=("variable_coefficient",),
        difficulty="medium",
    ),
    Design(
        "poisson_mixed_bc",
        "poisson",
        "unit_square",
        "exp(x)*cos(pi*y)",
        kappa="2",
        neumann=("y_max",),
        structure=("neumann",),
        difficulty="medium",
    ),
    Design(
        "poisson_exp_kappa",
        "poisson",
        "unit_square",
        "x*(1 - x)*y*(1 - y)*exp(x + y)",
        kappa="exp(x - y)",
        structure=("variable_coefficient",),
    ),
    Design(
        "poisson_l_shape",
        "poisson",
        "l_shape",
        "sin(pi*x)*cos(pi*y) + x**2",
        structure=("nonconvex", "reentrant_corner"),
    ),
    Design(
        "poisson_l_shape_variable_kappa",
        "poisson",
        "l_shape",
        "exp(-x)*sin(2*y) + y",
        kappa="1 + x**2 + y**2",
        structure=("nonconvex", "variable_coefficient"),
        difficulty="medium",
    ),
    Design("poisson_circle", "poisson", "circle", "exp(x + y)", structure=("curved_boundary",)),
    Design(
        "poisson_circle_variable_kappa",
        "poisson",
        "circle",
        "sin(3*x)*cos(2*y)",
        kappa="2 + sin(pi*x)",
        structure=("curved_boundary", "variable_coefficient"),
        difficulty="medium",
    ),
    Design(
        "poisson_annulus",
        "poisson",
        "annulus",
        "cos(2*pi*x)*cos(2*pi*y)",
        structure=("curved_boundary", "multiply_connected"),
        difficulty="medium",
    ),
    Design(
        "poisson_annulus_variable_kappa",
        "poisson",
        "annulus",
        "x**3 - 3*x*y**2 + sin(y)",
        kappa="1 + 0.5*cos(pi*x)*cos(pi*y)",
        structure=("multiply_connected", "variable_coefficient"),
    ),
    Design(
        "poisson_square_with_hole",
        "poisson",
        "square_with_hole",
        "sin(pi*x)*sin(2*pi*y) + x*y",
        structure=("multiply_connected",),
    ),
    Design(
        "poisson_square_with_hole_contrast",
        "poisson",
        "square_with_hole",
        "cos(pi*x)*exp(y)",
        kappa="1 + 9*exp(-20*((x - 0.25)**2 + (y - 0.25)**2))",
        structure=("multiply_connected", "coefficient_contrast"),
        difficulty="hard",
    ),
    Design(
        "poisson_unit_cube",
        "poisson",
        "unit_cube",
        "sin(pi*x)*sin(pi*y)*sin(pi*z)",
        structure=("3d",),
        difficulty="medium",
    ),
    Design("heat_basic", "heat", "unit_square", "exp(-t)*sin(pi*x)*sin(pi*y)", t_end=0.1),
    Design(
        "heat_variable_kappa",
        "heat",
        "unit_square",
        "exp(-2*t)*sin(pi*x)*sin(2*pi*y)",
        kappa="1 + 0.5*x*y",
        t_end=0.2,
        structure=("variable_coefficient",),
        difficulty="medium",
    ),
    Design("heat_l_shape", "heat", "l_shape", "(1 + t)*sin(pi*x)*sin(pi*y) + x", t_end=0.1, structure=("nonconvex",)),
    Design(
        "heat_l_shape_variable_kappa",
        "heat",
        "l_shape",
        "exp(-t)*cos(pi*x)*cos(pi*y)",
        kappa="1 + x",
        t_end=0.1,
        structure=("nonconvex", "variable_coefficient"),
        difficulty="medium",
    ),
    Design("heat_circle", "heat", "circle", "exp(-t)*(x**2 + y**2)", t_end=0.1, structure=("curved_boundary",)),
    Design(
        "heat_circle_variable_kappa",
        "heat",
        "circle",
        "cos(t)*sin(pi*x)*cos(pi*y)",
        kappa="1 + 0.5*y",
        t_end=0.2,
        structure=("curved_boundary", "variable_coefficient"),
        difficulty="medium",
    ),
    Design(
        "heat_annulus",
        "heat",
        "annulus",
        "exp(-t)*sin(2*pi*x)*sin(2*pi*y)",
        t_end=0.05,
        structure=("multiply_connected",),
        difficulty="medium",
    ),
    Design(
        "heat_square_with_hole",
        "heat",
        "square_with_hole",
        "(1 + t**2)*cos(pi*x)*sin(pi*y)",
        t_end=0.1,
        structure=("multiply_connected",),
    ),
    Design("helmholtz_k5", "helmholtz", "unit_square", "sin(pi*x)*sin(2*pi*y)", params=(("k", 5.0),)),
    Design(
        "helmholtz_plane_wave_circle",
        "helmholtz",
        "circle",
        "sin(6*x + 8*y)",
        params=(("k", 10.0),),
        structure=("curved_boundary", "zero_source", "wavenumber"),
        difficulty="medium",
    ),
    Design(
        "helmholtz_l_shape_k3",
        "helmholtz",
        "l_shape",
        "exp(x)*sin(2*y)",
        params=(("k", 3.0),),
        structure=("nonconvex",),
    ),
    Design(
        "helmholtz_annulus_k8",
        "helmholtz",
        "annulus",
        "cos(4*pi*x)*sin(2*pi*y)",
        params=(("k", 8.0),),
        structure=("multiply_connected", "wavenumber"),
        difficulty="hard",
    ),
    Design(
        "convdiff_moderate_pe",
        "convection_diffusion",
        "unit_square",
        "sin(pi*x)*sin(pi*y)",
        params=(("epsilon", 0.05), ("beta", [1.0, 0.5])),
    ),
    Design(
        "convdiff_high_pe_supg",
        "convection_diffusion",
        "unit_square",
        "x*y*(1 - x)*(1 - y)*exp(x)",
        params=(("epsilon", 0.002), ("beta", [1.0, 1.0])),
        structure=("convection_dominated",),
        difficulty="hard",
    ),
    Design(
        "convdiff_l_shape",
        "convection_diffusion",
        "l_shape",
        "sin(2*pi*x)*y",
        params=(("epsilon", 0.02), ("beta", [2.0, -1.0])),
        structure=("nonconvex", "convection_dominated"),
        difficulty="medium",
    ),
    Design(
        "convdiff_transient_annulus",
        "convection_diffusion",
        "annulus",
        "exp(-t)*cos(pi*x)*sin(pi*y)",
        params=(("epsilon", 0.02), ("beta", [-1.0, 0.5])),
        t_end=0.2,
        structure=("multiply_connected",),
        difficulty="medium",
    ),
    Design(
        "rd_linear",
        "reaction_diffusion",
        "unit_square",
        "exp(-t)*sin(pi*x)*sin(pi*y)",
        params=(("epsilon", 0.1), ("reaction", "2*u")),
        t_end=0.2,
        structure=("linear_reaction",),
    ),
    Design(
        "rd_allen_cahn_l_shape",
        "reaction_diffusion",
        "l_shape",
        "0.3*exp(-t)*sin(pi*x)*sin(pi*y)",
        params=(("epsilon", 0.05), ("reaction", "2*(u**3 - u)")),
        t_end=0.1,
        structure=("nonconvex", "nonlinear_reaction"),
        difficulty="medium",
    ),
    Design(
        "rd_logistic_circle",
        "reaction_diffusion",
        "circle",
        "exp(-t)*(0.2 + 0.1*sin(pi*x)*sin(pi*y))",
        params=(("epsilon", 0.05), ("reaction", "3*u*(1 - u)")),
        t_end=0.2,
        structure=("curved_boundary", "nonlinear_reaction"),
        difficulty="medium",
    ),
    Design(
        "rd_cubic_square_with_hole",
        "reaction_diffusion",
        "square_with_hole",
        "0.2*exp(-t)*sin(2*pi*x)*sin(pi*y)",
        params=(("epsilon", 0.08), ("reaction", "u + 5*u**3")),
        t_end=0.1,
        structure=("multiply_connected", "nonlinear_reaction"),
    ),
    Design(
        "elasticity_square",
        "linear_elasticity",
        "unit_square",
        ("sin(pi*x)*sin(pi*y)", "x*y*(1 - x)*(1 - y)"),
        params=(("E", 1.0), ("nu", 0.3)),
        output="displacement_magnitude",
    ),
    Design(
        "elasticity_near_incompressible",
        "linear_elasticity",
        "unit_square",
        ("sin(pi*x)*sin(pi*y)", "sin(pi*x)*cos(pi*y)"),
        params=(("E", 1.0), ("nu", 0.49)),
        output=("u_x", "u_y"),
        structure=("near_incompressible",),
        difficulty="hard",
    ),
    Design(
        "elasticity_l_shape",
        "linear_elasticity",
        "l_shape",
        ("0.1*x*y", "0.05*sin(pi*x)*y"),
        params=(("E", 10.0), ("nu", 0.25)),
        output="displacement_magnitude",
        structure=("nonconvex",),
    ),
    # flows: divergence-free velocities from a stream function psi, u = (psi_y, -psi_x)
    Design(
        "stokes_square",
        "stokes",
        "unit_square",
        ("2*pi*sin(pi*x)**2*sin(pi*y)*cos(pi*y)", "-2*pi*sin(pi*x)*cos(pi*x)*sin(pi*y)**2"),
        p="cos(pi*x)*cos(pi*y)",
        params=(("nu", 1.0),),
        output="velocity_magnitude",
    ),
    Design(
        "stokes_circle_components",
        "stokes",
        "circle",
        ("pi*cos(pi*y)*sin(pi*x)", "-pi*cos(pi*x)*sin(pi*y)"),
        p="x**2 - y**2",
        params=(("nu", 0.5),),
        output=("u_x", "u_y"),
        structure=("curved_boundary",),
        difficulty="medium",
    ),
    Design(
        "navier_stokes_square",
        "navier_stokes",
        "unit_square",
        ("pi*cos(pi*y)*sin(pi*x)", "-pi*cos(pi*x)*sin(pi*y)"),
        p="cos(pi*x)*cos(pi*y)",
        params=(("nu", 0.1),),
        output="velocity_magnitude",
        structure=("nonlinear",),
        difficulty="medium",
    ),
    Design(
        "navier_stokes_l_shape",
        "navier_stokes",
        "l_shape",
        ("2*pi*sin(pi*x)**2*sin(pi*y)*cos(pi*y)", "-2*pi*sin(pi*x)*cos(pi*x)*sin(pi*y)**2"),
        p="x*y",
        params=(("nu", 0.05),),
        output="velocity_magnitude",
        structure=("nonlinear", "nonconvex"),
        difficulty="hard",
    ),
    Design(
        "burgers_square",
        "burgers",
        "unit_square",
        "exp(-t)*sin(pi*x)*sin(pi*y)",
        params=(("nu", 0.01),),
        t_end=0.2,
        structure=("nonlinear", "convection_dominated"),
        difficulty="medium",
    ),
    Design(
        "burgers_circle",
        "burgers",
        "circle",
        "exp(-0.5*t)*cos(pi*x)*cos(pi*y)",
        params=(("nu", 0.05),),
        t_end=0.1,
        structure=("nonlinear", "curved_boundary"),
    ),
    Design(
        "wave_square",
        "wave",
        "unit_square",
        "sin(pi*x)*sin(pi*y)*cos(sqrt(2)*pi*t)",
        params=(("c", 1.0),),
        t_end=0.5,
        structure=("standing_wave",),
    ),
    Design(
        "wave_l_shape",
        "wave",
        "l_shape",
        "sin(pi*x)*sin(2*pi*y)*cos(2*t) + x*t",
        params=(("c", 2.0),),
        t_end=0.2,
        structure=("nonconvex", "forced"),
    ),
    Design("biharmonic_sin", "biharmonic", "unit_square", "sin(pi*x)*sin(pi*y)"),
    Design(
        "biharmonic_exp_mode",
        "biharmonic",
        "unit_square",
        "exp(x)*sin(pi*y)",
        structure=("nonzero_laplacian_bc",),
        difficulty="medium",
    ),
    Design(
        "biharmonic_circle",
        "biharmonic",
        "circle",
        "(x**2 + y**2)**2 + cos(2*x)",
        structure=("curved_boundary",),
        difficulty="medium",
    ),
    Design(
        "biharmonic_l_shape",
        "biharmonic",
        "l_shape",
        "x**2*y**2 + sin(pi*x)*y",
        structure=("nonconvex",),
        difficulty="hard",
    ),
    # no exact solution: references come from the oracle at twice its resolution
    Design(
        "poisson_gaussian_source_l_shape",
        "poisson",
        "l_shape",
        None,
        forcing="10*exp(-50*((x - 0.25)**2 + (y - 0.25)**2))",
        structure=("nonconvex", "no_exact_solution"),
    ),
    Design(
        "heat_unit_source_circle",
        "heat",
        "circle",
        None,
        forcing="1",
        t_end=0.1,
        kappa="1 + 0.5*x",
        structure=("curved_boundary", "no_exact_solution"),
    ),
    Design(
        "convdiff_unit_source",
        "convection_diffusion",
        "unit_square",
        None,
        params=(("epsilon", 0.05), ("beta", [1.0, 0.5])),
        forcing="1",
        structure=("boundary_layer", "no_exact_solution"),
        difficulty="medium",
    ),
    Design(
        "stokes_lid_driven_cavity",
        "stokes",
        "unit_square",
        None,
        params=(("nu", 1.0),),
        forcing=("0", "0"),
        dirichlet=(("y_max", ("4*x*(1 - x)", "0")), (["x_min", "x_max", "y_min"], ("0", "0"))),
        output="velocity_magnitude",
        structure=("no_exact_solution", "cavity"),
        difficulty="medium",
    ),
    Design(
        "elasticity_cantilever",
        "linear_elasticity",
        "unit_square",
        None,
        params=(("E", 1.0), ("nu", 0.3)),
        forcing=("0", "-0.01"),
        dirichlet=(("x_min", ("0", "0")),),
        output="displacement_magnitude",
        structure=("no_exact_solution", "traction_free"),
    ),
]
