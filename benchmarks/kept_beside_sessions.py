"""Issue 62: can sessions under another HOME buy a kept baseline? N sessions, each with HOME
and PDEBENCH_CACHE of their own, run a solver that spins a core; once they run, a session
times the oracle for keeping (--pde-baseline=local, a store of kept baselines of its own);
then the same timing alone, for the quiet figure.

    .venv/bin/python benchmarks/kept_beside_sessions.py [--sessions 3] [--case ID]
    PYTHONPATH=<a worktree> .venv/bin/python benchmarks/kept_beside_sessions.py   # another main

Prints what the baseline pass did, the item's t_base and where it came from, and the quiet
t_base. Asserts nothing (tests/test_kept_baselines.py asserts the rule).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_pdebench.cases import load_cases
from pytest_pdebench.testing import ORACLE, REPO

SPIN = "def solve(case_spec):\n    while True:\n        pass\n"


def session(folder: Path, cases: Path, *extra: str) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx", f"--pde-cases={cases}",
            f"--pde-output={folder / 'out'}", "--pde-runs=1", *extra]  # fmt: skip


def timing(folder: Path, cases: Path, case: str, kept: Path) -> tuple[str, dict, dict]:
    """A session's first timing of the oracle on ``case``: (what its pass said, its timing, the item's verdict)."""
    env = {**os.environ, "PDEBENCH_BASELINES": str(kept)}
    done = subprocess.run(session(folder, cases, f"--pde-submissions={ORACLE}", "--pde-baseline=local"),
                          cwd=REPO, env=env, capture_output=True, text=True)  # fmt: skip
    pass_dir = folder / "out" / "baselines" / "dolfinx" / case
    said = (pass_dir / "kept.txt").read_text().strip() if (pass_dir / "kept.txt").exists() else next(
        (line for line in done.stdout.splitlines() if "another session" in line), "no pass"
    )
    timed = json.loads((pass_dir / "verdict.json").read_text()) if (pass_dir / "verdict.json").exists() else {}
    item = json.loads((folder / "out" / "dolfinx" / case / "verdict.json").read_text())
    return said, timed, item


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--case", default="poisson_smooth_kappa_annulus_000")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kept-beside-sessions-"))
    records = [r for _, _, r in load_cases(REPO / "cases") if r.id == args.case]
    cases = tmp / "cases.jsonl"
    cases.write_text("".join(json.dumps(r.model_dump(mode="json", exclude_none=True)) + "\n" for r in records))
    (tmp / "references").symlink_to(REPO / "cases" / "references")
    (tmp / "spin" / "dolfinx").mkdir(parents=True)
    (tmp / "spin" / "dolfinx" / f"{args.case}.py").write_text(SPIN)
    hog_env = {**os.environ, "HOME": str(tmp / "hog-home"), "PDEBENCH_CACHE": str(tmp / "hog-cache")}
    hog_env.pop("PDEBENCH_BASELINES", None)
    hogs = [
        subprocess.Popen(
            session(tmp / f"hog-{n}", cases, f"--pde-submissions={tmp / 'spin'}", "--pde-baseline=stored",
                    "--pde-timeout=300"),
            cwd=REPO, env=hog_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for n in range(args.sessions)
    ]
    time.sleep(25)  # their solvers spin by then
    try:
        said, timed, item = timing(tmp / "beside", cases, args.case, tmp / "kept-beside")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(f"beside {args.sessions} sessions of another HOME: pass: {said}")
    print(f"  timed t_base {timed.get('t_agent')}, cores {timed.get('cores_used')}; item {item['outcome']}, "
          f"t_base {item.get('t_base')} ({item.get('t_base_from')})")  # fmt: skip
    said, timed, item = timing(tmp / "quiet", cases, args.case, tmp / "kept-quiet")
    print(f"quiet: pass: {said}; t_base {timed.get('t_agent')}, cores {timed.get('cores_used')}")


if __name__ == "__main__":
    main()
