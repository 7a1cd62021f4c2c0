"""What saying where a solution is wrong costs an item, for each record of the bundled suite on
its own evaluation grid, against a perturbed reference (the arrays the judge holds: nothing is
solved): ``error_regions.where_wrong`` (every verdict: the bands of the boundary pieces and the
interior, the error per region) and, with ``--pictures``, ``pictures.draw_fields`` (fields.png:
failed items by default, every item with --pde-pictures=all). Prints the per-record times
(median, 90th percentile, largest; by domain) and the sum over the suite (one track's items,
all of them drawn: --pde-pictures=all). Asserts nothing.

    .venv/bin/python benchmarks/where_wrong_cost.py [--cases cases/] [--pictures]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from pytest_pdebench.cases import load_cases
from pytest_pdebench.domains import resolve_geometry
from pytest_pdebench.error_regions import where_wrong
from pytest_pdebench.grid import EvalGrid, valid_mask
from pytest_pdebench.pictures import draw_fields

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=REPO / "cases")
    parser.add_argument("--pictures", action="store_true", help="time fields.png too")
    args = parser.parse_args()
    measures = {"where_wrong": [], "draw_fields": []}
    by_domain = {name: defaultdict(list) for name in measures}
    folder = Path(tempfile.mkdtemp(prefix="where-wrong-"))
    rng = np.random.default_rng(0)
    for _, _, record in load_cases(args.cases):
        spec = record.case_spec_dict()
        grid = EvalGrid.from_spec(spec["eval_grid"])
        geometry = resolve_geometry(spec["domain"])
        valid = valid_mask(spec, grid, geometry)
        components = len(record.case_spec.output.arrays)
        reference = rng.standard_normal((*grid.shape, components))
        solution = reference + 1e-3 * rng.standard_normal(reference.shape)
        started = time.perf_counter()
        regions = where_wrong(spec, geometry, grid, valid, solution, reference)
        spent = time.perf_counter() - started
        assert sum(region["points"] for region in regions) == int(valid.sum())
        measures["where_wrong"].append(spent)
        by_domain["where_wrong"][record.domain_type].append(spent)
        if args.pictures:
            started = time.perf_counter()
            names = record.case_spec.output.arrays
            draw_fields(folder / "fields.png", solution, reference, valid, grid, geometry, names, record.id)
            spent = time.perf_counter() - started
            measures["draw_fields"].append(spent)
            by_domain["draw_fields"][record.domain_type].append(spent)
    for name, times in measures.items():
        if not times:
            continue
        times.sort()
        print(f"{name}: {len(times)} records; per record: median {1e3 * statistics.median(times):.1f} ms, "
              f"90th percentile {1e3 * times[int(0.9 * len(times))]:.1f} ms, largest {1e3 * times[-1]:.1f} ms; "
              f"the suite: {sum(times):.1f} s")
        for domain, spent in sorted(by_domain[name].items(), key=lambda item: -max(item[1])):
            print(f"  {domain:20s} {len(spent):4d} records, median {1e3 * statistics.median(spent):7.1f} ms, "
                  f"largest {1e3 * max(spent):7.1f} ms")


if __name__ == "__main__":
    main()
