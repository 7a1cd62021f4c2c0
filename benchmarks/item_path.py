"""Issue 47: the path an item's record takes from the session to its verdict.json, module by
module, measured on one real item (a toy numpy solver on poisson_basic, DOLFINx track,
bubblewrap, the warm runner, one timed run) in this process.

    .venv/bin/python benchmarks/item_path.py [--list] [--paired | --sibling | --model]

A profiler watches every call into the package while the item runs; a call *carries the
item* when one of its arguments (``self`` aside: the record's and the plan's own methods
are no hand-over) is the item's record or a plan holding it (from the session's entry,
``session.PdeRun.evaluate``, on). The printed figures: how many such calls, the
*moves* (a carrying call from one module of the package into another) and the *climbs*
(a move into a module of a higher layer of pyproject.toml's layers contract than the
caller's), and, carrying the item or not, the distinct calls up a layer (callbacks back
toward the session: a closure, a hook). ``--list`` prints the moves. Asserts nothing (issue 47's goal: at
most 25 moves and 8 climbs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOY = """
import json, numpy as np
def solve(case_spec):
    g = case_spec["eval_grid"]
    x, y = np.linspace(g["bbox"][0], g["bbox"][1], g["nx"]), np.linspace(g["bbox"][2], g["bbox"][3], g["ny"])
    X, Y = np.meshgrid(x, y)
    np.savez("solution.npz", u=np.sin(np.pi * X) * np.sin(np.pi * Y), x=x, y=y)
    json.dump({"wall_time_sec": 0.0, "status": "success", "solver_info": {}}, open("meta.json", "w"))
"""


def layer_of() -> dict[str, int]:
    """Module (dotted, under the package) -> its layer's index, 0 the top."""
    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    layers = {}
    for index, layer in enumerate(contract["layers"]):
        for name in layer.split("|"):
            layers[name.strip()] = index
    return layers


def module_layer(module: str, layers: dict[str, int]) -> int | None:
    """Its layer's index; None for a module the contract does not place (metrics, say)."""
    parts = module.split(".")[1:]  # under pytest_pdebench
    return layers.get(parts[0]) if parts else None


class PathWatch:
    """A pytest plugin: profiles the item's call phase, keeping the package's calls that
    carry the item's record (or a plan holding it)."""

    def __init__(self):
        self.carrying: list[tuple[str, str, str]] = []  # (caller's module, module, function), in call order
        self.calls: list[tuple[str, str, str]] = []  # every call between two of the package's modules
        self.record = None

    def _carries(self, value) -> bool:
        if value is self.record:
            return True
        return getattr(value, "record", None) is self.record and self.record is not None

    def _profile(self, frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("pytest_pdebench") or module.startswith("pytest_pdebench.testing"):
            return
        if self.record is None and frame.f_code.co_name == "evaluate" and module == "pytest_pdebench.session":
            self.record = frame.f_locals.get("record")
        if self.record is None:
            return
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if caller.startswith("pytest_pdebench") and caller != module:
            self.calls.append((caller, module, frame.f_code.co_name))
        arguments = frame.f_code.co_varnames[: frame.f_code.co_argcount + frame.f_code.co_kwonlyargcount]
        # handed over, not asked: a method of the record or the plan itself (record.family) is no move
        if any(self._carries(frame.f_locals.get(name)) for name in arguments if name != "self"):
            self.carrying.append((caller, module, frame.f_code.co_name))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        sys.setprofile(self._profile)
        try:
            return (yield)
        finally:
            sys.setprofile(None)


def moves(carrying: list[tuple[str, str, str]], layers: dict[str, int]) -> list[tuple[str, str, str, bool]]:
    """(caller's module, callee's module, function, a climb) for each call that hands the
    item from one module of the package to another."""
    found = []
    for caller, callee, function in carrying:
        if caller.startswith("pytest_pdebench") and caller != callee:
            above, below = module_layer(callee, layers), module_layer(caller, layers)
            found.append((caller, callee, function, above is not None and below is not None and above < below))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each move")
    parser.add_argument("--paired", action="store_true", help="with the oracle paired beside the item")
    parser.add_argument(
        "--sibling",
        action="store_true",
        help="the oracle on a suite record (poisson_smooth_kappa_annulus_000), paired, with --pde-sibling",
    )
    parser.add_argument(
        "--model",
        action="store_true",
        help="the solver drafted by a model: a scripted OpenAI-compatible server on loopback, the real client",
    )
    args = parser.parse_args()
    from pytest_pdebench.testing import toy_cases
    from pytest_pdebench.testing.llm_server import ScriptedServer

    with tempfile.TemporaryDirectory() as folder, ScriptedServer() as server:
        cases, solvers = toy_cases(Path(folder), "dolfinx", {"poisson_path": TOY})
        source = [f"--pde-submissions={solvers}"]
        options = ["--pde-baseline=paired"] if args.paired else []
        if args.model:
            os.environ["PDEBENCH_ITEM_PATH_KEY"] = "loopback"
            source = ["--pde-model=scripted-correct", f"--pde-base-url={server.url}",
                      "--pde-api-key-env=PDEBENCH_ITEM_PATH_KEY"]  # fmt: skip
        if args.sibling:
            cases, solvers = Path(folder) / "one.jsonl", REPO / "submissions" / "oracle"
            line = next(x for x in (REPO / "cases" / "suite.jsonl").open() if '"poisson_smooth_kappa_annulus_000"' in x)
            cases.write_text(line)
            source, options = [f"--pde-submissions={solvers}"], ["--pde-baseline=paired", "--pde-sibling"]
        watch = PathWatch()
        code = pytest.main(
            [str(cases), *source, "--pde-library=dolfinx", "--pde-runs=1",
             f"--pde-calibrations={Path(folder) / 'calibrations'}", f"--pde-output={Path(folder) / 'out'}",
             "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "-p", "no:xdist", *options],
            plugins=[watch],
        )  # fmt: skip
    layers = layer_of()
    found = moves(watch.carrying, layers)
    callbacks = sorted({(a, b, f) for a, b, f, up in moves(watch.calls, layers) if up})
    if args.list:
        for before, after, function, up in found:
            print(f"{'CLIMB ' if up else '      '}{before.removeprefix('pytest_pdebench.')} -> "
                  f"{after.removeprefix('pytest_pdebench.')}.{function}")  # fmt: skip
        for before, after, function in callbacks:
            names = [name.removeprefix("pytest_pdebench.") for name in (before, after)]
            print(f"callback up: {names[0]} -> {names[1]}.{function}")
    print(
        f"pytest exit {code}; calls carrying the item: {len(watch.carrying)}; moves between modules: {len(found)}, "
        f"climbs among them: {sum(up for *_, up in found)}; "
        f"distinct calls up a layer, carrying or not: {len(callbacks)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
