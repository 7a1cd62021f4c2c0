"""Dishonest: zeros of the requested shape."""
from _cheat import field, grid, write


def solve(case_spec):
    axes, mesh = grid(case_spec)
    write(case_spec, field("0", mesh, 0.0), axes)
