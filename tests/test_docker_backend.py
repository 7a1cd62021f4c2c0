"""The container backend's own logic that needs no engine: what comes back out of a
container (regular files only, nothing outside the folder), and the start token on the
attached stream. The runs through a real engine are in test_docker_engine.py."""

from __future__ import annotations

import io
import tarfile

import pytest

from pytest_pdebench.sandbox import SandboxError
from pytest_pdebench.sandbox.docker_backend import _Attached, _extract, _tar_folder


def archive_of(entries) -> list[bytes]:
    """A get_archive-like stream (two chunks) of (name, type, content or link target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, kind, payload in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(payload)
                archive.addfile(info, io.BytesIO(payload))
            else:
                if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                    info.linkname = payload
                archive.addfile(info)
    data = buffer.getvalue()
    return [data[: len(data) // 2], data[len(data) // 2:]]


def test_only_regular_files_inside_the_folder_come_back(tmp_path):
    stream = archive_of([
        ("work", tarfile.DIRTYPE, None),
        ("work/solution.npz", tarfile.REGTYPE, b"answer"),
        ("work/sub/meta.json", tarfile.REGTYPE, b"{}"),
        ("work/link", tarfile.SYMTYPE, "/etc/passwd"),
        ("work/hard", tarfile.LNKTYPE, "work/solution.npz"),
        ("work/fifo", tarfile.FIFOTYPE, None),
        ("work/../escape.txt", tarfile.REGTYPE, b"x"),
        ("other/file.txt", tarfile.REGTYPE, b"x"),
    ])
    out = tmp_path / "out"
    out.mkdir()
    _extract(stream, out, "work", cap_bytes=1 << 20)
    found = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert found == ["solution.npz", "sub", "sub/meta.json"]
    assert (out / "solution.npz").read_bytes() == b"answer"
    assert not (tmp_path / "escape.txt").exists()


def test_the_copy_out_never_writes_through_a_link(tmp_path):
    """The host's cache folder holds links into the kernel store: a file the run wrote
    where a link was, or under a linked folder, lands in the folder, not at the target."""
    store = tmp_path / "store"
    (store / "fenics").mkdir(parents=True)
    kernel = store / "fenics" / "libffcx_forms_x.so"
    kernel.write_bytes(b"kernel")
    out = tmp_path / "cache"
    out.mkdir()
    (out / "fenics").mkdir()
    (out / "fenics" / "libffcx_forms_x.so").symlink_to(kernel)
    (out / "linked").symlink_to(store)
    stream = archive_of([
        ("cache", tarfile.DIRTYPE, None),
        ("cache/fenics/libffcx_forms_x.so", tarfile.REGTYPE, b"overwritten"),
        ("cache/linked/planted.txt", tarfile.REGTYPE, b"planted"),
    ])
    _extract(stream, out, "cache", cap_bytes=1 << 20)
    assert kernel.read_bytes() == b"kernel" and not (store / "planted.txt").exists()
    assert not (out / "fenics" / "libffcx_forms_x.so").is_symlink()
    assert (out / "fenics" / "libffcx_forms_x.so").read_bytes() == b"overwritten"
    assert (out / "linked").is_dir() and not (out / "linked").is_symlink()


def test_a_run_that_writes_too_much_is_stopped(tmp_path):
    stream = archive_of([("work/big.bin", tarfile.REGTYPE, b"0" * (3 << 20))])
    with pytest.raises(SandboxError, match="more than 1 MB"):
        _extract(stream, tmp_path, "work", cap_bytes=1 << 20)


def test_the_files_going_in_belong_to_the_sandbox_user_or_are_read_only(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "solver.py").write_text("x = 1\n")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.so").write_bytes(b"\x7fELF")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        _tar_folder(archive, tmp_path / "work", "work", 65534, writable=True)
        _tar_folder(archive, tmp_path / "kernels", "kernels", 0, writable=False)
    buffer.seek(0)
    members = {m.name: m for m in tarfile.open(fileobj=buffer).getmembers()}
    assert (members["work/solver.py"].uid, members["work"].uid) == (65534, 65534)
    assert members["kernels/k.so"].uid == 0 and members["kernels/k.so"].mode & 0o222 == 0
    assert members["kernels"].mode & 0o222 == 0


@pytest.mark.parametrize("split", [3, 17, 29])
def test_the_start_token_is_found_across_frames_and_kept_out_of_stderr(split):
    token = b"PDEBENCH-START-0123456789abcdef"
    stderr = b"loading libraries\n" + token + b" 1234.500000\nsolver says hi\n"
    frames = [(b"out", None)] + [(None, stderr[i:i + split]) for i in range(0, len(stderr), split)]
    attached = _Attached(iter(frames), token)
    attached.run()
    assert attached.marker_time is not None and attached.end_time >= attached.marker_time
    assert attached.marker_stamp == 1234.5
    assert attached.streams[2].text() == "loading libraries\nsolver says hi\n"
    assert attached.streams[1].text() == "out"


def test_the_runner_clock_reading_starts_the_window_only_when_it_is_plausible():
    attached = _Attached(iter([]), b"T")
    attached.marker_time, attached.marker_stamp = 10.0, 9.99
    assert attached.start_of_window(container_start=9.5) == 9.99  # read before the late arrival
    assert attached.start_of_window(container_start=9.995) == 10.0  # before the container started
    attached.marker_stamp = 10.5  # after its own arrival: another host's clock
    assert attached.start_of_window(container_start=9.5) == 10.0


def test_no_token_means_no_timed_window():
    attached = _Attached(iter([(None, b"crashed while importing\n")]), b"PDEBENCH-START-ffff")
    attached.run()
    assert attached.marker_time is None
    assert attached.streams[2].text() == "crashed while importing\n"


def test_a_copy_into_the_container_is_tried_again_after_podmans_broken_pipe_only():
    """podman lost its archive helper once in a full test run ("write |1: broken pipe"):
    copy again, a few times; any other engine error goes up at once."""
    import docker

    from pytest_pdebench.sandbox.docker_backend import _put_archive

    class Container:  # records the copies; fails the way the engine did
        def __init__(self, failures, message):
            self.failures, self.message, self.calls = failures, message, 0

        def put_archive(self, path, data):
            self.calls += 1
            if self.calls <= self.failures:
                raise docker.errors.APIError("500 Server Error", explanation=self.message)
            return True

    flaky = Container(2, "passing bulk input to subprocess: write |1: broken pipe")
    assert _put_archive(flaky, "/sandbox", b"") and flaky.calls == 3
    broken = Container(5, "passing bulk input to subprocess: write |1: broken pipe")
    with pytest.raises(docker.errors.APIError):
        _put_archive(broken, "/sandbox", b"")
    assert broken.calls == 3
    other = Container(1, "no such container")
    with pytest.raises(docker.errors.APIError):
        _put_archive(other, "/sandbox", b"")
    assert other.calls == 1
