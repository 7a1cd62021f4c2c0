"""How the oracle runs when it is a baseline: the record's calibration setting for the
library (given to a calibration run as ``calibration_config.json``), and the coarse one the
baseline pass warms its kernels with."""

from __future__ import annotations

from .cases import CaseRecord


def calibration_setting(record: CaseRecord, library: str) -> dict | None:
    """The settings the oracle calibrates this item with, or None (then it uses its own)."""
    config = record.evaluation_metadata.calibration_config
    setting = config.settings.get(library) if config else None
    return setting.model_dump(exclude_none=True) if setting else None


# the baseline pass's warm-up (execution._Side.warm_up): the calibration setting with a mesh
# this many times coarser per side (at least WARMUP_MIN_CELLS cells) and the same element
# degree and time step, so the same forms and kernels (a larger step changed the wave oracle's:
# its 1 / (beta dt^2) is a number in the form, not a Constant)
WARMUP_COARSER = 8

WARMUP_MIN_CELLS = 4


def warmup_setting(setting: dict) -> dict:
    """The coarse setting the baseline pass warms the oracle's kernels with."""
    cells = setting["cells_per_side"]
    return {**setting, "cells_per_side": min(cells, max(WARMUP_MIN_CELLS, cells // WARMUP_COARSER))}
