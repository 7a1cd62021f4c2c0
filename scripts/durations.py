"""Rewrite tests/durations.json from the JSON reports of a `make test` (its two passes):
each test's measured seconds (setup, call and teardown), which give the `slow` tier
(tests/conftest.py). Run by `make durations`; commit the file it writes.

    python scripts/durations.py reports/tests-parallel.json reports/tests-alone.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "durations.json"


def durations(report: dict) -> dict[str, float]:
    found = {}
    for test in report.get("tests") or []:
        seconds = sum((test.get(phase) or {}).get("duration", 0.0) for phase in ("setup", "call", "teardown"))
        found[test["nodeid"]] = round(seconds, 2)
    return found


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    measured: dict[str, float] = {}
    for path in paths:
        try:
            measured.update(durations(json.loads(Path(path).read_text())))
        except (OSError, ValueError) as exc:
            print(f"{path}: not a pytest JSON report ({exc}); run `make test` first", file=sys.stderr)
            return 2
    OUT.write_text(json.dumps(dict(sorted(measured.items())), indent=0) + "\n")
    slow = sum(seconds > 3 for seconds in measured.values())
    print(f"wrote {OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}: {len(measured)} tests, "
          f"{slow} over 3 s (the slow tier), {sum(measured.values()) / 60:.1f} min in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
