"""Calibration runs: when the harness runs an oracle as a case's calibration baseline it
puts ``calibration_config.json`` beside ``case_spec.json`` (never in an evaluation run).
It holds the record's settings for the library (element_degree, cells_per_side, dt), the
paper's "standard calibration configuration"; the oracle then uses them instead of its
own, stronger ones."""

import functools
import json

SETTING_FILE = "calibration_config.json"


@functools.cache
def calibration_setting():
    """The calibration settings of this run, or None (an ordinary run)."""
    try:
        with open(SETTING_FILE, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def discretization(degree, cells):
    """(degree, cells per side): the oracle's own, or the calibration settings'."""
    setting = calibration_setting()
    if setting is None:
        return degree, cells
    return setting["element_degree"], setting["cells_per_side"]


def largest_time_step(default):
    setting = calibration_setting()
    return setting.get("dt") or default if setting else default
