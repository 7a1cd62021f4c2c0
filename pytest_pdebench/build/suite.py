"""The full suite from the design matrix (design_matrix.toml): Table 3a's counts per
family, each case a distinct (regime, domain, exact solution or source) combination.

Combinations are enumerated, shuffled with a fixed seed and taken in order, so the suite
is reproducible and no combination repeats. Records are built by the starter builder
(sympy derives all data); cases without an exact solution get their references from
``pdebench build-references``.
"""

from __future__ import annotations

import itertools
import random
import tomllib
from pathlib import Path

import sympy as sp

from ..expressions import expression_to_string, parse_expression, t, x, y
from .starter import Design, build_record

DESIGN_FILE = Path(__file__).with_name("design_matrix.toml")
SEED = 2026
# cases per family that the Firedrake and deal.II tracks carry (the paper's Table 3b)
FIREDRAKE_COUNTS = {"poisson": 91, "helmholtz": 62, "biharmonic": 46, "linear_elasticity": 61, "heat": 50,
                    "convection_diffusion": 84, "reaction_diffusion": 64, "stokes": 52}
DEALII_COUNTS = {"poisson": 60, "helmholtz": 29, "biharmonic": 15, "linear_elasticity": 30, "heat": 50,
                 "convection_diffusion": 52, "reaction_diffusion": 22, "stokes": 27, "navier_stokes": 28}
SHORT = {"convection_diffusion": "cd", "reaction_diffusion": "rd", "linear_elasticity": "elasticity",
         "navier_stokes": "ns"}


def load_design(path: Path = DESIGN_FILE) -> dict:
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def velocity_from_stream(psi: str) -> tuple[str, str]:
    """u = (psi_y, -psi_x): divergence free by construction."""
    expr = parse_expression(psi)
    return expression_to_string(sp.diff(expr, y)), expression_to_string(-sp.diff(expr, x))


def _steady(solution: str, transient: bool) -> str:
    """A steady regime takes the solution at t = 0 (its data must not mention t)."""
    return solution if transient else expression_to_string(parse_expression(solution).subs(t, 0))


def _exact_choices(family: str, spec: dict, domain: str):
    cube = domain == "unit_cube"
    if "streams" in spec:
        if cube:
            return [(tuple(v), None) for v in spec.get("vector_solutions_3d", [])]
        return [(velocity_from_stream(psi), p) for psi, p in zip(spec["streams"], itertools.cycle(spec["pressures"]))]
    if "vector_solutions" in spec:
        return [(tuple(v), None) for v in spec.get("vector_solutions_3d" if cube else "vector_solutions", [])]
    return [(u, None) for u in spec.get("solutions_3d" if cube else "solutions", [])]


def family_designs(family: str, spec: dict, seed: int = SEED) -> list[Design]:
    rng = random.Random(f"{seed}-{family}")
    short = SHORT.get(family, family)
    vector = "vector_solutions" in spec or "streams" in spec
    exact_combos, source_combos = [], []
    for regime, domain in itertools.product(spec["regimes"], spec["domains"]):
        for solution, pressure in _exact_choices(family, spec, domain):
            exact_combos.append((regime, domain, solution, pressure))
        if domain == "unit_cube" and vector:
            continue  # vector sources are 2-D
        for source in spec.get("vector_sources" if vector else "sources", []):
            source_combos.append((regime, domain, source))
    rng.shuffle(exact_combos)
    rng.shuffle(source_combos)
    n_exact = spec["count"] - spec["no_exact"]
    if len(exact_combos) < n_exact or len(source_combos) < spec["no_exact"]:
        raise ValueError(f"{family}: the design matrix has too few distinct combinations for its counts")
    designs = []
    for index, (regime, domain, solution, pressure) in enumerate(exact_combos[:n_exact]):
        designs.append(_design(family, f"{short}_{regime['name']}_{domain}_{index:03d}", regime, domain, spec,
                               u=solution, p=pressure))
    for index, (regime, domain, source) in enumerate(source_combos[:spec["no_exact"]]):
        boundary = ("0", "0") if vector else "0"
        if "streams" in spec:  # a flow needs moving walls or it stays at rest
            boundary = velocity_from_stream(spec["streams"][index % len(spec["streams"])])
        designs.append(_design(family, f"{short}_{regime['name']}_{domain}_noexact_{index:03d}", regime, domain,
                               spec, u=None, forcing=tuple(source) if vector else source,
                               dirichlet=(("boundary", boundary),)))
    return designs


def _design(family, case_id, regime, domain, spec, u, p=None, **data) -> Design:
    t_end = regime.get("t_end")
    if isinstance(u, str):
        u = _steady(u, t_end is not None)
    elif isinstance(u, tuple):
        u = tuple(_steady(c, t_end is not None) for c in u)
    params = dict(regime.get("params", {}))
    if domain == "unit_cube" and isinstance(params.get("beta"), list) and len(params["beta"]) == 2:
        params["beta"] = params["beta"] + [0.0]  # the regime's 2-D wind, flat in z
    kappa = params.pop("kappa", "1")
    output = spec.get("output", "scalar")
    return Design(case_id, family, domain, u, kappa=kappa, params=tuple(params.items()), t_end=t_end,
                  structure=(regime["name"], "no_exact_solution" if u is None else "manufactured"),
                  difficulty="medium", p=p, output=output,
                  math_types=(regime["math_type"],) if "math_type" in regime else (), **data)


def with_libraries(family: str, designs: list[Design]) -> list[Design]:
    """Every case on DOLFINx; the first Table-3b-many (in the shuffled order) on Firedrake
    and deal.II too."""
    import dataclasses

    out = []
    for index, design in enumerate(designs):
        libraries = ("dolfinx",) + tuple(library for library, counts in (("firedrake", FIREDRAKE_COUNTS),
                                                                          ("dealii", DEALII_COUNTS))
                                         if index < counts.get(family, 0))
        out.append(dataclasses.replace(design, libraries=libraries))
    return out


def suite_designs(path: Path = DESIGN_FILE) -> list[Design]:
    return [design for family, spec in load_design(path).items()
            for design in with_libraries(family, family_designs(family, spec))]


SUITE_SIMPLIFY_LIMIT = 40  # sympy's simplify took 92 s on one tanh x Gaussian-contrast forcing


def suite_records(path: Path = DESIGN_FILE, progress=None) -> list:
    from . import mms

    designs = suite_designs(path)
    records = []
    limit, mms.SIMPLIFY_LIMIT = mms.SIMPLIFY_LIMIT, SUITE_SIMPLIFY_LIMIT
    try:
        for index, design in enumerate(designs, start=1):
            records.append(build_record(design))
            if progress:
                progress(index, len(designs), design.id)
    finally:
        mms.SIMPLIFY_LIMIT = limit
    return records
