"""The calibration baseline's discretization of each case, an ordinary one as in the paper.

The paper sets thresholds from a "standard calibration configuration" run, not from a
near-exact solve: ``tau_acc = alpha_acc * e_base`` is only as permissive as the paper
says (agents may pick their own meshes and orders) if e_base is the error of an
ordinary discretization. So every record carries, per library, the element degree, the
cells per side and the time step the oracle uses when it calibrates
(``evaluation_metadata.calibration_config``, cases.CalibrationConfig). Only the
calibration run sees it (``calibration_config.json`` in its working folder).

Where the settings come from:
- imported upstream records: their own ``oracle_config`` (degree, resolution, dt);
- generated records: a resolution and time step drawn, seeded by the case id, from the
  upstream records of the same family and dimension (read from ``benchmark_v2.jsonl`` at
  build time, never committed), then:
  - 2-D, except flows: P1, the resolution times the family's ``RESOLUTION_SCALE``. Our
    P2 oracle at upstream resolutions lands 30-1000x below Table 6's medians on our
    manufactured solutions (the pilot: docs/calibration.md), and P2 meshes coarse
    enough to reach them have 8-20 cells per side; P1 at upstream-like resolutions
    reproduces the paper's difficulty with an ordinary mesh;
  - flows: Taylor-Hood P2-P1 (the oracle's element), the resolution scaled likewise;
  - 3-D: the upstream draw as it is (mostly P2 on 8-28 cells per side);
- ``refined``: a case whose baseline error came out at or above ``REFINE_ABOVE`` (then a
  reference with 1% noise could pass) gets P2, or a finer P2 mesh, recorded in its source;
- ``coarsened``: a case whose tau_acc leaves the strong oracle (the anchor that must pass,
  else a verdict says nothing) too little room gets a coarser mesh, aimed COARSEN_MARGIN above
  the e_base at which the anchor just fits (its error at most 0.5 x tau_acc, or 0.1 x
  against a reference): the case is then no longer 10-250x stricter than the paper's
  family median (the first refinement pass turned P1/120-260 Helmholtz meshes into P2 on
  the same mesh, e_base 1e-6);
- ``... for LIBRARY``: a step taken for one library only (``adjusted`` by hand, say a
  direct solve over the timeout; or ``coarsened --own``, where that library's strong
  oracle is weaker than the shared setting's baseline): the other libraries keep theirs.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import defaultdict
from pathlib import Path
from typing import cast

from ..bundled import UPSTREAM_FILE
from ..calibration import ANCHOR_ACC_SHARE, REFERENCE_AGREEMENT, CalibrationStore, materialize, reference_build_gap
from ..cases import CalibrationConfig, CalibrationSetting, case_files, iter_case_file, write_case_file
from ..fingerprints import case_fingerprint
from ..sources.folder import oracle_fingerprint
from ..thresholds import Alphas
from .rebuilds import setting_steps

FLOW_FAMILIES = ("stokes", "navier_stokes")
MAX_DEGREE = 2  # the oracles implement P1 and P2 (a few upstream records use P3/P4)
# 2-D resolution factor per family (see the module doc; measured in the pilot, docs/calibration.md)
RESOLUTION_SCALE = {
    "poisson": 1.5,
    "heat": 1.2,
    "helmholtz": 1.0,
    "convection_diffusion": 0.8,
    "biharmonic": 0.6,
    "linear_elasticity": 1.0,
    "reaction_diffusion": 0.6,
    "stokes": 0.25,
    "navier_stokes": 0.22,
    "burgers": 0.4,
    "wave": 1.0,
}
REFINE_ABOVE = 1e-3
REFINE_TARGET = 4e-4
MIN_CELLS = {2: 8, 3: 4}
MAX_REFINED_CELLS = {2: 320, 3: 16}  # a P2 solve there takes seconds to a minute, not minutes (3-D LU: t ~ n^6)
MAX_REFINED_P1_CELLS = 640  # 2-D P1 with ~400k dofs: still a few seconds with LU


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
        raise MissingUpstream(
            f"no upstream file at {path}: the calibration settings are drawn from the "
            "upstream records' oracle_config (PDEAgent-Bench benchmark_v2.jsonl)"
        )
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
    setting: dict[str, int | float] = {"element_degree": degree, "cells_per_side": int(cells)}
    if transient and dt:
        setting["dt"] = float(dt)
    return setting


def drawn_setting(case_id: str, family: str, dim: int, transient: bool, pools: dict) -> dict:
    pool = pools.get((family, dim)) or pools.get((family, 2))
    if not pool:
        raise ValueError(f"{case_id}: no upstream {family} record to draw a calibration setting from")
    degree, cells, dt = _rng(case_id).choice(pool)
    if dim == 2:
        degree = 2 if family in FLOW_FAMILIES else 1
        cells = cells * RESOLUTION_SCALE.get(family, 1.0)
    elif (family, 3) not in pools:
        cells = cells / 8  # a 2-D resolution used for a 3-D case: keep the cost of the solve in reach
    return setting_dict(family, degree, max(MIN_CELLS[dim], round(cells)), dt, transient)


def refined(setting: dict, e_base: float, dim: int) -> dict:
    """A finer discretization for a baseline whose error is too large, aimed at
    REFINE_TARGET: a 2-D P1 mesh is refined as e ~ h^2 predicts while it stays under
    MAX_REFINED_P1_CELLS (P1 on the same mesh would land 10-100x below the target and
    take the case out of the paper's range); otherwise P1 becomes P2 on the same mesh
    (3-D, or pollution and corner singularities a P1 mesh cannot afford); a P2 mesh is
    refined as e ~ h^3 predicts, up to MAX_REFINED_CELLS."""
    if setting["element_degree"] == 1:
        cells = math.ceil(setting["cells_per_side"] * math.sqrt(e_base / REFINE_TARGET))
        if dim == 2 and cells <= MAX_REFINED_P1_CELLS:
            return {**setting, "cells_per_side": cells}
        return {**setting, "element_degree": 2}
    factor = (e_base / REFINE_TARGET) ** (1.0 / 3.0)
    cells = min(MAX_REFINED_CELLS[dim], int(round(setting["cells_per_side"] * factor)))
    return {**setting, "cells_per_side": max(cells, setting["cells_per_side"])}


ROUNDING_LEVEL = 1e-6  # a baseline this close to its reference reproduces it (same discretization)
COARSEN_POWER = {1: 2.0, 2: 4.0}  # assumed e ~ h^p; 4 for P2: pollution makes coarse P2 lose faster than h^3


COARSEN_CEILING = 0.8 * REFINE_ABOVE  # never aim where the next refinement pass would undo it
# aim this far above the e_base at which the anchor just fits: aimed at the bare figure, the
# coarsened baselines of session 12 came out at 0.10-0.11 x tau_acc against a limit of 0.1
COARSEN_MARGIN = 1.5


def coarsened(setting: dict, e_base: float, aim: float, dim: int) -> dict | None:
    """A coarser mesh for a baseline that leaves the strong oracle too little room, aimed at
    the error min(aim, COARSEN_CEILING) (the caller derives aim from the oracle's error);
    None when e_base is not below that. A baseline at rounding level reproduces the reference's discretization:
    its mesh is halved (the error gives no rate to aim with)."""
    target = min(aim, COARSEN_CEILING)
    if e_base >= target:
        return None
    cells = setting["cells_per_side"]
    if e_base < ROUNDING_LEVEL:
        new = cells // 2
    else:
        new = math.floor(cells * (e_base / target) ** (1.0 / COARSEN_POWER[setting["element_degree"]]))
    new = max(MIN_CELLS[dim], new)
    return {**setting, "cells_per_side": new} if new < cells else None


def kept_on_redraw(source: str) -> bool:
    """Whether a setting was set by hand or for one library apart from the others (drawing
    the record's settings again would lose it)."""
    return any(kind == "adjusted" or only for kind, only, _, _ in setting_steps(source))


def calibration_config(record, pools: dict) -> dict:
    """The calibration_config block of a generated record (the same settings for every
    library it supports: each track's oracle discretizes alike)."""
    spec = record.case_spec
    dim = 3 if spec.eval_grid.nz else 2
    setting = drawn_setting(record.id, record.family, dim, spec.pde.time is not None, pools)
    return {
        "source": f"drawn from the upstream {record.family} records' oracle_config (seed: case id)",
        "settings": {library: dict(setting) for library in record.supported_libraries},
    }


def attach(records: list, pools: dict) -> list:
    """Every record with its calibration_config drawn (returns the same records)."""
    for record in records:
        record.evaluation_metadata.calibration_config = CalibrationConfig.model_validate(
            calibration_config(record, pools)
        )
    return records


def update_case_files(
    cases: Path,
    upstream: Path,
    calibrations: Path,
    refine: str | None = None,
    coarsen: str | None = None,
    own: bool = False,
    families: list[str] | None = None,
    log=print,
) -> None:
    """``pdebench calibration-configs``: draw the calibration settings of the records under
    ``cases`` again, in place (nothing else in them changes; after a change of
    RESOLUTION_SCALE, say), or with ``refine``/``coarsen`` = LIBRARY move them by this
    machine's calibration of LIBRARY (``refine_settings``, ``coarsen_settings``). Imported
    records keep their own settings, and so do settings adjusted by hand or for one library
    (``kept_on_redraw``: the reason is in the source). ``families``: only their records.
    The upstream file is read first, so a missing one stops before any file is written."""

    def redrawn(record) -> bool:
        config = record.evaluation_metadata.calibration_config
        return not (config and (config.upstream_oracle is not None or kept_on_redraw(config.source)))

    pools = None if refine or coarsen else read_distribution(upstream)
    for file in case_files(cases):
        records = [record for _, record in iter_case_file(file)]
        chosen = [r for r in records if not families or r.family in families]
        if refine:
            changed = refine_settings(chosen, refine, calibrations)
        elif coarsen:
            changed = coarsen_settings(chosen, coarsen, calibrations, own=own)
        else:
            changed = len(attach([r for r in chosen if redrawn(r)], cast(dict, pools)))  # read: neither option
        write_case_file(file, records)
        log(
            f"{file}: calibration settings {'refined' if refine else 'coarsened' if coarsen else 'drawn'} for "
            f"{changed} of {len(records)} records"
        )


def refine_settings(records: list, library: str, calibrations: Path) -> int:
    """Give a finer discretization (``refined``) to the records whose baseline error on this
    machine's calibration of ``library`` is at or above REFINE_ABOVE, where a reference with
    1% noise could pass; returns how many changed. A record without a current calibration
    entry, or already as fine as a calibration setting gets, stays as it is."""
    entries = CalibrationStore(calibrations).entries(library)
    changed = 0
    for record in records:
        entry, config = entries.get(record.id), record.evaluation_metadata.calibration_config
        if not (
            entry
            and config
            and entry["fingerprint"] == case_fingerprint(record, library)
            and entry["e_base"] >= REFINE_ABOVE
        ):
            continue
        before = config.settings[library].model_dump(exclude_none=True)
        after = refined(before, entry["e_base"], 3 if record.case_spec.eval_grid.nz else 2)
        if after == before:
            continue  # as fine as a calibration setting gets
        change_setting(config, before, after, "refined", f"e_base {entry['e_base']:.1e} on {library}")
        changed += 1
    return changed


def coarsen_settings(records: list, library: str, calibrations: Path, own: bool = False) -> int:
    """Coarser meshes where this machine's baseline of ``library`` leaves too little room: the
    strong oracle's error (stored by `pdebench reference-agreement`) above ANCHOR_ACC_SHARE
    x tau_acc, or a reference ``library``'s oracle built farther than REFERENCE_AGREEMENT x
    tau_acc from its level 1 (the strong oracle is the anchor that must pass every case).
    ``own``: for ``library`` only (its strong oracle is weaker than the others'). Returns how
    many records changed."""
    store = CalibrationStore(calibrations)
    entries = store.entries(library)
    changed = 0
    for record in records:
        entry, config = entries.get(record.id), record.evaluation_metadata.calibration_config
        # the binding one of: the anchor's error (at most ANCHOR_ACC_SHARE x tau_acc) and the
        # reference's distance from the oracle a level below (at most REFERENCE_AGREEMENT x tau_acc)
        checks = [
            (figures["e_strong"], share)
            for figures, share in (
                (store.strong_oracle(record, library, oracle_fingerprint(record, library)), ANCHOR_ACC_SHARE),
                (reference_build_gap(record, library), REFERENCE_AGREEMENT),
            )
            if figures
        ]
        if not (entry and config and checks and entry["fingerprint"] == case_fingerprint(record, library)):
            continue
        e_strong, share = max(checks, key=lambda check: check[0] / check[1])
        if e_strong <= share * materialize(record, library, entry, "", Alphas()).tau_acc:
            continue  # the anchor passes with room (and agrees with the reference)
        if e_strong > share * record.evaluation_config.tau_max:
            continue  # no tau_acc under the cap leaves room: the oracle or the reference must get better
        before = config.settings[library].model_dump(exclude_none=True)
        # tau_acc grows with e_base: the e_base at which the anchor just fits, with room
        tau_acc = materialize(record, library, entry, "", Alphas()).tau_acc
        aim = COARSEN_MARGIN * entry["e_base"] * e_strong / (share * tau_acc)
        after = coarsened(before, entry["e_base"], aim, 3 if record.case_spec.eval_grid.nz else 2)
        if after is None:
            continue
        change_setting(
            config,
            before,
            after,
            "coarsened",
            f"e_base {entry['e_base']:.1e} under the strong oracle's {e_strong:.1e} on {library}",
            only=library if own else None,
        )
        changed += 1
    return changed


def change_setting(config, before: dict, after: dict, step: str, why: str, only: str | None = None) -> None:
    """Give every library whose setting is ``before`` (only ``only``'s, when given) the
    setting ``after`` (a library's own adjusted setting stays) and name the step in the
    source (tests replay the steps, ``steps``)."""
    for name, current in config.settings.items():
        if (only is None or name == only) and current.model_dump(exclude_none=True) == before:
            config.settings[name] = CalibrationSetting.model_validate(after)
    config.source += (
        f"; {step}{f' for {only}' if only else ''} from P{before['element_degree']}/"
        f"{before['cells_per_side']} to P{after['element_degree']}/{after['cells_per_side']} ({why})"
    )
