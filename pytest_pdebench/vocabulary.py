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
# each of these names is also a pytest marker (-m poisson, -m dealii, -m l_shape)
MARKERS = (*FAMILIES, *MATH_TYPES, *LIBRARIES, *DOMAIN_TYPES, *CONSTRUCTION_METHODS)
