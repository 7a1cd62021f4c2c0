"""The starter suite: manufactured-solution cases of the families the DOLFINx oracle
covers, on five 2-D domains and the unit cube. Written to ``pytest_pdebench/data/smoke/starter.jsonl`` by
``pdebench build-starter``; the data below is the whole design, sympy derives the rest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import cast

from ..cases import FAMILIES, CaseRecord, Output
from ..domains import resolve_geometry
from . import mms
from .designs import DEFAULT_GRID_2D, DESIGNS, DOMAINS, GRID_2D, Design
from .hiding import Hiding

DATA_REVISION = 2  # boundary data differ from the solution inside, no eigenfunctions: no datum is the answer


def build_record(design: Design, hide_solution: bool = True, key: str | None = None) -> CaseRecord:
    """The record of a design; ``hide_solution=False`` gives the data of revision 1
    (boundary data = the exact solution), that of the committed files until they are
    regenerated. ``key`` seeds the hiding's draws (default: the design's id; a variant
    gives its own, so that its hidden data are drawn afresh too)."""

    params = design.geometry if design.geometry is not None else DOMAINS.get(design.domain)
    if params is None:  # the template's documented defaults, spelled out for the agent
        params = json.loads(json.dumps(resolve_geometry({"type": design.domain}).params))
    geometry = resolve_geometry({"type": design.domain, "geometry_params": params})
    dim = geometry.dim
    bbox = list(geometry.bbox)
    if dim == 3:
        eval_grid = {"type": "cartesian", "nx": 20, "ny": 20, "nz": 20, "bbox": bbox}
    else:
        nx, ny = GRID_2D.get(design.domain, DEFAULT_GRID_2D)
        eval_grid = {"type": "cartesian", "nx": nx, "ny": ny, "bbox": bbox}
    pde_params = design.pde_params()
    transient = design.t_end is not None
    pde: dict = {"type": design.family, "params": pde_params}
    if transient:
        pde["time"] = {"t0": 0.0, "t_end": design.t_end}
    if design.u is None:
        record = _numerical_reference_record(design, pde, geometry, eval_grid, params)
        if hide_solution:  # nothing to hide: the data are the problem, the answer is computed
            record.evaluation_metadata.data_revision = DATA_REVISION
        return record
    domain = _domain_block(design, geometry, params)
    hiding = None
    if hide_solution and not design.smoke:
        hiding = _hiding(design, geometry, {"pde": pde, "domain": domain, "eval_grid": eval_grid}, key)
        if hiding.bumped:
            u = hiding.solution["u"]
            design = dataclasses.replace(design, u=tuple(u) if isinstance(u, list) else u)
    # a bumped solution's data is long: sympy's simplify would take minutes on it
    with mms.simplify_limit(0) if hiding and hiding.bumped else contextlib.nullcontext():
        pde["forcing"] = {
            "type": "expression",
            "value": mms.derive(design.family, pde_params, design.exact(), dim, transient),
        }
        exact = (
            [mms.text(mms.parse_expression(c)) for c in design.u]
            if isinstance(design.u, tuple)
            else mms.text(mms.parse_expression(design.u))
        )
        solution = cast("str | tuple[str, ...]", design.u)  # a manufactured case's (None returned above)
        bc = mms.fill_boundary_data(_manufactured_bc(design, geometry), design.family, pde_params, solution, dim)
    if hiding:
        hiding.hide(bc)
    case_spec: dict = {"pde": pde, "domain": domain, "bc": bc, "eval_grid": eval_grid, "output": _output_block(design)}
    if transient:
        case_spec["ic"] = mms.initial_condition(design.family, solution, 0.0)
    metadata: dict = {
        "construction_method": "manufactured_solution",
        "manufactured_solution": {**design.exact(), "u": exact},
    }
    if hide_solution:
        metadata["data_revision"] = DATA_REVISION
    record = _record(design, case_spec, metadata)
    if hide_solution and design.smoke:
        record.tags.structure.append("smoke_case")
    return record


def _hiding(design: Design, geometry, case_spec: dict, key: str | None = None):
    """A design's solution with a bump where it needs one, and the means to hide its
    boundary data (making/hiding.py)."""

    names = Output.model_validate(_output_block(design)).arrays
    return Hiding(
        key or design.id,
        design.family,
        design.pde_params(),
        design.exact(),
        geometry,
        case_spec,
        names,
        design.periodic,
    )


def _manufactured_bc(design: Design, geometry) -> dict:
    """Where the data go (mms.fill_boundary_data derives it): Dirichlet everywhere except
    on Neumann/Robin sides and periodic pairs; lap(u) where u is given (biharmonic)."""
    bc: dict = {}
    periodic_sides = {f"{d}_{end}" for d in design.periodic for end in ("min", "max")}
    natural = set(design.neumann) | set(design.robin) | periodic_sides
    if design.periodic:
        bc["periodic"] = {"directions": list(design.periodic)}
    if natural:
        dirichlet_tags = [tag for tag in geometry.tags if tag not in natural and tag != "boundary"]
        if dirichlet_tags:
            bc["dirichlet"] = {"on": dirichlet_tags}
    else:
        bc["dirichlet"] = {"on": "boundary"}
    # one condition per side: the flux of one solution differs from side to side
    neumann = [{"on": side} for side in design.neumann]
    robin = [{"on": side, "alpha": design.robin_alpha} for side in design.robin]
    for kind, items in (("neumann", neumann), ("robin", robin)):
        if items:
            bc[kind] = items[0] if len(items) == 1 else items
    if design.family == "biharmonic":  # the second condition of a fourth-order problem
        bc["laplacian"] = {"on": "boundary"}
    return bc


def _domain_block(design: Design, geometry, params: dict) -> dict:
    bbox = list(geometry.bbox)
    domain: dict = {"type": design.domain, "bounds": [bbox[2 * i : 2 * i + 2] for i in range(geometry.dim)]}
    if params:
        domain["geometry_params"] = params
    return domain


def _output_block(design: Design) -> dict:
    if isinstance(design.output, tuple):
        field = "displacement" if design.family == "linear_elasticity" else "velocity"
        return {"format": "npz", "field": field, "components": list(design.output)}
    return {"format": "npz", "field": design.output}


def _record(design: Design, case_spec: dict, metadata: dict) -> CaseRecord:
    return CaseRecord.model_validate(
        {
            "id": design.id,
            "pde_classification": {"equation_family": design.family, "math_type": design.math_type()},
            "case_spec": case_spec,
            "evaluation_config": {},
            "evaluation_metadata": metadata,
            "tags": {"structure": list(design.structure), "difficulty": [design.difficulty]},
            "supported_libraries": list(design.libraries) or libraries_for(design.family),
        }
    )


# which tracks carry which families (the paper's Table 3b)
FIREDRAKE_FAMILIES = set(FAMILIES) - {"navier_stokes", "burgers", "wave"}
DEALII_FAMILIES = FIREDRAKE_FAMILIES | {"navier_stokes"}


def libraries_for(family: str) -> list[str]:
    return ["dolfinx"] + [
        library
        for library, families in (("firedrake", FIREDRAKE_FAMILIES), ("dealii", DEALII_FAMILIES))
        if family in families
    ]


def _numerical_reference_record(design: Design, pde: dict, geometry, eval_grid: dict, params: dict) -> CaseRecord:
    """A case given by its data alone; `pdebench build-references` adds the reference."""
    forcing = list(design.forcing) if isinstance(design.forcing, tuple) else design.forcing
    pde["forcing"] = {"type": "expression", "value": forcing}
    conditions = [
        {"on": tag, "value": list(value) if isinstance(value, tuple) else value} for tag, value in design.dirichlet
    ]
    bc: dict = {"dirichlet": conditions[0] if len(conditions) == 1 else conditions}
    if design.family == "biharmonic":  # simply supported: lap(u) = 0 where u is given
        bc["laplacian"] = [{"on": c["on"], "value": "0"} for c in conditions]
        bc["laplacian"] = bc["laplacian"][0] if len(conditions) == 1 else bc["laplacian"]
    case_spec: dict = {
        "pde": pde,
        "domain": _domain_block(design, geometry, params),
        "bc": bc,
        "eval_grid": eval_grid,
        "output": _output_block(design),
    }
    if design.t_end is not None:
        case_spec["ic"] = {"value": design.initial}
        if design.family == "wave":
            case_spec["ic"]["velocity"] = "0"
    return _record(
        design,
        case_spec,
        {
            "construction_method": "reference_numerical",
            "reference_config": {"method": "oracle at 2x its own resolution"},
        },
    )


def starter_records(hide_solution: bool = True) -> list[CaseRecord]:
    return [build_record(design, hide_solution) for design in DESIGNS]
