"""The one way the harness touches a folder an untrusted process holds or has held.

A solver's run folders, an agent's workspace and cache, a build folder, a container's
copied-out files: whoever ran there chose what kind of file every name is (a link to a
host file, a FIFO, a folder where a file is expected). So the harness never reaches a
name there by path. It opens the folder once (``HeldFolder``, ``O_DIRECTORY |
O_NOFOLLOW``) and reaches every name relative to that descriptor, one level at a time:

* **read** (``read``): only a regular file directly in the folder, opened with
  ``O_NOFOLLOW | O_NONBLOCK`` (a link is refused, opening a FIFO cannot hang), checked
  with ``fstat``, at most a cap, read once into memory: the gates judge those bytes and
  the audit folder keeps the same bytes. Anything else is ``UnsafeOutput``;
* **write** (``write``): whatever is at the name goes first (a link is unlinked, not
  followed; a folder is removed as a tree), then a new file is made with ``O_CREAT |
  O_EXCL | O_NOFOLLOW``: nothing is written through a name the untrusted process made;
* **remove** (``remove``, ``remove_tree``): folders are entered by descriptor with
  ``O_NOFOLLOW`` and left through their own ``..``, so a link is removed, never followed,
  at any depth, with one descriptor open at a time;
* **walk** (``walk``): the regular files of a tree, each with its folder's descriptor.

Every such site in the package goes through this module; ``tests/test_write_sites.py``
lists the package's file-system calls and fails on one that does not, and
``tests/test_redteam.py`` plants a link, a FIFO and a folder at each name the harness
writes. The harness touches these folders only once every process that held them is gone
(the sandbox ends them all), so no name changes while it works: the descriptors make the
link rules hold anyway.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

KIND_NAMES = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeOutput(Exception):
    """A run output the harness refuses to read; the message says which and why."""


def file_kind(mode: int) -> str:
    return KIND_NAMES.get(stat.S_IFMT(mode), "not a regular file")


def _plain(name: str) -> str:
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a plain file name: {name!r}")
    return name


def _open_folder(name: str, dir_fd: int | None) -> int:
    """A descriptor on the folder ``name`` (a link is refused with ELOOP/ENOTDIR); one the
    harness cannot read (a run made it mode 000) is made readable first, by descriptor."""
    try:
        return os.open(name, _DIRECTORY, dir_fd=dir_fd)
    except PermissionError:
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            if not stat.S_ISDIR(os.fstat(handle).st_mode):
                raise
            os.chmod(f"/proc/self/fd/{handle}", 0o700)  # the inode itself: an O_PATH handle has no link
        finally:
            os.close(handle)
        return os.open(name, _DIRECTORY, dir_fd=dir_fd)


def _remove_entry(dir_fd: int, name: str) -> None:
    """Remove ``name`` under ``dir_fd`` whatever it is; a folder as a whole tree, entered by
    descriptor and left through its ``..`` (one descriptor at a time, no recursion)."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    path = [name]  # the names from dir_fd down to the folder being emptied
    current = _open_folder(name, dir_fd)
    try:
        while path:
            below = None
            for child in os.listdir(current):
                if stat.S_ISDIR(os.stat(child, dir_fd=current, follow_symlinks=False).st_mode):
                    below = child
                    break
                os.unlink(child, dir_fd=current)
            if below is not None:  # down into it; back here (and listed again) once it is gone
                inner = _open_folder(below, current)
                os.close(current)
                current = inner
                path.append(below)
                continue
            parent = os.open("..", _DIRECTORY, dir_fd=current) if len(path) > 1 else -1
            os.close(current)
            current = parent
            os.rmdir(path.pop(), dir_fd=current if current >= 0 else dir_fd)
    finally:
        if current >= 0:
            os.close(current)


def remove_tree(folder: Path | str) -> None:
    """Remove ``folder`` and all under it (links removed, never followed; folders a run made
    unreadable or unwritable included); nothing if it is gone. ``folder`` itself is
    reached by path: its parent must be the harness's."""
    folder = Path(folder)
    try:
        parent = os.open(folder.parent, _DIRECTORY)
    except FileNotFoundError:
        return
    try:
        _remove_entry(parent, folder.name)
    finally:
        os.close(parent)


class HeldFolder:
    """A folder an untrusted process holds or has held, opened by descriptor (see the module
    docstring). Use as a context manager, or ``close()``."""

    def __init__(self, path: Path | str, *, _fd: int | None = None):
        self.path = Path(path)
        self.fd = _fd if _fd is not None else _open_folder(str(self.path), None)

    @classmethod
    def make(cls, path: Path | str) -> HeldFolder:
        """A new, empty folder at ``path`` (whatever was there removed first); its parent is
        the harness's."""
        path = Path(path)
        remove_tree(path)
        os.mkdir(path, 0o755)
        return cls(path)

    def __enter__(self) -> HeldFolder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def kind(self, name: str) -> os.stat_result | None:
        """lstat of ``name`` in the folder (a link is a link), None if there is none."""
        try:
            return os.stat(_plain(name), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))

    def folder(self, name: str, *, create: bool = False) -> HeldFolder:
        """The subfolder ``name`` by descriptor (a link there is UnsafeOutput); made if
        ``create`` and missing (whatever else is at the name is removed first)."""
        info = self.kind(name)
        if create and (info is None or not stat.S_ISDIR(info.st_mode)):
            self.remove(name)
            os.mkdir(name, 0o755, dir_fd=self.fd)
        try:
            fd = _open_folder(_plain(name), self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeOutput(f"{name} is not a folder of {self.path.name} (a link or a file)") from None
            raise
        return HeldFolder(self.path / name, _fd=fd)

    def remove(self, name: str) -> None:
        """Whatever is at ``name`` (a file, link, FIFO, socket or folder tree) is gone."""
        _remove_entry(self.fd, _plain(name))

    def clear(self) -> None:
        for name in self.names():
            _remove_entry(self.fd, name)

    def write(self, name: str, data: bytes | str, mode: int = 0o644) -> None:
        """``name`` as a new regular file holding ``data``, whatever was at the name first."""
        self.remove(name)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.fd)
        with os.fdopen(fd, "wb") as out:
            os.fchmod(fd, mode)  # the mode asked for, whatever the umask
            out.write(data.encode() if isinstance(data, str) else data)

    def read(self, name: str, max_bytes: int) -> bytes | None:
        """The bytes of ``name`` if it is a regular file of at most ``max_bytes``; None if
        there is no such name; UnsafeOutput for anything else."""
        try:
            fd = os.open(_plain(name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeOutput(
                    f"{name} is a symbolic link: outputs must be regular files written in the run's own folder"
                ) from None
            raise UnsafeOutput(f"{name} cannot be opened ({exc.strerror})") from None
        try:
            return _read_capped(fd, name, max_bytes)
        finally:
            os.close(fd)

    def descend(self, parts, *, create: bool = False) -> HeldFolder:
        """The folder ``parts`` below this one (a sequence of names), each level by
        descriptor; with ``create``, levels that are missing, or are not folders (a link,
        a file), are made folders."""
        current = HeldFolder(self.path, _fd=os.dup(self.fd))
        for part in parts:
            try:
                inner = current.folder(part, create=create)
            finally:
                current.close()
            current = inner
        return current

    def walk(self, prefix: str = "") -> Iterator[tuple[str, HeldFolder, str, os.stat_result]]:
        """(relative path, its folder, its name, lstat) of every entry through the whole
        tree, a folder before what it holds, in name order; folders entered by descriptor,
        links listed, never followed. The folder handed out is open only until the next."""
        for name in self.names():
            info = self.kind(name)
            if info is None:
                continue
            yield f"{prefix}{name}", self, name, info
            if stat.S_ISDIR(info.st_mode):
                with self.folder(name) as inner:
                    yield from inner.walk(f"{prefix}{name}/")

    def read_link(self, name: str) -> str:
        return os.readlink(_plain(name), dir_fd=self.fd)


def _read_capped(fd: int, name: str, max_bytes: int) -> bytes:
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


def read_run_file(folder: Path, name: str, max_bytes: int) -> bytes | None:
    """``HeldFolder(folder).read(name, max_bytes)``."""
    _plain(name)
    with HeldFolder(folder) as held:
        return held.read(name, max_bytes)
