"""The folders the harness gives a run, made so that no run can tell itself from another.

A run sees its working folder, its cache folder and the kernel store through bind mounts,
and a bind mount shows its host source in ``/proc/self/mountinfo``; a folder also shows
its times. So the sources are neutral (a scratch folder of a random name, not the item's
audit folder: no case id, no run number) and every file and folder the harness provides
carries the same times (``FROZEN_TIME``) in every run. What stays is what no one can set:
a file's ctime and inode number are the kernel's clock and counter, "now" in every run.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from pathlib import Path

from .run_files import remove_tree

FROZEN_TIME = 1577836800  # 2020-01-01 00:00:00 UTC: the atime and mtime of all the harness provides


SCRATCH_PREFIX = "pytest-pdebench-scratch-"  # not the zygote's nor older versions' folders
MAKING_PREFIX = ".pytest-pdebench-making-"  # a scratch folder before its lock is held
OWNER_LOCK = ".owner"  # held (flock) by the process whose item it is; never mounted
_swept: set[str] = set()


class Scratch:
    """A new folder, of a random name, for one item's runs: on tmpfs (/dev/shm) where there
    is one (a store of thousands of kernels means thousands of links per run, 75x faster
    to make there than on this machine's disk), else in the temporary folder. It lives in
    memory, so a process killed before its cleanup would leave it there for good: the
    folders of processes that are gone (their lock free) are removed by the next one."""

    def __init__(self):
        shm = Path("/dev/shm")
        where = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else tempfile.gettempdir()
        if where not in _swept:
            _swept.add(where)
            sweep_scratch(Path(where))
        # made under another name, locked, then renamed: a sweep in another process never
        # sees it without its lock held
        making = Path(tempfile.mkdtemp(prefix=MAKING_PREFIX, dir=where))
        self._lock = os.open(making / OWNER_LOCK, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.path = making.with_name(SCRATCH_PREFIX + making.name.removeprefix(MAKING_PREFIX))
        os.rename(making, self.path)

    def remove(self) -> None:
        remove_tree(self.path)
        os.close(self._lock)


def sweep_scratch(where: Path, grace_sec: float = 60.0) -> int:
    """Remove the scratch folders under ``where`` whose owner is gone; how many. A folder
    without its lock yet is left alone for ``grace_sec`` (it is being made)."""
    removed = 0
    for folder in where.glob(MAKING_PREFIX + "*"):  # its maker died before renaming it
        try:
            if time.time() - folder.stat().st_mtime > grace_sec:
                remove_tree(folder)
                removed += 1
        except OSError:
            continue
    for folder in where.glob(SCRATCH_PREFIX + "*"):
        try:
            lock = os.open(folder / OWNER_LOCK, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            try:
                young = time.time() - folder.stat().st_mtime < grace_sec
            except OSError:
                continue
            if not young:
                remove_tree(folder)
                removed += 1
            continue
        except OSError:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its owner is alive
        finally:
            os.close(lock)
        remove_tree(folder)
        removed += 1
    return removed


def freeze(path: str | Path) -> None:
    """``path`` (a link itself, not what it names) gets FROZEN_TIME as atime and mtime."""
    os.utime(path, (FROZEN_TIME, FROZEN_TIME), follow_symlinks=False)


def freeze_tree(root: Path) -> None:
    """Every file, link and folder under ``root``, and ``root``, at FROZEN_TIME; folders
    after their contents (adding an entry changes a folder's mtime)."""
    for folder, subfolders, files in os.walk(root, topdown=False):
        for name in files + subfolders:
            freeze(os.path.join(folder, name))
    freeze(root)


def tree_bytes(*roots: Path) -> int:
    """The space the files under ``roots`` take (allocated blocks, links not followed): what
    a run left in its folders, which live in memory on tmpfs."""
    total = 0
    for root in roots:
        for folder, _subfolders, files in os.walk(root):
            for name in files:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_blocks * 512
                except OSError:
                    continue
    return total
