"""Dishonest: the initial condition returned as the answer (steady cases: zeros)."""
from _cheat import field, grid, write


def solve(case_spec):
    axes, mesh = grid(case_spec)
    t0 = (case_spec["pde"].get("time") or {}).get("t0", 0.0)
    write(case_spec, field((case_spec.get("ic") or {"value": "0"})["value"], mesh, t0), axes)
