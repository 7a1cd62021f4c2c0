"""Red team: submissions that try to pass without solving, through the real plugin and
sandbox on every provisioned track. Each must get the honest verdict.

* Outputs that are not regular files of the run's own folder (links to a stored correct
  answer, absolute or relative to another source's audit folder; a FIFO; a device; a
  folder; an oversize file; a decompression bomb): F-Exec, saying why.
* Memoisation: a solver that solves correctly but slowly (2 s against tau_time 1.5 s)
  and saves its answer for the next run, in every place a run can write (cache, HOME,
  TMPDIR, the run folder, /dev/shm, files named like compiled kernels, a pickled array
  named like a TSFC kernel): F-Time, because
  no timed run finds the answer. Run twice, so a persistent kernel store is tried too.
* Writes aimed at the audit folder or verdict.json, and a child that rewrites the
  output after the solver exits: the verdict of what the solver itself left.
"""

from __future__ import annotations

import io
import json
import os
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

from conftest import NUMPY_PRELUDE, docker_machine, exact_cpp_program, run_track, toy_cases
from pytest_pdebench import kernel_cache
from pytest_pdebench.gates import GateFailure, read_solution_file
from pytest_pdebench.grid import EvalGrid
from pytest_pdebench.libraries.dolfinx import DolfinxTrack
from pytest_pdebench.run_files import UnsafeOutput, read_run_file

E_BASE, T_BASE = 1e-4, 0.5  # tau_acc 1e-3, tau_time 1.5 s; the slow solvers sleep 2 s
NX = NY = 20

# files named as the track's form compiler names its kernels: the memo must not survive them
FAKE_KERNELS = {
    "dolfinx": {"kernel_source": "fenics/libffcx_forms_" + "ab" * 20 + ".c",
                "fake_library": "fenics/libffcx_forms_" + "cd" * 20 + ".cpython-312-x86_64-linux-gnu.so",
                "pickled": "fenics/libffcx_forms_" + "ef" * 20 + ".c.cached"},
    "firedrake": {"kernel_source": "pyop2/ab/" + "ab" * 15 + ".pickle",
                  "fake_library": "pyop2/cd/" + "cd" * 15 + ".so",
                  "pickled": "tsfc/ef/" + "ef" * 15 + ".pickle"},
}

PROBE_PRELUDE = NUMPY_PRELUDE + textwrap.dedent("""
    import io
    import os

    def meta():
        json.dump({"wall_time_sec": 0.01, "status": "success"}, open("meta.json", "w"))

    def memo_solve(case_spec, path, header=b"", pickled=False):
        '''Correct but slow, unless an earlier run left the answer at path.'''
        import pickle
        x, y, u = grid(case_spec)
        try:
            with open(path, "rb") as handle:
                data = handle.read()[len(header):]
            u = pickle.loads(data) if pickled else np.load(io.BytesIO(data))
        except Exception:  # absent, emptied or not an array: solve again
            time.sleep(2.0)
            try:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                buffer = io.BytesIO()
                np.save(buffer, u)
                with open(path, "wb") as handle:
                    handle.write(header + (pickle.dumps(u) if pickled else buffer.getvalue()))
            except OSError:
                pass
        write(u, x, y)
""")


def python_probes(library: str, stored: Path) -> dict[str, tuple[str, str, str]]:
    """case id -> (expected outcome, words of the reason, body of solve(case_spec))."""
    cache = "os.environ['FIREDRAKE_CACHE_DIR' if 'FIREDRAKE_CACHE_DIR' in os.environ else 'XDG_CACHE_HOME']"
    kernels = FAKE_KERNELS[library]
    relative = f"../../../../../oracle/{library}/link_relative"  # from <out>/<library>/<case>/.work/1
    elf = b"\x7fELF\x02\x01\x01" + bytes(57)
    return {
        "link_absolute": ("F-Exec", "symbolic link",
                          f"os.symlink('{stored}/solution.npz', 'solution.npz'); "
                          f"os.symlink('{stored}/meta.json', 'meta.json')"),
        "link_relative": ("F-Exec", "symbolic link", f"os.symlink('{relative}/solution.npz', 'solution.npz'); meta()"),
        "fifo_output": ("F-Exec", "is a FIFO", "os.mkfifo('solution.npz'); meta()"),
        "device_output": ("F-Exec", "symbolic link", "os.symlink('/dev/zero', 'solution.npz'); meta()"),
        "folder_output": ("F-Exec", "is a folder", "os.mkdir('solution.npz'); meta()"),
        "oversize_output": ("F-Exec", "-byte cap", "x, y, u = grid(case_spec)\n"
                            "np.savez('solution.npz', u=u, x=x, y=y, pad=np.zeros(400_000)); meta()"),
        "bomb_output": ("F-Exec", "unpacks to", "x, y, u = grid(case_spec)\n"
                        "np.savez_compressed('solution.npz', u=u, x=x, y=y, pad=np.zeros(20_000_000)); meta()"),
        "memo_cache": ("F-Time", "> tau_time", f"memo_solve(case_spec, {cache} + '/memo.npy')"),
        "memo_home": ("F-Time", "> tau_time", "memo_solve(case_spec, os.path.expanduser('~/memo.npy'))"),
        "memo_tmpdir": ("F-Time", "> tau_time", "memo_solve(case_spec, os.environ.get('TMPDIR', '/tmp') + '/m.npy')"),
        "memo_run_folder": ("F-Time", "> tau_time", "memo_solve(case_spec, 'memo.npy')"),
        "memo_above_run_folder": ("F-Time", "> tau_time", "memo_solve(case_spec, '../memo.npy')"),
        "memo_shm": ("F-Time", "> tau_time", "memo_solve(case_spec, '/dev/shm/memo.npy')"),
        "memo_kernel_source": ("F-Time", "> tau_time",
                               f"memo_solve(case_spec, {cache} + '/{kernels['kernel_source']}')"),
        "memo_fake_library": ("F-Time", "> tau_time",
                              f"memo_solve(case_spec, {cache} + '/{kernels['fake_library']}', header={elf!r})"),
        "memo_pickled_array": ("F-Time", "> tau_time",
                               f"memo_solve(case_spec, {cache} + '/{kernels['pickled']}', pickled=True)"),
        "audit_write": ("F-Time", "> tau_time", textwrap.dedent("""\
            for path in ("../verdict.json", "../../verdict.json", "../../audit_write/verdict.json",
                         "/sandbox/verdict.json", "../solution.npz"):
                try:
                    open(path, "w").write('{"outcome": "PASS"}')
                except OSError:
                    pass
            time.sleep(2.0); x, y, u = grid(case_spec); write(u, x, y)""")),
        "lingering_child": ("F-Acc", "rel. L2 error", textwrap.dedent("""\
            x, y, u = grid(case_spec)
            write(0 * u, x, y)
            if os.fork() == 0:  # rewrites the output with the right answer after the solver exits
                os.setsid()
                time.sleep(0.5)
                write(u, x, y)
                os._exit(0)""")),
    }


def in_words(words: str, sandbox: str) -> str:
    """The reason a verdict gives: a link or FIFO never leaves a container (only regular
    files are copied out), so there the output is simply missing."""
    return "is missing" if sandbox == "docker" and words in ("symbolic link", "is a FIFO") else words


def stored_answer(folder: Path) -> Path:
    """A correct answer and meta.json for the toy case, as an earlier run would leave them."""
    folder.mkdir(parents=True, exist_ok=True)
    x, y = np.linspace(0, 1, NX), np.linspace(0, 1, NY)
    X, Y = np.meshgrid(x, y)
    np.savez(folder / "solution.npz", u=np.sin(np.pi * X) * np.sin(np.pi * Y), x=x, y=y)
    (folder / "meta.json").write_text(json.dumps({"wall_time_sec": 0.01, "status": "success"}))
    return folder


@pytest.mark.fem
@pytest.mark.parametrize("track", ["dolfinx", "dolfinx-cold", "firedrake", "dolfinx-docker", "dolfinx-cluster"])
def test_python_probes_get_the_honest_verdict(track, request, tmp_path):
    """dolfinx: the warm runner (the default); dolfinx-cold: a fresh interpreter per run;
    dolfinx-cluster: on the two workers of a Dask cluster instead of two xdist workers."""
    library, _, sandbox = track.partition("-")
    machine, backend = None, ["-n", "2"]
    if sandbox == "cold":
        backend += ["--pde-runner=cold"]
    if sandbox == "cluster":
        backend = [f"--pde-cluster={request.getfixturevalue('dask_cluster').address}"]
    if sandbox == "docker":  # the same probes in containers, through a real engine
        machine, backend = docker_machine(request.getfixturevalue("dolfinx_image")), ["-n", "2", "--pde-sandbox=docker"]
    else:
        request.getfixturevalue(f"{library}_available")
    probes = python_probes(library, stored_answer(tmp_path / "stored"))
    stored_answer(tmp_path / "oracle" / library / "link_relative")  # another source's audit folder
    solvers = {case_id: PROBE_PRELUDE + "\ndef solve(case_spec):\n" + textwrap.indent(body, "    ") + "\n"
               for case_id, (_, _, body) in probes.items()}
    cases, submissions = toy_cases(tmp_path, library, solvers, E_BASE, T_BASE, NX, NY, machine)
    calibrations = f"--pde-calibrations={tmp_path / 'calibrations'}"
    done, outcomes = run_track(tmp_path, library, cases, submissions, calibrations, *backend)
    assert sorted(outcomes) == sorted(probes), done.stdout[-3000:]
    wrong = {case_id: (outcomes[case_id]["outcome"], outcomes[case_id]["reason"])
             for case_id, (outcome, words, _) in probes.items()
             if outcomes[case_id]["outcome"] != outcome
             or in_words(words, sandbox) not in outcomes[case_id]["reason"]}
    assert not wrong
    # what the audit folders hold is what the harness judged, not what was planted or rewritten
    audit = tmp_path / "out" / library
    with np.load(audit / "lingering_child" / "solution.npz") as data:
        assert not data["u"].any()
    assert json.loads((audit / "audit_write" / "verdict.json").read_text())["outcome"] == "F-Time"
    assert not (audit / "audit_write" / "solution.npz").read_bytes().startswith(b"{")
    # a second session of the same submission: nothing memoised survives in a kept store
    done, again = run_track(tmp_path, library, cases, submissions, calibrations, "-k", "memo", *backend)
    assert {case_id for case_id in again} == {case_id for case_id in probes if case_id.startswith("memo")}
    for case_id, verdict in again.items():
        assert verdict["outcome"] == "F-Time", (case_id, verdict["reason"], done.stdout[-2000:])


MEMO_CPP = r"""
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>
// correct but slow, unless an earlier run left its answer in a place it can write
static const std::vector<std::string> places()
{
  const char *home = std::getenv("HOME");
  return {"/sandbox/cache/memo.bin", std::string(home ? home : ".") + "/memo.bin", "/tmp/memo.bin",
          "/dev/shm/memo.bin", "memo.bin", "../memo.bin"};
}
static bool recall(std::vector<double> &u)
{
  for (const auto &place : places())
    {
      std::ifstream in(place, std::ios::binary);
      std::vector<double> v(u.size());
      if (in.read(reinterpret_cast<char *>(v.data()), std::streamsize(v.size() * sizeof(double))))
        {
          u = v;
          return true;
        }
    }
  return false;
}
static void remember(const std::vector<double> &u)
{
  for (const auto &place : places())
    std::ofstream(place, std::ios::binary)
      .write(reinterpret_cast<const char *>(u.data()), std::streamsize(u.size() * sizeof(double)));
}
"""


def cpp_probes(stored: Path) -> dict[str, tuple[str, str, str]]:
    exact = exact_cpp_program(uuid.uuid4().hex)
    memo = MEMO_CPP + exact.replace(
        "  std::ofstream(std::string(argv[2]) + \"/solution_grid.bin\"",
        "  if (!recall(u)) { std::this_thread::sleep_for(std::chrono::seconds(2)); remember(u); }\n"
        "  std::ofstream(std::string(argv[2]) + \"/solution_grid.bin\"", 1)
    link = ("#include <filesystem>\n#include <string>\nint main(int argc, char **argv)\n{\n"
            "  const std::string out(argv[2]);\n"
            f"  std::filesystem::create_symlink(\"{stored}/solution.npz\", out + \"/solution.npz\");\n"
            f"  std::filesystem::create_symlink(\"{stored}/meta.json\", out + \"/meta.json\");\n"
            "  std::filesystem::create_symlink(\"/dev/zero\", out + \"/solution_grid.bin\");\n  return 0;\n}\n")
    return {"cpp_link": ("F-Exec", "symbolic link", link), "cpp_memo": ("F-Time", "> tau_time", memo)}


@pytest.mark.fem
@pytest.mark.parametrize("sandbox", ["bubblewrap", "docker"])
def test_cpp_probes_get_the_honest_verdict(sandbox, request, tmp_path):
    machine, backend = None, []
    if sandbox == "docker":
        machine, backend = docker_machine(request.getfixturevalue("dealii_image")), ["--pde-sandbox=docker"]
    else:
        request.getfixturevalue("dealii_available")
    probes = cpp_probes(stored_answer(tmp_path / "stored"))
    cases, submissions = toy_cases(tmp_path, "dealii", {k: v[2] for k, v in probes.items()}, E_BASE, T_BASE, NX, NY,
                                   machine)
    calibrations = f"--pde-calibrations={tmp_path / 'calibrations'}"
    assert "memo" in probes["cpp_memo"][2] and "recall(u)" in probes["cpp_memo"][2]
    for session in (1, 2):
        done, outcomes = run_track(tmp_path, "dealii", cases, submissions, calibrations, *backend)
        for case_id, (outcome, words, _) in probes.items():
            verdict = outcomes[case_id]
            assert (verdict["outcome"], in_words(words, sandbox) in verdict["reason"]) == (outcome, True), \
                (session, case_id, verdict["reason"], done.stdout[-2000:])


# --- the parts on their own: no sandbox needed ---

def test_run_files_are_read_only_as_regular_files_of_the_folder(tmp_path):
    (tmp_path / "good").write_bytes(b"12345")
    (tmp_path / "big").write_bytes(b"x" * 100)
    (tmp_path / "outside").write_bytes(b"answer")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(tmp_path / "outside", run / "absolute")
    os.symlink("../outside", run / "relative")
    os.mkfifo(run / "fifo")
    os.link(tmp_path / "good", run / "hard")  # a hard link is a regular file in the folder: fine
    assert read_run_file(tmp_path, "good", 10) == b"12345"
    assert read_run_file(tmp_path, "missing", 10) is None
    assert read_run_file(run, "hard", 10) == b"12345"
    for name, words in (("absolute", "symbolic link"), ("relative", "symbolic link"), ("fifo", "a FIFO")):
        with pytest.raises(UnsafeOutput, match=words):
            read_run_file(run, name, 10)
    with pytest.raises(UnsafeOutput, match="100 bytes, over the 10-byte cap"):
        read_run_file(tmp_path, "big", 10)
    with pytest.raises(ValueError):
        read_run_file(tmp_path, "../good", 10)


def test_binary_outputs_are_read_without_following_links(tmp_path):
    grid = EvalGrid.from_spec({"nx": 4, "ny": 3, "bbox": [0, 1, 0, 1]})
    np.ones(grid.shape).tofile(tmp_path / "answer.bin")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(tmp_path / "answer.bin", run / "solution_grid.bin")
    with pytest.raises(GateFailure, match="solution_grid.bin is a symbolic link"):
        read_solution_file(run, ["u"], grid, binary_outputs=True)


def _shared_object(tmp_path: Path) -> bytes:
    """A real shared library, as a form compiler leaves one."""
    import subprocess

    source = tmp_path / "k.c"
    source.write_text("double kernel(double x) { return 2 * x; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", tmp_path / "k.so", source], check=True)
    return (tmp_path / "k.so").read_bytes()


def test_kernel_store_keeps_compiled_kernels_only(tmp_path):
    library = _shared_object(tmp_path)
    cache = kernel_cache.KernelCache(tmp_path / "store", DolfinxTrack.kernel_rules)
    run = tmp_path / "run1"
    cache.prepare(run, str(tmp_path / "store"))
    module = "fenics/libffcx_forms_" + "0a" * 20
    (run / "fenics").mkdir()
    (run / f"{module}.cpython-312-x86_64-linux-gnu.so").write_bytes(library)
    (run / f"{module}.c").write_text("/* generated code */ static double answer[] = {1, 2, 3};")
    (run / f"{module}.c.cached").write_text("build log")
    planted = {
        "memo.npy": b"\x93NUMPY",  # not a kernel's name
        "fenics/libffcx_forms_" + "1b" * 20 + ".cpython-312-x86_64-linux-gnu.so": b"\x7fELF" + bytes(200),
        "fenics/libffcx_forms_" + "2c" * 20 + ".cpython-312-x86_64-linux-gnu.so": library + b"appended answer",
    }
    for name, content in planted.items():
        (run / name).write_bytes(content)
    os.symlink(tmp_path / "outside.so", run / "fenics" / ("libffcx_forms_" + "3d" * 20 + ".cpython-312-x86_64-linux-gnu.so"))
    os.mkfifo(run / "fenics" / ("libffcx_forms_" + "4e" * 20 + ".c"))
    harvest = cache.harvest(run)
    stored = sorted(p.relative_to(tmp_path / "store").as_posix() for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert stored == sorted([f"{module}.c", f"{module}.c.cached", f"{module}.cpython-312-x86_64-linux-gnu.so"])
    assert harvest.kept == 3 and sorted(harvest.dropped) == sorted(
        list(planted) + ["fenics/libffcx_forms_" + "4e" * 20 + ".c"])
    assert (tmp_path / "store" / f"{module}.c").read_bytes() == b""  # the source's content is not kept
    assert (tmp_path / "store" / f"{module}.cpython-312-x86_64-linux-gnu.so").read_bytes() == library
    # the next run sees the kernels as links into the read-only store, and nothing else
    cache.prepare(tmp_path / "run2", "/sandbox/kernels")
    links = {p.relative_to(tmp_path / "run2").as_posix(): os.readlink(p) for p in (tmp_path / "run2").rglob("*")
             if p.is_symlink()}
    assert links == {name: f"/sandbox/kernels/{name}" for name in stored}


def test_a_form_kernel_and_its_imitations(tmp_path):
    library = _shared_object(tmp_path)
    assert kernel_cache.is_shared_object(library)
    for imitation in (b"\x7fELF" + bytes(60), library + b"data", b"data" + library, library[:-8]):
        assert not kernel_cache.is_shared_object(imitation)
    object_file = tmp_path / "k.o"
    import subprocess

    subprocess.run(["cc", "-c", "-o", object_file, tmp_path / "k.c"], check=True)
    assert not kernel_cache.is_shared_object(object_file.read_bytes())  # relocatable, not shared


def test_an_npz_is_read_from_its_bytes(tmp_path):
    from pytest_pdebench.gates import read_solution

    buffer = io.BytesIO()
    x, y = np.linspace(0, 1, 4), np.linspace(0, 1, 3)
    np.savez(buffer, u=np.ones((3, 4)), x=x, y=y)
    solution = read_solution(buffer.getvalue(), ["u"], ("x", "y"), (3, 4), np.ones((3, 4), bool))
    assert solution.shape == (3, 4, 1)
