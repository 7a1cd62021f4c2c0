"""Run the per-record checks on every record of the shipped suite and the smoke cases, print
what each check cost and what failed, and, when every record passes, write the digest the
tests assert (``tests/suite-checked.json``; see pytest_pdebench/testing/suite_checks.py).

    .venv/bin/python benchmarks/suite_checks.py [--jobs 2]

Run it after changing a case file or a check: until then ``tests/test_cases.py`` fails.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from pytest_pdebench.testing.suite_checks import CHECKED, problems_of, suite_digest, suite_records

_RECORDS: list = []  # each worker's, loaded once (the records do not pickle cheaply)


def _load() -> None:
    _RECORDS.extend(suite_records())


def _check(index: int) -> tuple[str, list[str], float]:
    file, record = _RECORDS[index]
    started = time.perf_counter()
    found = problems_of(file, record)
    return record.id, found, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    digest = suite_digest()
    count = len(suite_records())
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs, initializer=_load) as pool:
        results = list(pool.map(_check, range(count), chunksize=8))
    wall = time.perf_counter() - started
    failed = [(case_id, found) for case_id, found, _ in results if found]
    seconds = sorted(sec for _, _, sec in results)
    print(
        f"{count} records checked in {wall:.0f} s wall on {args.jobs} processes "
        f"({sum(seconds):.0f} s of checks; per record median {seconds[len(seconds) // 2]:.2f} s, "
        f"slowest {seconds[-1]:.1f} s)"
    )
    for case_id, found in failed:
        print(f"FAILED {case_id}: " + "; ".join(found))
    if failed or digest != suite_digest():
        print(f"{len(failed)} failed" if failed else "the suite changed while it was checked", file=sys.stderr)
        return 1
    CHECKED.write_text(
        json.dumps(
            {
                "digest": digest,
                "records": count,
                "checked": datetime.date.today().isoformat(),
                "wall_sec": round(wall, 1),
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {CHECKED}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
