"""Entry point run inside the sandbox (standard library only).

    python runner.py SOLVER_FILE PRELOAD_MODULES      Python tracks
    python runner.py --exec PROGRAM ARGS...           compiled tracks: marker, then exec

1. Import the track's libraries (comma-separated PRELOAD_MODULES). This is start-up
   cost shared by every submission and is left out of the timed window.
2. Write one byte to the marker pipe (fd from PDEBENCH_MARKER_FD) and close it: the
   harness starts its clock when it reads that byte. In a container, where no pipe can
   be inherited, write the per-run token of PDEBENCH_MARKER_TOKEN to stderr instead,
   with this moment's CLOCK_MONOTONIC reading (the harness's clock on the same host):
   the stream delivers the token late by a few milliseconds, the reading is exact.
3. Import the submission (its top-level code is timed too) and call
   ``solve(case_spec)`` with the contents of ./case_spec.json.
4. Leave at once with os._exit, so interpreter teardown is not timed; the harness
   stops its clock when the process is gone.
"""

import importlib
import importlib.util
import json
import os
import sys
import time
import traceback


def _fail(message: str, code: int) -> None:
    sys.stderr.write(message.rstrip() + "\n")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(code)


def _write_marker() -> None:
    marker_fd = int(os.environ.pop("PDEBENCH_MARKER_FD", "-1"))
    if marker_fd >= 0:
        os.write(marker_fd, b"S")
        os.close(marker_fd)
    token = os.environ.pop("PDEBENCH_MARKER_TOKEN", "")
    if token:
        sys.stderr.flush()
        os.write(2, f"{token} {time.monotonic():.6f}\n".encode())


def _exec_program(argv: list) -> None:
    """Compiled tracks: the clock starts here and the program replaces this process."""
    _write_marker()
    try:
        os.execv(argv[0], argv)
    except OSError as exc:
        _fail(f"PDEBENCH: cannot execute {argv[0]}: {exc}", 126)


def preload(modules: str) -> None:
    """Import the comma-separated modules: start-up cost, outside the timed window."""
    for module in filter(None, modules.split(",")):
        importlib.import_module(module)


def run_solver(solver_file: str) -> None:
    """Steps 2-4 above, from the run's working folder; never returns."""
    with open("case_spec.json", encoding="utf-8") as handle:
        case_spec = json.load(handle)["case_spec"]
    sys.path.insert(0, os.getcwd())  # helper modules shipped beside the solver

    _write_marker()
    try:
        spec = importlib.util.spec_from_file_location("submission", solver_file)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
        solve = getattr(module, "solve", None)
        if not callable(solve):
            _fail("PDEBENCH: the submission defines no function solve(case_spec)", 3)
        solve(case_spec)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        _fail(f"PDEBENCH: the submission called sys.exit({exc.code!r})", code or 0)
    except BaseException:
        _fail("PDEBENCH: solve() raised an exception\n" + traceback.format_exc(), 2)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main() -> None:
    if sys.argv[1] == "--exec":
        _exec_program(sys.argv[2:])
    preload(sys.argv[2])
    run_solver(sys.argv[1])


if __name__ == "__main__":
    main()
