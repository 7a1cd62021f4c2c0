"""Entry point run inside the sandbox (standard library only).

    python runner.py SOLVER_FILE PRELOAD_MODULES      Python tracks
    python runner.py --exec PROGRAM ARGS...           compiled tracks: marker, then exec

1. Import the track's libraries (comma-separated PRELOAD_MODULES). This is start-up
   cost shared by every submission and is left out of the timed window.
2. Close the kernel's channels between runs (``seal``): join a fresh anonymous session
   keyring, then a seccomp filter that denies the keyring calls (add_key, request_key,
   keyctl) and sched_setaffinity (a run keeps the core its worker was given).
3. Write one message to the marker pipe (fd from PDEBENCH_MARKER_FD) and close it: "S"
   and the CPU seconds this process has used so far. The harness starts its clock when
   it reads it, and counts the run's CPU time over the window from that figure. In a
   container, where no pipe can be inherited, write the per-run token of
   PDEBENCH_MARKER_TOKEN to stderr instead, with this moment's CLOCK_MONOTONIC reading
   (the harness's clock on the same host): the stream delivers the token late by a few
   milliseconds, the reading is exact.
4. Import the submission (its top-level code is timed too) and call
   ``solve(case_spec)`` with the contents of ./case_spec.json.
5. Leave at once with os._exit, so interpreter teardown is not timed; the harness
   stops its clock when the process is gone.

Run as a program (cold runs), it first forks: the parent only waits for the run and
then reports its CPU time ("E" on the marker pipe; ``_wait_for_run``).
"""

import ctypes
import importlib
import importlib.util
import json
import os
import struct
import sys
import time
import traceback

TYPE_CHECKING = False  # typing itself is not imported: a cold run would pay for it
if TYPE_CHECKING:
    from typing import NoReturn

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, PR_SET_DUMPABLE = 38, 22, 2, 4
KEYCTL_JOIN_SESSION_KEYRING = 1
# per architecture: its audit number, its keyctl syscall number, and the numbers denied
# (add_key, request_key, keyctl, sched_setaffinity)
SECCOMP_ARCHES = {
    "x86_64": (0xC000003E, 250, (248, 249, 250, 203)),
    "aarch64": (0xC00000B7, 219, (217, 218, 219, 122)),
}
X32_SYSCALL_BIT = 0x40000000
EPERM = 1


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def seccomp_program(arch: int, denied: tuple) -> bytes:
    """A classic-BPF seccomp filter: calls of another ABI than ``arch`` (i386 or x32 on
    x86_64) and the ``denied`` calls fail with EPERM; everything else is allowed."""
    load_word, jump_eq, jump_ge, ret = 0x20, 0x15, 0x35, 0x06
    deny, allow = 0x00050000 | EPERM, 0x7FFF0000  # SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ALLOW
    program = [
        _bpf(load_word, 0, 0, 4),  # seccomp_data.arch
        _bpf(jump_eq, 1, 0, arch),
        _bpf(ret, 0, 0, deny),
        _bpf(load_word, 0, 0, 0),  # seccomp_data.nr
        _bpf(jump_ge, len(denied) + 1, 0, X32_SYSCALL_BIT),
    ]
    for index, number in enumerate(denied):
        program.append(_bpf(jump_eq, len(denied) - index, 0, number))
    return b"".join(program + [_bpf(ret, 0, 0, allow), _bpf(ret, 0, 0, deny)])


def seal() -> str | None:
    """Step 2; returns None, or why it could not be done (the run then goes on as before:
    an old kernel or an unknown architecture; the harness reports it)."""
    machine = os.uname().machine  # not the platform module: an import a cold run would pay for
    known = SECCOMP_ARCHES.get(machine)
    if known is None:
        return f"no seccomp filter for {machine}"
    arch, keyctl, denied = known
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall(keyctl, KEYCTL_JOIN_SESSION_KEYRING, None)  # denied already in a container: fine
    code = seccomp_program(arch, denied)
    filters = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = Program(len(code) // 8, ctypes.addressof(filters))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no_new_privs: {os.strerror(ctypes.get_errno())}"
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        return f"seccomp: {os.strerror(ctypes.get_errno())}"
    return None


def _fail(message: str, code: int) -> "NoReturn":
    sys.stderr.write(message.rstrip() + "\n")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(code)


def _write_marker() -> None:
    problem = seal()
    if problem:
        sys.stderr.write(f"PDEBENCH: the run is not sealed ({problem})\n")
    marker_fd = int(os.environ.pop("PDEBENCH_MARKER_FD", "-1"))
    if marker_fd >= 0:
        os.write(marker_fd, f"S{time.process_time():.6f}".encode())  # one write: it arrives whole
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
    sys.dont_write_bytecode = True  # -I ignores PYTHONDONTWRITEBYTECODE; a run's folder is new each time anyway

    _write_marker()
    stage = "the submission did not import"
    try:
        spec = importlib.util.spec_from_file_location("submission", solver_file)
        if TYPE_CHECKING:  # a file without a loader (None) raises below, reported as any broken submission
            assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
        solve = getattr(module, "solve", None)
        if not callable(solve):
            _fail("PDEBENCH: the submission defines no function solve(case_spec)", 3)
        stage = "solve() raised"
        solve(case_spec)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        _fail(f"PDEBENCH: the submission called sys.exit({exc.code!r})", code or 0)
    except BaseException as exc:
        # the traceback first, then one line the harness reports: what failed, and where
        _fail(traceback.format_exc() + f"PDEBENCH: {stage}: {where_it_failed(exc)}", 2)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def where_it_failed(exc: BaseException) -> str:
    """``Type: message (file, line N)``: the submission's own file and line nearest the
    error (a syntax error's own; else the innermost frame in the run's folder)."""
    what = f"{type(exc).__name__}: {exc.msg if isinstance(exc, SyntaxError) else exc}".strip()
    place = None
    if isinstance(exc, SyntaxError) and exc.filename:
        place = (exc.filename, exc.lineno)
    else:
        for frame, line in traceback.walk_tb(exc.__traceback__):
            if os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == os.getcwd():
                place = (frame.f_code.co_filename, line)
    if place is None:
        return what[:300]
    return f"{what[:300]} ({os.path.basename(place[0])}, line {place[1]})"


def _wait_for_run() -> None:
    """Cold runs: fork, and let the child go on with the run while this process waits for
    it and then writes "E" and the CPU seconds of the run's processes it reaped to the
    marker pipe, and leaves with the child's status (128 + n for signal n). Returns in
    the child only. (The warm runner's zygote does the same for its runs.)"""
    marker_fd = int(os.environ.get("PDEBENCH_MARKER_FD", "-1"))
    if marker_fd < 0:
        return
    child = os.fork()
    if child == 0:
        return
    # the run must not reach this process's end of the marker pipe (a forged "E0" would
    # hide the CPU it used): a process that is not dumpable has its /proc files owned by
    # root and cannot be traced by a process without capabilities, as the run's are
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    while True:
        try:
            _, status, usage = os.wait4(child, 0)
            break
        except InterruptedError:
            continue
    try:
        os.write(marker_fd, f"E{usage.ru_utime + usage.ru_stime:.6f}".encode())
    except OSError:  # the harness stopped listening (it killed the run): the status still stands
        pass
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def main() -> None:
    _wait_for_run()
    if sys.argv[1] == "--exec":
        _exec_program(sys.argv[2:])
    preload(sys.argv[2])
    run_solver(sys.argv[1])


if __name__ == "__main__":
    main()
