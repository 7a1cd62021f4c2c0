"""The full suite from the design matrix (design_matrix.toml): Table 3a's counts per
family, each case a distinct (regime, domain, exact solution or source) combination.

Combinations are enumerated, shuffled with a fixed seed and dealt round-robin over the
family's domains (so every listed domain is used), so the suite is reproducible and no
combination repeats. On domains with straight sides the boundary-condition variants of
the family (``boundaries``: dirichlet, mixed = Neumann on one side, robin = Robin on one
side) take turns; on periodic_square the family's ``periodic`` table gives directions
and solutions, and only regimes whose coefficients repeat with the period are used.
Records are built by the starter builder (sympy derives all data); cases without an
exact solution get their references from ``pdebench build-references``.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import random
import tomllib
from pathlib import Path

import sympy as sp

from ..expressions import expression_to_string, parse_expression, t, x, y
from . import mms
from .designs import Design
from .starter import build_record

DESIGN_FILE = Path(__file__).with_name("design_matrix.toml")
DISCARDED_FILE = Path(__file__).with_name("discarded.toml")  # candidates that failed their checks
SEED = 2026
# cases per family that the Firedrake and deal.II tracks carry (the paper's Table 3b)
FIREDRAKE_COUNTS = {
    "poisson": 91,
    "helmholtz": 62,
    "biharmonic": 46,
    "linear_elasticity": 61,
    "heat": 50,
    "convection_diffusion": 84,
    "reaction_diffusion": 64,
    "stokes": 52,
}
DEALII_COUNTS = {
    "poisson": 60,
    "helmholtz": 29,
    "biharmonic": 15,
    "linear_elasticity": 30,
    "heat": 50,
    "convection_diffusion": 52,
    "reaction_diffusion": 22,
    "stokes": 27,
    "navier_stokes": 28,
}
SHORT = {
    "convection_diffusion": "cd",
    "reaction_diffusion": "rd",
    "linear_elasticity": "elasticity",
    "navier_stokes": "ns",
}


def load_design(path: Path = DESIGN_FILE) -> dict:
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def load_discarded(path: Path = DISCARDED_FILE) -> dict[str, str]:
    with open(path, "rb") as handle:
        return tomllib.load(handle).get("discarded", {})


def velocity_from_stream(psi: str) -> tuple[str, str]:
    """u = (psi_y, -psi_x): divergence free by construction."""
    expr = parse_expression(psi)
    return expression_to_string(sp.diff(expr, y)), expression_to_string(-sp.diff(expr, x))


def _steady(solution: str, transient: bool) -> str:
    """A steady regime takes the solution at t = 0 (its data must not mention t)."""
    return solution if transient else expression_to_string(parse_expression(solution).subs(t, 0))


SIDED_DOMAINS = ("unit_square", "unit_cube", "square_with_hole", "multi_hole")  # with x_min ... tags
NEUMANN_SIDES = (("y_max",), ("x_max",), ("x_min", "y_min"))
ROBIN_SIDES = (("x_max",), ("y_min",))
ROBIN_ALPHAS = ("1", "10")


def _exact_choices(family: str, spec: dict, domain: str):
    cube = domain == "unit_cube"
    if domain == "periodic_square":
        return [(u, None) for u in spec["periodic"]["solutions"]]
    if "streams" in spec:
        if cube:
            return [(tuple(v), None) for v in spec.get("vector_solutions_3d", [])]
        return [(velocity_from_stream(psi), p) for psi, p in zip(spec["streams"], itertools.cycle(spec["pressures"]))]
    if "vector_solutions" in spec:
        return [(tuple(v), None) for v in spec.get("vector_solutions_3d" if cube else "vector_solutions", [])]
    return [(u, None) for u in spec.get("solutions_3d" if cube else "solutions", [])]


def _repeats(expression, directions: list[str]) -> bool:
    """Whether a coefficient is periodic with period 1 in the given directions."""
    expr = parse_expression(expression, allow=("u",)) if isinstance(expression, str) else sp.sympify(expression)
    return all(
        sp.simplify(expr.subs(symbol, symbol + 1) - expr) == 0 for symbol in (x if d == "x" else y for d in directions)
    )


def _usable(regime: dict, domain: str, spec: dict) -> bool:
    if domain != "periodic_square":
        return True
    values = [v for value in regime.get("params", {}).values() for v in (value if isinstance(value, list) else [value])]
    return all(_repeats(v, spec["periodic"]["directions"]) for v in values if isinstance(v, str))


def _round_robin(combos: list, rng: random.Random) -> list:
    """Shuffled, then dealt one domain at a time, so the first cases cover every domain."""
    rng.shuffle(combos)
    groups: dict[str, list] = {}
    for combo in combos:
        groups.setdefault(combo[1], []).append(combo)
    dealt: list = []
    for row in itertools.zip_longest(*groups.values()):
        dealt.extend(c for c in row if c is not None)
    return dealt


def _boundary_variant(family: str, spec: dict, domain: str, turn: int) -> tuple[str, dict]:
    """(id suffix, Design fields) of the boundary conditions for this case."""
    if domain == "periodic_square":
        return "periodic", {"periodic": tuple(spec["periodic"]["directions"])}
    variants = spec.get("boundaries", ["dirichlet"])
    if domain not in SIDED_DOMAINS:
        return "", {}
    variant = variants[turn % len(variants)]
    if variant == "mixed":
        return "neumann", {"neumann": NEUMANN_SIDES[turn // len(variants) % len(NEUMANN_SIDES)]}
    if variant == "robin":
        return "robin", {
            "robin": ROBIN_SIDES[turn // len(variants) % len(ROBIN_SIDES)],
            "robin_alpha": ROBIN_ALPHAS[turn // len(variants) % len(ROBIN_ALPHAS)],
        }
    return "", {}


def _take(candidates, count: int, discarded) -> list:
    """The first ``count`` (index, combo, id) whose id was not discarded; ids keep the
    candidate's index, so discarding one case renames no other."""
    kept = [(index, combo, name) for index, (combo, name) in enumerate(candidates) if name not in discarded]
    if len(kept) < count:
        raise ValueError(f"too few distinct combinations left for {count} cases")
    return kept[:count]


def family_designs(family: str, spec: dict, seed: int = SEED, discarded=frozenset()) -> list[Design]:
    rng = random.Random(f"{seed}-{family}")
    short = SHORT.get(family, family)
    vector = "vector_solutions" in spec or "streams" in spec
    exact_combos, source_combos = [], []
    for regime, domain in itertools.product(spec["regimes"], spec["domains"]):
        if not _usable(regime, domain, spec):
            continue
        for solution, pressure in _exact_choices(family, spec, domain):
            exact_combos.append((regime, domain, solution, pressure))
        if (domain == "unit_cube" and vector) or domain == "periodic_square":
            continue  # vector sources are 2-D; periodic cases all have exact solutions
        for source in spec.get("vector_sources" if vector else "sources", []):
            source_combos.append((regime, domain, source))
    exact_combos = _round_robin(exact_combos, rng)
    source_combos = _round_robin(source_combos, rng)
    n_exact = spec["count"] - spec["no_exact"]
    designs: list[Design] = []
    turns: collections.Counter[str] = collections.Counter()
    named: list = []
    for index, combo in enumerate(exact_combos):
        regime, domain = combo[0], combo[1]
        suffix, boundary = _boundary_variant(family, spec, domain, turns[domain])
        turns[domain] += 1
        named.append(
            ((combo, boundary), "_".join(filter(None, (short, regime["name"], domain, suffix, f"{index:03d}"))))
        )
    try:
        exact_kept = _take(named, n_exact, discarded)
        source_kept = _take(
            [
                (c, f"{short}_{c[0]['name']}_{c[1]}_noexact_{i:03d}")
                for i, c in enumerate(source_combos)
                if c[0].get("references", True)
            ],  # numbered before the filter: ids stay
            spec["no_exact"],
            discarded,
        )
    except ValueError as exc:
        raise ValueError(f"{family}: {exc} (design matrix or discarded.toml)") from None
    for _, ((regime, domain, solution, pressure), boundary), name in exact_kept:
        designs.append(_design(family, name, regime, domain, spec, u=solution, p=pressure, **boundary))
    for index, (regime, domain, source), name in source_kept:
        wall: str | tuple[str, str] = ("0", "0") if vector else "0"
        if "streams" in spec:  # a flow needs moving walls or it stays at rest
            wall = velocity_from_stream(spec["streams"][index % len(spec["streams"])])
        designs.append(
            _design(
                family,
                name,
                regime,
                domain,
                spec,
                u=None,
                forcing=tuple(source) if vector else source,
                dirichlet=(("boundary", wall),),
            )
        )
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
    boundary = [name for name in ("neumann", "robin", "periodic") if data.get(name)]
    return Design(
        case_id,
        family,
        domain,
        u,
        kappa=kappa,
        params=tuple(params.items()),
        t_end=t_end,
        structure=(regime["name"], "no_exact_solution" if u is None else "manufactured", *boundary),
        difficulty="medium",
        p=p,
        output=output,
        math_types=(regime["math_type"],) if "math_type" in regime else (),
        **data,
    )


def with_libraries(family: str, designs: list[Design]) -> list[Design]:
    """Every case on DOLFINx; the first Table-3b-many (in the shuffled order) on Firedrake
    and deal.II too."""

    out = []
    for index, design in enumerate(designs):
        libraries = ("dolfinx",) + tuple(
            library
            for library, counts in (("firedrake", FIREDRAKE_COUNTS), ("dealii", DEALII_COUNTS))
            if index < counts.get(family, 0)
        )
        out.append(dataclasses.replace(design, libraries=libraries))
    return out


def suite_designs(path: Path = DESIGN_FILE) -> list[Design]:
    discarded = load_discarded()
    return [
        design
        for family, spec in load_design(path).items()
        for design in with_libraries(family, family_designs(family, spec, discarded=discarded))
    ]


SUITE_SIMPLIFY_LIMIT = 40  # sympy's simplify took 92 s on one tanh x Gaussian-contrast forcing


def suite_records(path: Path = DESIGN_FILE, progress=None) -> list:

    designs = suite_designs(path)
    records = []
    with mms.simplify_limit(SUITE_SIMPLIFY_LIMIT):
        for index, design in enumerate(designs, start=1):
            records.append(build_record(design))
            if progress:
                progress(index, len(designs), design.id)
    return records
