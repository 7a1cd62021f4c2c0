"""Observed convergence orders of the DOLFINx oracle, family by family.

Runs each family's oracle on a manufactured starter case at a few mesh sizes (the
oracle's own CELLS_PER_LENGTH, halved and doubled; time steps shrink with h so the
spatial error dominates) and prints the relative L2 grid error and the observed order
log2(e_coarse / e_fine). P2 elements should show about 3 on smooth solutions.

    .venv/bin/python benchmarks/oracle_convergence.py [--families poisson,heat]

The oracle is trusted code, so it runs here in-process (no sandbox).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ORACLE = REPO / "submissions" / "oracle" / "dolfinx"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(ORACLE))

CASES = {
    "poisson": "poisson_basic",
    "helmholtz": "helmholtz_k5",
    "convection_diffusion": "convdiff_moderate_pe",
    "heat": "heat_basic",
    "reaction_diffusion": "rd_linear",
}
LEVELS = (0.5, 1.0, 2.0)  # multiples of the oracle's own resolution


def error_at(family: str, record, factor: float) -> tuple[float, int]:
    import numpy as np

    from pytest_pdebench.grid import EvalGrid, valid_mask
    from pytest_pdebench.metrics import relative_l2_error
    from pytest_pdebench.reference import reference_fields

    importlib.import_module("mpi4py.MPI")  # loads libmpi before dolfinx
    import _oracle_common as common

    module = importlib.import_module(family)
    base_cells, base_dt = module.CELLS_PER_LENGTH, common.DT_MAX
    module.CELLS_PER_LENGTH = round(base_cells * factor)
    common.DT_MAX = base_dt / factor ** 1.5  # O(dt^2) time error stays below O(h^3)
    spec = record.case_spec_dict()
    try:
        with tempfile.TemporaryDirectory() as work:
            cwd = os.getcwd()
            os.chdir(work)
            try:
                module.solve(spec)
                u = np.load("solution.npz")["u"][..., None]
                dofs = json.load(open("meta.json"))["solver_info"]["num_dofs"]
            finally:
                os.chdir(cwd)
    finally:
        module.CELLS_PER_LENGTH, common.DT_MAX = base_cells, base_dt
    grid = EvalGrid.from_spec(spec["eval_grid"])
    valid = valid_mask(spec, grid)
    return relative_l2_error(u, reference_fields(record, grid), valid), dofs


def main() -> None:
    from pytest_pdebench.cases import load_cases

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(CASES))
    args = parser.parse_args()
    records = {r.id: r for _, _, r in load_cases(REPO / "cases")}
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
