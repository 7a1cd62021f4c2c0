"""The calibration baseline's discretization of each case (issue 11, part 2).

The paper sets thresholds from a "standard calibration configuration" run, not from a
near-exact solve: ``tau_acc = alpha_acc * e_base`` is only as permissive as the paper
says (agents may pick their own meshes and orders) if e_base is the error of an
ordinary discretization. So every record carries, per library, the element degree, the
cells per side and the time step the oracle uses when it calibrates
(``evaluation_metadata.calibration_config``, cases.CalibrationConfig). Only the
calibration run sees it (``calibration_config.json`` in its working folder).

Where the settings come from:
- imported upstream records: their own ``oracle_config`` (degree, resolution, dt);
- generated records: drawn, seeded by the case id, from the upstream records of the same
  family and dimension (read from ``benchmark_v2.jsonl`` at build time, never
  committed), then the resolution is multiplied by the family's factor in
  ``RESOLUTION_SCALE``. The factors were measured (README, "Calibration"): our
  manufactured solutions are smoother or rougher than upstream's, so the same mesh does
  not give the same error; the factor moves each family's median e_base to Table 6's
  while the draw keeps the upstream spread of degrees and resolutions.
Taylor-Hood flows keep P2-P1 (the oracle's element); only the mesh is drawn.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path

UPSTREAM_FILE = Path("../shared/upstream/benchmark_v2.jsonl")
FLOW_FAMILIES = ("stokes", "navier_stokes")
MAX_DEGREE = 2  # the oracles implement P1 and P2 (a few upstream records use P3/P4)
# family -> (factor for P1 resolutions, factor for P2 resolutions); see the module doc
RESOLUTION_SCALE: dict[str, tuple[float, float]] = {}
MIN_CELLS = {2: 8, 3: 4}


class MissingUpstream(FileNotFoundError):
    """The upstream file is needed to draw calibration settings."""


Draw = tuple[int, int, float | None]  # (degree, cells per side, dt)


def upstream_setting(oracle_config: dict) -> Draw:
    """(degree, cells per side, dt) of one upstream oracle_config."""
    fem = oracle_config.get("fem", {})
    degree = fem.get("degree", fem.get("degree_u", 1))
    time = oracle_config.get("pde", {}).get("time") or {}
    return int(degree), int(oracle_config["mesh"]["resolution"]), time.get("dt")


def read_distribution(path: Path = UPSTREAM_FILE) -> dict[tuple[str, int], list[Draw]]:
    """(family, dim) -> the upstream records' settings, in file order."""
    if not Path(path).is_file():
        raise MissingUpstream(f"no upstream file at {path}: the calibration settings are drawn from the "
                              "upstream records' oracle_config (PDEAgent-Bench benchmark_v2.jsonl)")
    pools: dict[tuple[str, int], list[Draw]] = defaultdict(list)
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            config = json.loads(line)["oracle_config"]
            dim = 3 if "nz" in config["output"]["grid"] else 2
            pools[config["pde"]["type"], dim].append(upstream_setting(config))
    return dict(pools)


def _rng(case_id: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(f"{case_id}:calibration".encode()).digest()[:8], "little"))


def setting_dict(family: str, degree: int, cells: int, dt: float | None, transient: bool) -> dict:
    degree = 2 if family in FLOW_FAMILIES else min(max(degree, 1), MAX_DEGREE)
    setting = {"element_degree": degree, "cells_per_side": int(cells)}
    if transient and dt:
        setting["dt"] = float(dt)
    return setting


def drawn_setting(case_id: str, family: str, dim: int, transient: bool, pools: dict) -> dict:
    pool = pools.get((family, dim)) or pools.get((family, 2))
    if not pool:
        raise ValueError(f"{case_id}: no upstream {family} record to draw a calibration setting from")
    degree, cells, dt = _rng(case_id).choice(pool)
    if dim == 3 and (family, 3) not in pools:
        cells = cells / 8  # a 2-D resolution used for a 3-D case: keep the cost of the solve in reach
    degree = 2 if family in FLOW_FAMILIES else min(max(degree, 1), MAX_DEGREE)
    factor = RESOLUTION_SCALE.get(family, (1.0, 1.0))[degree - 1]
    cells = max(MIN_CELLS[dim], round(cells * factor))
    if transient and not dt:  # upstream gives none for this family: the oracle's own step
        dt = None
    return setting_dict(family, degree, cells, dt, transient)


def calibration_config(record, pools: dict) -> dict:
    """The calibration_config block of a generated record (the same settings for every
    library it supports: each track's oracle discretizes alike)."""
    spec = record.case_spec
    dim = 3 if spec.eval_grid.nz else 2
    setting = drawn_setting(record.id, record.family, dim, spec.pde.time is not None, pools)
    return {"source": f"drawn from the upstream {record.family} records' oracle_config (seed: case id)",
            "settings": {library: dict(setting) for library in record.supported_libraries}}


def attach(records: list, pools: dict) -> list:
    """Every record with its calibration_config drawn (returns the same records)."""
    from ..cases import CalibrationConfig

    for record in records:
        record.evaluation_metadata.calibration_config = CalibrationConfig.model_validate(
            calibration_config(record, pools))
    return records
