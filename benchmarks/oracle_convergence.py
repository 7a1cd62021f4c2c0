"""Observed convergence orders of the DOLFINx oracle, family by family.

Runs each family's oracle on a manufactured starter case at a few mesh sizes (the
oracle's reference grade, halved and doubled, as in build/refinement.py) and prints the relative
L2 grid error and the observed order
log2(e_coarse / e_fine). P2 elements should show about 3 on smooth solutions.

    .venv/bin/python benchmarks/oracle_convergence.py [--families poisson,heat]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ORACLE = REPO / "submissions" / "oracle" / "dolfinx"

CASES = {
    "poisson": "poisson_basic",
    "helmholtz": "helmholtz_k5",
    "convection_diffusion": "convdiff_moderate_pe",
    "heat": "heat_basic",
    "reaction_diffusion": "rd_linear",
    "linear_elasticity": "elasticity_square",
    "stokes": "stokes_square",
    "navier_stokes": "navier_stokes_square",
    "burgers": "burgers_circle",
    "wave": "wave_square",
    "biharmonic": "biharmonic_exp_mode",
}
LEVELS = (0.5, 1.0, 2.0)  # multiples of the oracle's own resolution


def error_at(family: str, record, factor: float) -> tuple[float, int]:
    from pytest_pdebench.grid import EvalGrid, valid_mask
    from pytest_pdebench.making.refinement import run_oracle
    from pytest_pdebench.metrics import relative_l2_error
    from pytest_pdebench.reference import reference_fields

    spec = record.case_spec_dict()
    u, info = run_oracle(ORACLE, family, spec, record.case_spec.output.arrays, factor)
    grid = EvalGrid.from_spec(spec["eval_grid"])
    valid = valid_mask(spec, grid)
    return relative_l2_error(u, reference_fields(record, grid), valid), info["num_dofs"]


def main() -> None:
    from pytest_pdebench.cases import load_cases

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(CASES))
    args = parser.parse_args()
    records = {r.id: r for _, _, r in load_cases(REPO / "pytest_pdebench" / "data" / "smoke")}
    print(f"{'family':22s} {'case':22s} {'level':>6s} {'dofs':>8s} {'rel. L2':>10s} {'order':>6s}")
    for family in args.families.split(","):
        record = records[CASES[family]]
        previous = None
        for factor in LEVELS:
            error, dofs = error_at(family, record, factor)
            order = f"{math.log2(previous / error):6.2f}" if previous else ""
            print(f"{family:22s} {record.id:22s} {factor:6.2f} {dofs:8d} {error:10.3e} {order:>6s}")
            previous = error


if __name__ == "__main__":
    main()
