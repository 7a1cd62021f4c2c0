"""Compiled kernels shared between runs, and nothing else.

Form compilers (FFCx for DOLFINx, TSFC/PyOP2 for Firedrake) write generated C and
shared libraries into a cache folder the first time they meet a form; later runs load
them instead of compiling again. The same folder would let a submission carry anything
from one run to the next (an answer saved by the gated run and read back by the timed
runs), so the cache a run sees is built by the harness:

* The *store* holds the kernels of one item (one submission on one case); no run can
  write it. Each run gets an empty cache folder of its own in which every stored file
  appears as a symbolic link into the store, which the sandbox mounts read-only
  (``{kernels}``).
* The gated run starts with an empty store. The kernels it compiled are *harvested*
  into the store only if the track's ``KernelRule``s recognise them: a form compiler's
  file name, and the right type (a whole ELF shared object, every byte of it in a
  section or the zero padding between them, under a size cap; a marker or source whose
  content is not needed, stored empty and only beside a library of the same module, so
  that names alone carry nothing; a pickle of the form compiler's own classes, checked
  without unpickling). A run adds at most a track's number of files and bytes.
  Everything else is dropped and listed.
* The timed runs see the store as it then is; what they write is discarded. The store
  goes with the item's scratch folder: nothing reaches another item or session.

What a kept kernel can still carry is what such a file can hold: a submission that
compiles its own library under a form compiler's file name can hide data in its sections,
the answer among them, and its timed runs can read it back. That is why the gated run,
which cannot find anything of the kind, is timed against the baseline's own first run
(the first-run gate, judge.py): the work has to be done there, within the budget.
"""

from __future__ import annotations

import os
import pickletools
import re
import stat
import struct
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from .run_files import HeldFolder, UnsafeOutput, remove_tree
from .run_folders import freeze

ELF_MAGIC = b"\x7fELF"
ET_DYN = 3
INCOMING_PREFIX = ".incoming-"  # a harvest in progress (or interrupted): never linked


@dataclass(frozen=True)
class KernelRule:
    """Which cache files are compiled kernels: a pattern on the path relative to the
    cache folder, and how the file is kept:

    * ``elf``: a whole ELF shared object, copied;
    * ``empty``: a marker or source file whose presence is what counts, stored empty, and
      only beside an ``elf`` kernel of the same ``module`` (the pattern's named group):
      an empty file's name is all it holds, and names must not carry data;
    * ``pickle``: a pickle stream (never unpickled here) whose first class is one of
      ``pickle_top`` (none: the stream is a single string) and whose every class comes
      from a module under ``pickle_roots``; copied.
    """

    pattern: str
    keep: str
    max_bytes: int = 16 << 20
    pickle_top: tuple[str, ...] = ()
    pickle_roots: tuple[str, ...] = ()

    def matches(self, relative: str) -> bool:
        return re.fullmatch(self.pattern, relative) is not None

    def module(self, relative: str) -> str | None:
        """The kernel module a file belongs to (the ``module`` group), if the pattern names one."""
        found = re.fullmatch(self.pattern, relative)
        return found.groupdict().get("module") if found else None

    def accepts(self, content: bytes) -> bool:
        if len(content) > self.max_bytes:
            return False
        if self.keep == "elf":
            return is_shared_object(content)
        if self.keep == "pickle":
            return self._accepts_pickle(content)
        return self.keep == "empty"

    def _accepts_pickle(self, content: bytes) -> bool:
        classes = pickle_classes(content)
        if classes is None:
            return False
        if not self.pickle_top:
            return classes == [] and is_pickled_string(content)
        return (
            bool(classes)
            and classes[0] in self.pickle_top
            and all(name.split(".")[0] in self.pickle_roots for name in classes)
        )


_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"}


def pickle_classes(content: bytes) -> list[str] | None:
    """The dotted names of the classes and functions a pickle refers to, in order; None if
    the bytes are not one complete pickle stream. Read with pickletools: nothing runs."""
    memo: dict[object, object] = {}
    strings: list[object] = []
    names: list[str] = []
    end = -1
    try:
        for op, arg, position in pickletools.genops(content):
            if op.name in _STRING_OPS:
                strings.append(arg)
            elif op.name == "MEMOIZE":
                memo[len(memo)] = strings[-1] if strings else None
            elif op.name in ("BINGET", "LONG_BINGET", "GET"):
                strings.append(memo.get(arg))
            elif op.name in ("GLOBAL", "INST"):
                names.append(str(arg).replace(" ", "."))
            elif op.name == "STACK_GLOBAL":
                names.append(f"{strings[-2]}.{strings[-1]}" if len(strings) >= 2 else "?")
            elif op.name == "STOP":
                end = cast(int, position) + 1  # a position is None only for streams that cannot tell
    except (ValueError, IndexError, KeyError):
        return None
    return names if end == len(content) else None


def is_pickled_string(content: bytes) -> bool:
    """One str and nothing else (PyOP2 keeps generated C code so)."""
    allowed = _STRING_OPS | {"PROTO", "FRAME", "MEMOIZE", "STOP"}
    try:
        ops = [op.name for op, arg, position in pickletools.genops(content)]
    except ValueError:
        return False
    return set(ops) <= allowed and sum(name in _STRING_OPS for name in ops) == 1


@dataclass
class Harvest:
    kept: int = 0
    dropped: list[str] = field(default_factory=list)

    def note_drop(self, relative: str) -> None:
        self.dropped.append(relative)


def _rule_for(rules: tuple[KernelRule, ...], relative: str) -> KernelRule | None:
    return next((rule for rule in rules if rule.matches(relative)), None)


SHT_NOBITS = 8  # a section with no bytes in the file (.bss)


def is_shared_object(content: bytes) -> bool:
    """A whole ELF64 shared object as a compiler writes it: the header says so, the section
    header table ends the file, and every byte lies in the header, a header table or a
    section, or is zero padding between them (a payload put before, after or between a
    library's parts, or a file that only starts with the magic, does not pass)."""
    if len(content) < 64 or not content.startswith(ELF_MAGIC) or content[4] != 2 or content[5] != 1:
        return False  # not ELF, not 64-bit, not little-endian
    (e_type,) = struct.unpack_from("<H", content, 16)
    e_phoff, e_shoff = struct.unpack_from("<QQ", content, 32)
    e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHHH", content, 52)
    if not (
        e_type == ET_DYN
        and e_ehsize == 64
        and e_shentsize == 64
        and e_shnum > 0
        and e_phentsize == 56
        and e_phnum > 0
        and e_shoff + e_shnum * e_shentsize == len(content)
    ):
        return False
    parts = [(0, 64), (e_phoff, e_phoff + e_phnum * e_phentsize), (e_shoff, len(content))]
    for index in range(e_shnum):
        (kind,) = struct.unpack_from("<I", content, e_shoff + index * 64 + 4)
        offset, size = struct.unpack_from("<QQ", content, e_shoff + index * 64 + 24)
        if kind != SHT_NOBITS and size:
            parts.append((offset, offset + size))
    covered = 0  # the end of the bytes accounted for so far
    for start, end in sorted(parts):
        if end > len(content):
            return False
        if start > covered and content[covered:start].strip(b"\0"):
            return False  # bytes in no part that are not padding
        covered = max(covered, end)
    return covered == len(content)


def _kernel_bytes(folder: HeldFolder, name: str, info: os.stat_result, rule: KernelRule) -> bytes | None:
    """What a kernel file holds (nothing for a marker, kept empty), or None if it is not a
    regular file within its rule's size (a FIFO, a device or an oversize file is no kernel)."""
    if not stat.S_ISREG(info.st_mode) or info.st_size > rule.max_bytes:
        return None
    if rule.keep == "empty":
        return b""
    try:
        return folder.read(name, rule.max_bytes)
    except UnsafeOutput:
        return None


class KernelCache:
    """The kernel store of one item, and the per-run cache folders made from it.
    ``max_files`` and ``max_bytes``: what one run may add to the store at most (the
    track's ``kernel_files_per_run``, ``kernel_bytes_per_run``)."""

    def __init__(self, store: Path, rules: tuple[KernelRule, ...], max_files: int = 64, max_bytes: int = 32 << 20):
        self.store, self.rules = Path(store), rules
        self.max_files, self.max_bytes = max_files, max_bytes

    def empty(self) -> None:
        """Drop every kept kernel (a failed warm-up's): the next run starts cold."""
        remove_tree(self.store)
        self.store.mkdir()

    def _listing(self) -> list[tuple[str, KernelRule]]:
        """Every file of the store the rules admit, with its rule, from one walk."""
        found = []
        store = str(self.store)
        for folder, _subfolders, files in os.walk(store):
            relative_folder = os.path.relpath(folder, store)
            relative_folder = "" if relative_folder == "." else relative_folder + "/"
            for name in files:
                rule = None if name.startswith(INCOMING_PREFIX) else _rule_for(self.rules, relative_folder + name)
                if rule is not None:
                    found.append((relative_folder + name, rule))
        return found

    @staticmethod
    def _modules(listing) -> set[str]:
        """The modules that have an ``elf`` kernel in a listing."""
        return {rule.module(relative) for relative, rule in listing if rule.keep == "elf" and rule.module(relative)}

    def _stored_modules(self) -> set[str]:
        return self._modules(self._listing())

    def _companion_missing(self, rule: KernelRule, relative: str, modules: Collection[str | None]) -> bool:
        """A marker whose module has no library: its name would be all it carries."""
        return rule.keep == "empty" and rule.module(relative) not in modules

    def prepare(self, run_cache: Path, store_seen_as: str) -> None:
        """An empty ``run_cache`` holding a link to every stored kernel, each pointing at
        ``store_seen_as`` (where the run sees the store mounted read-only). From one
        listing of the store: a module's library is stored after its markers (``harvest``),
        so a listing with the library has the markers too, and a run never sees a module
        half there while another worker harvests it. Plain strings rather than Path
        objects: a store may hold thousands of files."""
        os.makedirs(run_cache, exist_ok=True)
        listing = self._listing()
        modules = self._modules(listing)
        for relative, rule in listing:
            if self._companion_missing(rule, relative, modules):
                continue
            folder = os.path.dirname(relative)
            if folder:
                os.makedirs(f"{run_cache}/{folder}", exist_ok=True)
            os.symlink(f"{store_seen_as}/{relative}", f"{run_cache}/{relative}")

    def harvest(self, run_cache: Path) -> Harvest:
        """Copy the kernels a run compiled into the store, libraries and pickles first,
        then the markers of the modules that have a library; at most ``max_files`` files
        and ``max_bytes`` bytes. Drop everything else, and say so."""
        harvest = Harvest()
        accepted: list[tuple[str, KernelRule, bytes]] = []
        with HeldFolder(run_cache) as held:  # the run's: by descriptor, links never followed
            for relative, folder, name, info in held.walk():
                if stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode):
                    continue  # a stored kernel's link, or a link the run made: never followed
                rule = _rule_for(self.rules, relative)
                content = _kernel_bytes(folder, name, info, rule) if rule else None
                if rule is None or content is None:
                    harvest.note_drop(relative)
                    continue
                if rule.accepts(content):
                    accepted.append((relative, rule, content))
                else:
                    harvest.note_drop(relative)
        modules = {rule.module(relative) for relative, rule, _ in accepted if rule.keep == "elf"}
        if any(rule.keep == "empty" for _, rule, _ in accepted):
            modules |= self._stored_modules()
        # a module's files are kept together or not at all, its markers before its library:
        # a run whose cache folder is made meanwhile (another worker's, same store) links a
        # module only with its library, so it finds the whole module or none of it. (FFCx
        # finding "<module>.c" without "<module>.c.cached" waits until its JIT timeout; finding
        # the library without "<module>.c" compiles again onto a read-only link.)
        groups: dict[str, list[tuple[str, KernelRule, bytes]]] = {}
        for entry in accepted:
            relative, rule, _ = entry
            if self._companion_missing(rule, relative, modules):
                harvest.note_drop(relative)
                continue
            groups.setdefault(rule.module(relative) or relative, []).append(entry)
        files, size = 0, 0
        for key in sorted(groups):
            markers = sorted((e for e in groups[key] if e[1].keep == "empty"), key=lambda e: e[0], reverse=True)
            libraries = sorted((e for e in groups[key] if e[1].keep != "empty"), key=lambda e: e[0])
            group = markers + libraries
            group_size = sum(len(content) for _, _, content in group)
            if files + len(group) > self.max_files or size + group_size > self.max_bytes:
                for relative, _, _ in group:
                    harvest.note_drop(
                        f"{relative} (over the {self.max_files} files, {self.max_bytes >> 20} MB a run may add)"
                    )
                continue
            for relative, _rule, content in group:
                if self._store(relative, content):
                    files, size = files + 1, size + len(content)
                    harvest.kept += 1
        return harvest

    def _store(self, relative: str, content: bytes) -> bool:
        """Keep one kernel (False: the store has it already). Its time and its folders'
        are FROZEN_TIME: a later run cannot tell when it came (run_folders.py)."""
        target = self.store / relative
        if target.exists():
            return False  # first writer wins: a stored kernel is never replaced by a run
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=INCOMING_PREFIX)
        with os.fdopen(handle, "wb") as out:
            out.write(content)
        os.chmod(temporary, 0o644)
        freeze(temporary)
        os.replace(temporary, target)
        folder = target.parent
        while folder != self.store.parent:
            freeze(folder)
            folder = folder.parent
        return True
