"""Reading what a run left behind, without trusting it.

A submission controls every byte of its run folder, including what kind of file a name
is. The harness therefore reads a run's outputs only as *regular files directly inside
that folder*:

* opened with ``O_NOFOLLOW`` relative to the folder (a symbolic link is refused, so a
  link to a stored answer elsewhere on the host is never followed), and ``O_NONBLOCK``
  (opening a FIFO cannot hang the harness);
* ``fstat`` on the open descriptor must say a regular file (not a FIFO, device, socket
  or folder), no larger than a cap;
* read once, into memory: the gates judge those bytes and the audit folder keeps the
  same bytes, so a file that changes later changes nothing.

Anything else is ``UnsafeOutput``, which the gates report as F-Exec with the reason.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

KIND_NAMES = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


class UnsafeOutput(Exception):
    """A run output the harness refuses to read; the message says which and why."""


def file_kind(mode: int) -> str:
    return KIND_NAMES.get(stat.S_IFMT(mode), "not a regular file")


def read_run_file(folder: Path, name: str, max_bytes: int) -> bytes | None:
    """The bytes of ``folder/name`` if it is a regular file of at most ``max_bytes``;
    None if there is no such name; UnsafeOutput for anything else."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a plain file name: {name!r}")
    directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeOutput(
                    f"{name} is a symbolic link: outputs must be regular files written in the run's own folder"
                ) from None
            raise UnsafeOutput(f"{name} cannot be opened ({exc.strerror})") from None
    finally:
        os.close(directory)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeOutput(f"{name} is {file_kind(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise UnsafeOutput(f"{name} holds {info.st_size} bytes, over the {max_bytes}-byte cap for it")
        chunks, total = [], 0
        while True:  # read to the end, not to st_size: a file still growing is caught here
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise UnsafeOutput(f"{name} grew past the {max_bytes}-byte cap while being read")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def regular_file_or_none(path: Path) -> os.stat_result | None:
    """lstat of a path if it is a regular file (a link to one does not count)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) else None
