"""Rewrite tests/durations.json from the JSON reports of `make test` or `make check` (each of
their passes): each test's measured seconds (the call), which give the `slow`
tier (tests/conftest.py). A test the reports measured takes their figure; one they did not run
keeps the figure it has (a `make check` measures the quick tier only), unless its file is gone;
of two reports that measured a test, the smaller figure (other work beside a run only adds).
Run by `make durations`; commit the file it writes.

    python scripts/durations.py REPORT.json [REPORT.json ...]   (a missing report is skipped)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "durations.json"
SLOW_SEC = 3.0  # tests/conftest.py's bound, for the summary line


def durations(report: dict) -> dict[str, float]:
    """Each test's call: its set-up is left out, since a module's shared fixture (a pytest run
    over toy solvers, a wheel built) is paid by whichever of its tests runs first. A test
    skipped (Firedrake's where it is not provisioned) measured nothing."""
    return {test["nodeid"]: round(test["call"].get("duration", 0.0), 2)
            for test in report.get("tests") or [] if test.get("call")}  # a skipped test has no call


def stored() -> dict[str, float]:
    try:
        kept = json.loads(OUT.read_text())
    except (OSError, ValueError):
        return {}
    return {nodeid: seconds for nodeid, seconds in kept.items() if (REPO / nodeid.split("::", 1)[0]).is_file()}


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    measured: dict[str, float] = {}
    for path in (p for p in paths if Path(p).is_file()):
        try:
            for nodeid, seconds in durations(json.loads(Path(path).read_text())).items():
                measured[nodeid] = min(seconds, measured.get(nodeid, seconds))
        except (OSError, ValueError) as exc:
            print(f"{path}: not a pytest JSON report ({exc})", file=sys.stderr)
            return 2
    if not measured:
        print(f"none of {', '.join(paths)} holds a measured test: run `make test` or `make check` first",
              file=sys.stderr)
        return 2
    merged = stored() | measured
    OUT.write_text(json.dumps(dict(sorted(merged.items())), indent=0) + "\n")
    slow = sum(seconds > SLOW_SEC for seconds in merged.values())
    print(f"wrote {OUT.relative_to(REPO)}: {len(measured)} tests measured, {len(merged)} in all, "
          f"{slow} over {SLOW_SEC:g} s (the slow tier), {sum(merged.values()) / 60:.1f} min in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
