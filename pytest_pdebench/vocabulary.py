"""The benchmark's names: families, kinds of equation, tracks, domains, ways a case is built.

Plain tuples with no imports: pytest loads the plugin (and with it these, for the markers) in
every run of an environment where it is installed, and ``pdebench --help`` lists them; the
case schema (``cases.py``) and the domain templates (``domains.py``) use the same tuples."""

FAMILIES = (
    "poisson",
    "helmholtz",
    "biharmonic",
    "linear_elasticity",
    "heat",
    "convection_diffusion",
    "reaction_diffusion",
    "stokes",
    "navier_stokes",
    "burgers",
    "wave",
)
MATH_TYPES = ("elliptic", "parabolic", "hyperbolic", "mixed_type", "incompressible_flow", "reaction_diffusion")
LIBRARIES = ("dolfinx", "firedrake", "dealii")
CONSTRUCTION_METHODS = ("manufactured_solution", "reference_numerical")
DOMAIN_TYPES = (
    "unit_square",
    "unit_cube",
    "l_shape",
    "square_with_hole",
    "multi_hole",
    "circle",
    "annulus",
    "eccentric_annulus",
    "sector",
    "star",
    "gear",
    "t_junction",
    "dumbbell",
    "periodic_square",
)
# each family's equation as a prompt states it (pdes.py holds the same as sympy residuals)
EQUATIONS = {
    "poisson": "-div(kappa grad u) = f",
    "heat": "u_t - div(kappa grad u) = f",
    "helmholtz": "-lap(u) - k^2 u = f",
    "biharmonic": "lap(lap(u)) = f",
    "convection_diffusion": "[u_t] - epsilon lap(u) + beta . grad(u) = f",
    "reaction_diffusion": "u_t - epsilon lap(u) + R(u) = f",
    "burgers": "u_t + u (du/dx + du/dy [+ du/dz]) - nu lap(u) = f",
    "wave": "u_tt - c^2 lap(u) = f",
    "linear_elasticity": "-div(sigma(u)) = f, sigma = 2 mu eps(u) + lambda tr(eps(u)) I (plane strain from E, nu)",
    "stokes": "-nu lap(u) + grad(p) = f, div(u) = 0",
    "navier_stokes": "[u_t] + (u . grad) u - nu lap(u) + grad(p) = f, div(u) = 0",
}
# each of these names is also a pytest marker (-m poisson, -m dealii, -m l_shape)
# the physical parameters each family's equations read (pdes.operator, the oracles): a name
# outside these is a typo the solver would be blamed for (kapa for kappa), refused at loading
PARAMETERS = {
    "poisson": ("kappa",),
    "heat": ("kappa",),
    "helmholtz": ("k",),
    "biharmonic": (),
    "linear_elasticity": ("E", "nu", "mu", "lambda"),
    "convection_diffusion": ("beta", "epsilon"),
    "reaction_diffusion": ("epsilon", "reaction"),
    "stokes": ("nu",),
    "navier_stokes": ("nu",),
    "burgers": ("nu",),
    "wave": ("c",),
}
MARKERS = (*FAMILIES, *MATH_TYPES, *LIBRARIES, *DOMAIN_TYPES, *CONSTRUCTION_METHODS)
