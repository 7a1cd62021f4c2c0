"""Dishonest: the Dirichlet data, evaluated on the whole grid at t_end."""
from _cheat import field, first, grid, t_end, write


def solve(case_spec):
    axes, mesh = grid(case_spec)
    condition = first(case_spec["bc"].get("dirichlet") or {"value": "0"})
    write(case_spec, field(condition["value"], mesh, t_end(case_spec)), axes)
