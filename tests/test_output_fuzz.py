"""The output readers of the gates under hostile bytes (issue 37): whatever a solver writes
as solution.npz, meta.json or raw .bin files, reading it ends in one of two ways, an F-Exec
GateFailure or a correct read (the grid's shape, finite values where the domain is).
Anything else (an exception nobody listed, gigabytes allocated) would leave the item
without a verdict, out of every table's denominator.

The inputs are mutations of valid files (bit flips, cuts, inserted bytes, zip header
fields rewritten: the encrypted bit, the compression method, the CRC, sizes, member
names), .npy members written by hand (huge headers and shapes, Fortran order, object,
structured and complex dtypes), random bytes and JSON nested 10**5 levels deep. Each
test counts its inputs; the file runs a few thousand in well under a minute.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_pdebench.gates import (META_MAX_DEPTH, GateFailure, nesting_depth, read_meta, read_solution,
                                   read_solution_file)
from pytest_pdebench.grid import EvalGrid

GRID = EvalGrid.from_spec({"nx": 4, "ny": 3, "bbox": [0, 1, 0, 2]})
NAMES = ["u"]
DOMAIN = np.ones(GRID.shape, bool)
DOMAIN[0, 0] = False  # a corner outside the domain: NaN is allowed there and only there
# no example database: nothing is written into the checkout, every run draws afresh
FUZZ = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
MUTATED, RANDOM, CRAFTED, META, BINARY = 2500, 500, 1500, 1500, 600  # inputs per test


def judge_solution(raw: bytes, names: list[str] = NAMES) -> str:
    """'read' or 'F-Exec'; any other end fails the test."""
    try:
        solution = read_solution(raw, names, GRID.axis_names, GRID.shape, DOMAIN)
    except GateFailure as failure:
        assert failure.outcome == "F-Exec" and failure.reason
        return "F-Exec"
    assert solution.shape == (*GRID.shape, len(names)) and solution.dtype == np.float64
    assert np.isfinite(solution[DOMAIN]).all()
    return "read"


def report(label: str, seen: Counter, least: int) -> None:
    """The count of inputs, printed (-s) and checked: a strategy that stopped early fails."""
    print(f"{label}: {sum(seen.values())} inputs, {dict(seen)}")
    assert sum(seen.values()) >= least


# -- valid files to start from ------------------------------------------------------------

def valid_npz(dtype: str, compressed: bool, fortran: bool, nan_outside: bool) -> bytes:
    u = (np.arange(12.0).reshape(GRID.shape) + 1).astype(dtype)
    if fortran:
        u = np.asfortranarray(u)
    if nan_outside and np.issubdtype(u.dtype, np.floating):
        u[0, 0] = np.nan
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, u=u, x=GRID.axes[0], y=GRID.axes[1])
    return buffer.getvalue()


def header_offsets(raw: bytes) -> tuple[list[int], list[int]]:
    """Where each local and each central-directory header of a well-formed zip starts."""
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        local = [member.header_offset for member in archive.infolist()]
    end = raw.rfind(b"PK\x05\x06")
    position, central = struct.unpack_from("<I", raw, end + 16)[0], []
    while raw[position:position + 4] == b"PK\x01\x02":
        central.append(position)
        name, extra, comment = struct.unpack_from("<HHH", raw, position + 28)
        position += 46 + name + extra + comment
    return local, central


SEEDS = [(raw, header_offsets(raw)) for raw in
         (valid_npz(dtype, compressed, fortran, nan_outside)
          for dtype in ("<f8", ">f8", "<f4", "<f2", "<i4", "<u2") for compressed in (False, True)
          for fortran in (False, True) for nan_outside in (False, True))]


def test_the_seeds_are_read():
    assert Counter(judge_solution(raw) for raw, _ in SEEDS) == {"read": len(SEEDS)}


# -- mutations ----------------------------------------------------------------------------

# field: (offset in a local header, offset in a central-directory header, struct format)
ZIP_FIELDS = {"flags": (6, 8, "<H"), "method": (8, 10, "<H"), "crc": (14, 16, "<I"),
              "compressed size": (18, 20, "<I"), "size": (22, 24, "<I")}
FIELD_VALUES = {
    "flags": st.sampled_from([0x1, 0x8, 0x41, 0x800, 0x809, 0x2]) | st.integers(0, 0xFFFF),
    # stored, shrunk, deflated, deflate64, bzip2, lzma, zstd, xz, ppmd, AES
    "method": st.sampled_from([0, 1, 8, 9, 12, 14, 93, 95, 98, 99]) | st.integers(0, 0xFFFF),
    "crc": st.integers(0, 2**32 - 1),
    "compressed size": st.sampled_from([0, 1, 2**32 - 1]) | st.integers(0, 2**32 - 1),
    "size": st.sampled_from([0, 1, 2**31, 2**32 - 1]) | st.integers(0, 2**32 - 1),
}
zip_field = st.sampled_from(sorted(ZIP_FIELDS)).flatmap(
    lambda field: st.tuples(st.just(field), FIELD_VALUES[field], st.sampled_from(["local", "central", "both"]),
                            st.integers(0, 2)))
member_rename = st.tuples(st.sampled_from(["local", "central", "both"]), st.integers(0, 2),
                          st.sampled_from([b"v", b"x", b"y", b"u", b"\xff", b"/", b"\0", b"u.npz"])
                          | st.binary(min_size=1, max_size=5))
byte_edit = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(0, 7)),
    st.tuples(st.just("cut"), st.floats(0, 1, exclude_max=True), st.just(b"")),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=32)),
    st.tuples(st.just("overwrite"), st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=32)),
)


def patch_headers(raw: bytes, offsets, where: str, member: int, offset_in: tuple[int, int], fmt: str,
                  value: int) -> bytes:
    local, central = offsets
    raw = bytearray(raw)
    for kind, starts, offset in (("local", local, offset_in[0]), ("central", central, offset_in[1])):
        if where in (kind, "both") and member < len(starts):
            struct.pack_into(fmt, raw, starts[member] + offset, value)
    return bytes(raw)


def rename(raw: bytes, offsets, where: str, member: int, new: bytes) -> bytes:
    """The member's name overwritten from its start, lengths kept (offsets stay valid)."""
    local, central = offsets
    raw = bytearray(raw)
    for kind, starts, length_at, name_at in (("local", local, 26, 30), ("central", central, 28, 46)):
        if where in (kind, "both") and member < len(starts):
            start = starts[member]
            length = struct.unpack_from("<H", raw, start + length_at)[0]
            piece = new[:length]
            raw[start + name_at:start + name_at + len(piece)] = piece
    return bytes(raw)


def edit_bytes(raw: bytes, edit) -> bytes:
    kind, where, content = edit[0], edit[1], edit[2]
    at = int(where * len(raw))
    if kind == "flip":
        return raw[:at] + bytes([raw[at] ^ (1 << content)]) + raw[at + 1:]
    if kind == "cut":
        return raw[:at]
    if kind == "insert":
        return raw[:at] + content + raw[at:]
    return raw[:at] + content + raw[at + len(content):]


@settings(FUZZ, max_examples=MUTATED)
@given(seed=st.sampled_from(SEEDS), fields=st.lists(zip_field, max_size=3),
       renames=st.lists(member_rename, max_size=1), edits=st.lists(byte_edit, max_size=3))
def _mutated_npz(seen, seed, fields, renames, edits):
    raw, offsets = seed
    for field, value, where, member in fields:
        local_at, central_at, fmt = ZIP_FIELDS[field]
        raw = patch_headers(raw, offsets, where, member, (local_at, central_at), fmt, value)
    for where, member, new in renames:
        raw = rename(raw, offsets, where, member, new)
    for edit in edits:
        if raw:
            raw = edit_bytes(raw, edit)
    seen[judge_solution(raw)] += 1


def test_mutated_npz_files_are_read_or_fail_execution():
    seen = Counter()
    _mutated_npz(seen=seen)
    report("mutated .npz", seen, MUTATED)
    assert seen["read"] and seen["F-Exec"]


@settings(FUZZ, max_examples=RANDOM)
@given(raw=st.binary(max_size=600) | st.binary(max_size=300).map(lambda tail: b"PK\x03\x04" + tail)
       | st.binary(max_size=300).map(lambda head: head + b"PK\x05\x06" + bytes(18)))
def _random_bytes(seen, raw):
    seen[judge_solution(raw)] += 1


def test_random_bytes_fail_execution():
    seen = Counter()
    _random_bytes(seen=seen)
    report("random bytes as .npz", seen, RANDOM)
    assert set(seen) == {"F-Exec"}


# -- .npy members written by hand ---------------------------------------------------------

DESCRS = ["<f8", ">f8", "<f4", "<i8", "|b1", "<c16", "<c8", "|O", "<m8[s]", "<M8[D]", "|V8", "<U3", "|S0",
          [("a", "<f8"), ("b", "<i4")], [("u", "<f8")], ("<f8", (2,)), "<f16", "float64", "x", 7, "<f8("]
SHAPES = [GRID.shape, GRID.shape[::-1], (4,), (3,), (10**12,), (10**9,), (2**32, 2**32), (10**30,), (-1, 4),
          (0,), (), (*GRID.shape, 1), (10**6, 10**6, 10**6), "(3, 4)", [3, 4], (3.0, 4)]


def npy_member(version: int, descr, shape, fortran, declared_length: int | None, padding: int, data: bytes) -> bytes:
    header = repr({"descr": descr, "fortran_order": fortran, "shape": shape}).encode() + b" " * padding + b"\n"
    length_format = "<H" if version == 1 else "<I"
    length = len(header) if declared_length is None else declared_length
    length = min(length, 0xFFFF) if version == 1 else length
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack(length_format, length) + header + data


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def data_for(descr, fortran) -> bytes:
    try:
        values = (np.arange(12.0).reshape(GRID.shape) + 1).astype(np.dtype(descr) if isinstance(descr, str) else float)
    except (TypeError, ValueError):
        return bytes(96)
    return values.tobytes(order="F" if fortran else "C")


# each part of a member: its valid value, and what replaces it when that part is corrupted
NPY_PARTS = {
    "version": (1, st.sampled_from([2, 3, 0, 255])),
    "descr": ("<f8", st.sampled_from(DESCRS)),
    "shape": (GRID.shape, st.sampled_from(SHAPES)),
    "fortran": (False, st.sampled_from([True, "yes", None])),
    "declared length": (None, st.sampled_from([0, 1, 10_001, 65_535, 2**31, 2**32 - 1]) | st.integers(0, 2**32 - 1)),
    "padding": (0, st.sampled_from([1, 40, 20_000])),
    "data": ("exact", st.sampled_from(["short", "none", "long"])),
}


@st.composite
def npy_members(draw) -> bytes:
    """A valid float64 member of the grid's shape with none, one or several parts corrupted."""
    corrupted = draw(st.sets(st.sampled_from(sorted(NPY_PARTS)), max_size=3))
    part = {name: draw(other) if name in corrupted else valid for name, (valid, other) in NPY_PARTS.items()}
    data = data_for(part["descr"], part["fortran"] is True)
    data = {"exact": data, "short": data[:40], "none": b"", "long": data + draw(st.binary(min_size=1, max_size=64))}
    return npy_member(part["version"], part["descr"], part["shape"], part["fortran"], part["declared length"],
                      part["padding"], data[part["data"]])


axis_members = st.sampled_from(["valid", "crafted", "absent"])


@settings(FUZZ, max_examples=CRAFTED)
@given(u=npy_members(), x=axis_members, crafted_axis=npy_members(), compressed=st.booleans())
def _crafted_members(seen, u, x, crafted_axis, compressed):
    members = {"u.npy": u, "y.npy": npy_bytes(GRID.axes[1])}
    if x == "valid":
        members["x.npy"] = npy_bytes(GRID.axes[0])
    elif x == "crafted":
        members["x.npy"] = crafted_axis
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    seen[judge_solution(buffer.getvalue())] += 1


def test_hand_written_npy_members_are_read_or_fail_execution():
    seen = Counter()
    _crafted_members(seen=seen)
    report("hand-written .npy members", seen, CRAFTED)
    assert seen["read"] and seen["F-Exec"]


@pytest.mark.parametrize("shape", [(10**12,), (10**9,), (2**32, 2**32)])
def test_a_huge_declared_shape_is_refused_before_allocation(shape):
    """np.load allocates the header's shape before reading data: 8 TB (MemoryError) for
    (10**12,), 8 GB of address space for (10**9,)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("u.npy", npy_member(1, "<f8", shape, False, None, 0, bytes(64)))
        archive.writestr("x.npy", npy_bytes(GRID.axes[0]))
        archive.writestr("y.npy", npy_bytes(GRID.axes[1]))
    with pytest.raises(GateFailure, match=r"declares shape .* over the \d+-byte cap"):
        read_solution(buffer.getvalue(), NAMES, GRID.axis_names, GRID.shape, DOMAIN)


def test_a_bzip2_member_is_refused_before_it_is_inflated():
    """zipfile inflates bzip2 a whole read at once: 785 bytes that declare 1,000 unpacked
    take 2 GB and 8 s to refuse by their CRC. Refused by the method, unread."""
    import bz2

    compressor = bz2.BZ2Compressor(9)
    stream = b"".join(compressor.compress(bytes(1 << 24)) for _ in range(4)) + compressor.flush()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("u.npy", stream)
    bomb = bytearray(buffer.getvalue())
    bomb_local, bomb_central = header_offsets(bytes(bomb))
    for start, method_at, size_at in ((bomb_local[0], 8, 22), (bomb_central[0], 10, 24)):
        struct.pack_into("<H", bomb, start + method_at, zipfile.ZIP_BZIP2)
        struct.pack_into("<I", bomb, start + size_at, 1000)
    with pytest.raises(GateFailure, match="packed with method 12; only stored"):
        read_solution(bytes(bomb), NAMES, GRID.axis_names, GRID.shape, DOMAIN)


# -- meta.json ----------------------------------------------------------------------------

VALID_META = json.dumps({"wall_time_sec": 0.25, "status": "success", "solver_info": {"num_dofs": 400}}).encode()
JSON_TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e999999", b"-1e999999", b"9" * 4000, b"9" * 5000, b"true",
               b"null", b'"x"', b"[", b"{", b"]", b"}", b"\\ud800", b"\xff\xfe", b"0" * 20, b"1e-999999"]


def judge_meta(folder: Path, raw: bytes) -> str:
    (folder / "meta.json").write_bytes(raw)
    try:
        meta, kept = read_meta(folder)
    except GateFailure as failure:
        assert failure.outcome == "F-Exec" and failure.reason
        return "F-Exec"
    assert kept == raw and isinstance(meta, dict) and isinstance(meta["status"], str)
    wall = meta["wall_time_sec"]
    assert isinstance(wall, (int, float)) and not isinstance(wall, bool) and np.isfinite(float(wall))
    assert isinstance(meta.get("solver_info", {}), dict) and nesting_depth(meta) <= META_MAX_DEPTH
    return "read"


@pytest.fixture(scope="module")
def meta_folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("meta")


def nested(depth: int, kind: str) -> bytes:
    if kind == "arrays":
        return b"[" * depth + b"]" * depth
    if kind == "objects":
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b'[{"a":' * (depth // 2) + b"0" + b"}]" * (depth // 2)


json_scalars = (st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda children: st.lists(children, max_size=3)
                           | st.dictionaries(st.text(max_size=4), children, max_size=3), max_leaves=12)
walls = (st.floats() | st.integers(-(10**20), 10**20) | st.sampled_from([10**400, -(10**4000), True, None, "1"])
         | json_values)


@settings(FUZZ, max_examples=META)
@given(data=st.data())
def _meta(seen, folder, data):
    kind = data.draw(st.sampled_from(["mutated", "generated", "nested", "tokens"]))
    if kind == "mutated":
        raw = VALID_META
        for edit in data.draw(st.lists(byte_edit, min_size=1, max_size=3)):
            raw = edit_bytes(raw, edit) if raw else raw
    elif kind == "generated":
        meta = data.draw(st.dictionaries(st.sampled_from(["wall_time_sec", "status", "solver_info", "x"]),
                                         json_values, max_size=4))
        meta["wall_time_sec"] = data.draw(walls)
        if data.draw(st.booleans()):
            meta["status"] = data.draw(st.text(max_size=5))
        raw = json.dumps(meta).encode()
    elif kind == "nested":
        depth = data.draw(st.sampled_from([META_MAX_DEPTH, META_MAX_DEPTH + 1, 900, 990, 10**5])
                          | st.integers(1, 10**5))
        shape = data.draw(st.sampled_from(["arrays", "objects", "both"]))
        inner = nested(depth, shape)
        raw = (inner if data.draw(st.booleans()) else
               b'{"wall_time_sec": 1.0, "status": "ok", "solver_info": {"deep": ' + inner + b"}}")
    else:
        raw = VALID_META.replace(b"0.25", data.draw(st.sampled_from(JSON_TOKENS)), 1)
    seen[judge_meta(folder, raw)] += 1


def test_meta_json_is_read_or_fails_execution(meta_folder):
    seen = Counter()
    _meta(seen=seen, folder=meta_folder)
    report("meta.json", seen, META)
    assert seen["read"] and seen["F-Exec"]


@pytest.mark.parametrize("wall, reason", [
    (b"NaN", "not a finite number"), (b"Infinity", "not a finite number"), (b"1e999999", "not a finite number"),
    (b"9" * 4000, "not a finite number"), (b"9" * 5000, r"cannot be read \(ValueError: Exceeds the limit")])
def test_a_wall_time_that_is_no_finite_number_fails_execution(meta_folder, wall, reason):
    (meta_folder / "meta.json").write_bytes(VALID_META.replace(b"0.25", wall))
    with pytest.raises(GateFailure, match=reason):
        read_meta(meta_folder)


@pytest.mark.parametrize("depth, reason", [(400_000, r"meta.json cannot be read \(RecursionError"),
                                           (900, "nests 902 levels deep, over the 32 allowed")])
def test_deep_meta_json_fails_execution(meta_folder, depth, reason):
    """400,000 levels stop json's parser; 900 parse, then overflow dataclasses.asdict when
    the verdict copies solver_info: refused at the gate."""
    (meta_folder / "meta.json").write_bytes(b'{"wall_time_sec": 1, "status": "ok", "solver_info": {"a": '
                                            + nested(depth, "arrays") + b"}}")
    with pytest.raises(GateFailure, match=reason):
        read_meta(meta_folder)


# -- raw float64 outputs (deal.II) --------------------------------------------------------

EXPECTED_BIN_BYTES = 8 * int(np.prod(GRID.shape))
bin_contents = (st.binary(max_size=2 * EXPECTED_BIN_BYTES)
                | st.lists(st.floats(width=64), min_size=12, max_size=12).map(lambda v: np.array(v, "<f8").tobytes())
                | st.binary(min_size=EXPECTED_BIN_BYTES, max_size=EXPECTED_BIN_BYTES))


@settings(FUZZ, max_examples=BINARY)
@given(files=st.dictionaries(st.sampled_from(["u_x.bin", "u_y.bin", "solution_grid.bin"]), bin_contents),
       names=st.sampled_from([["u"], ["u_x", "u_y"]]))
def _binary(seen, folder, files, names):
    for old in folder.iterdir():
        old.unlink()
    for name, content in files.items():
        (folder / name).write_bytes(content)
    try:
        raw = read_solution_file(folder, names, GRID, binary_outputs=True)
    except GateFailure as failure:
        assert failure.outcome == "F-Exec"
        seen["F-Exec"] += 1
        return
    seen[judge_solution(raw, names)] += 1


def test_binary_outputs_are_read_or_fail_execution(tmp_path_factory):
    seen = Counter()
    _binary(seen=seen, folder=tmp_path_factory.mktemp("bin"))
    report("raw .bin outputs", seen, BINARY)
    assert seen["read"] and seen["F-Exec"]
