"""One machine-wide lock between the sessions that run submissions and the oracle's timings
that later sessions are judged by (kept baselines, baseline_pass.py).

Two lock files in a fixed folder every install, HOME and cache root of the machine shares
(``LOCK_FOLDER``: ``/run/lock``, the machine's folder for such locks, world-writable and
sticky; ``/tmp`` where there is none), held with ``flock``:

- ``pytest-pdebench-submissions.lock``: held *shared* by every session for the whole run
  of its items (any submission, the oracle's calibration and validation runs too);
- ``pytest-pdebench-timings.lock``: held *shared* by each timing a session means to keep.

A timing takes the timings lock first, then checks that nobody holds the submissions lock;
a session that starts its items takes the submissions lock first, then waits until no
timing holds the timings lock. Whichever comes second sees the first: a timing that finds a
submission running is not kept (the item is paired), and no submission starts while a kept
timing runs. Several timings (the workers of one session) share the timings lock.

A lock file is made once, by whoever comes first, readable by all (``flock`` works on a
descriptor opened for reading, so no one needs to write it). Opened with ``O_NOFOLLOW |
O_NONBLOCK`` and checked to be a regular file: a link or FIFO planted in the shared folder is
refused. A lock that cannot be opened (someone made it unreadable) means: nothing is kept,
every item is paired, and the session says so.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FOLDER = next((Path(p) for p in ("/run/lock", "/var/lock") if os.path.isdir(p)), Path("/tmp"))
SUBMISSIONS = "pytest-pdebench-submissions.lock"
TIMINGS = "pytest-pdebench-timings.lock"
WAIT_NOTE_SEC = 5.0  # a session waiting this long for another's timing says so


class LockUnavailable(OSError):
    """A machine lock file cannot be opened (the message says which and why)."""


def lock_path(name: str) -> Path:
    return LOCK_FOLDER / name


def _open_lock(name: str) -> int:
    """A read-only descriptor on the lock file ``name``, made if missing (mode 0644)."""
    path = lock_path(name)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(3):
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                os.fchmod(fd, 0o644)  # readable by every user, whatever the umask
            except FileExistsError:
                continue  # another session made it meanwhile
            except OSError as exc:
                raise LockUnavailable(f"cannot make {path}: {exc.strerror}") from None
        except OSError as exc:
            why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
            raise LockUnavailable(f"cannot open {path}: {why}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise LockUnavailable(f"{path} is not a regular file")
        return fd
    raise LockUnavailable(f"cannot open {path}: it keeps appearing and vanishing")


def _free(name: str) -> bool:
    """Nobody holds ``name`` now (an exclusive lock taken and let go at once)."""
    with _opened(name) as fd:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True


@contextmanager
def _opened(name: str) -> Iterator[int]:
    fd = _open_lock(name)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def submissions_running(say: Callable[[str], None] | None = None) -> Iterator[None]:
    """Around a session's items: this process counted among those running submissions on
    the machine, once no timing of any session runs (waited for, with a line after
    WAIT_NOTE_SEC). A lock that cannot be opened is said and passed over: the other
    sessions' timings then rest on their CPU share (baseline_pass.py)."""
    try:
        submissions = _open_lock(SUBMISSIONS)
    except LockUnavailable as exc:
        if say is not None:
            say(f"pdebench: {exc}: other sessions' baseline timings cannot see this one's runs")
        yield
        return
    try:
        fcntl.flock(submissions, fcntl.LOCK_SH)
        _wait_for_timings(say)
        yield
    finally:
        os.close(submissions)


def _wait_for_timings(say: Callable[[str], None] | None) -> None:
    try:
        timings = _open_lock(TIMINGS)
    except LockUnavailable:
        return
    try:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(timings, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            if say is not None and time.monotonic() - started > WAIT_NOTE_SEC:
                say("pdebench: waiting for another session's baseline timing to end (it must run alone)")
                say = None
            time.sleep(0.05)
    finally:
        os.close(timings)  # let go: only the moment mattered


def others_running() -> bool:
    """Whether some session runs submissions on this machine now (or the lock cannot be
    opened, which counts as yes: nothing is kept then)."""
    try:
        return not _free(SUBMISSIONS)
    except LockUnavailable:
        return True


@contextmanager
def timing_alone() -> Iterator[bool]:
    """Around one timing a session means to keep: yields whether it runs alone (no session
    held the submissions lock as it began, and none can start while it runs). Not alone:
    the timings lock is let go at once, so a waiting session goes on."""
    try:
        timings = _open_lock(TIMINGS)
    except LockUnavailable:
        yield False
        return
    try:
        fcntl.flock(timings, fcntl.LOCK_SH)
        alone = not others_running()
        if not alone:
            os.close(timings)
            timings = -1
        yield alone
    finally:
        if timings >= 0:
            os.close(timings)
