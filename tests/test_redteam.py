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

import importlib.util
import io
import json
import os
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

from pytest_pdebench import kernel_cache
from pytest_pdebench.gates import GateFailure, read_solution_file
from pytest_pdebench.grid import EvalGrid
from pytest_pdebench.libraries.dolfinx import DolfinxTrack
from pytest_pdebench.run_files import UnsafeOutput, read_run_file
from pytest_pdebench.testing import EXACT_CPP, NUMPY_PRELUDE, docker_machine, exact_cpp_program, run_track, toy_cases

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
    # the gated run (N = 1 in <item>/.work/N, where the mount table shows it) does the work
    # slowly; any other writes zeros at once
    skip = EXACT_CPP.replace("TOKEN", uuid.uuid4().hex).replace(
        "  DROP\n",
        "  std::ifstream mounts(\"/proc/self/mountinfo\");\n"
        "  int run = 1;\n"
        "  for (std::string line; std::getline(mounts, line);)\n"
        "    if (line.find(\" /sandbox/work \") != std::string::npos && line.find(\"/.work/\") != std::string::npos)\n"
        "      run = std::stoi(line.substr(line.find(\"/.work/\") + 7));\n"
        "  if (run == 1)\n"
        "    std::this_thread::sleep_for(std::chrono::seconds(2));\n"
        "  else\n"
        "    for (auto &value : u)\n"
        "      value = 0;\n", 1)
    skip = "#include <chrono>\n#include <string>\n#include <thread>\n" + skip
    return {"cpp_link": ("F-Exec", "symbolic link", link), "cpp_memo": ("F-Time", "> tau_time", memo),
            "cpp_skip_by_mountinfo": ("F-Time", "> tau_time", skip)}


@pytest.mark.fem
@pytest.mark.parametrize("sandbox", ["bubblewrap", "docker"])
def test_cpp_probes_get_the_honest_verdict(sandbox, request, tmp_path):
    machine, backend = None, []
    if sandbox == "docker":
        machine, backend = docker_machine(request.getfixturevalue("dealii_image")), ["--pde-sandbox=docker"]
    else:
        request.getfixturevalue("dealii_available")
    probes = cpp_probes(stored_answer(tmp_path / "stored"))
    fresh = f"// {uuid.uuid4().hex}\n"  # not in the compile cache: session 1 builds them
    cases, submissions = toy_cases(tmp_path, "dealii", {k: fresh + v[2] for k, v in probes.items()}, E_BASE, T_BASE,
                                   NX, NY, machine)
    calibrations = f"--pde-calibrations={tmp_path / 'calibrations'}"
    # issue 46: a baseline that compiled in 0.2 s, so every build not from a cache is far slower
    calibration_file = next((tmp_path / "calibrations" / "dealii").glob("*.json"))
    stored = json.loads(calibration_file.read_text())
    for entry in stored["cases"].values():
        entry["compile_sec"] = 0.2
    calibration_file.write_text(json.dumps(stored))
    assert "memo" in probes["cpp_memo"][2] and "recall(u)" in probes["cpp_memo"][2]
    for session in (1, 2):
        done, outcomes = run_track(tmp_path, "dealii", cases, submissions, calibrations, *backend)
        for case_id, (outcome, words, _) in probes.items():
            verdict = outcomes[case_id]
            assert (verdict["outcome"], in_words(words, sandbox) in verdict["reason"]) == (outcome, True), \
                (session, case_id, verdict["reason"], done.stdout[-2000:])
            built = verdict["compile_sec"] is not None and not verdict["compile_cached"]
            flagged = any("work done at compile time is not timed" in flag for flag in verdict["flags"])
            assert flagged == (built and verdict["outcome"] != "F-Exec"), (case_id, verdict["flags"])
            assert built == (session == 1 and verdict["compile_sec"] is not None), (session, case_id)


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


def test_a_run_adds_whole_modules_within_its_caps(tmp_path):
    """A module's library and markers are kept together or not at all, within the files a
    run may add; a marker whose module has no library is dropped."""
    library = _shared_object(tmp_path)
    cache = kernel_cache.KernelCache(tmp_path / "store", DolfinxTrack.kernel_rules, max_files=4)
    run = tmp_path / "run"
    (run / "fenics").mkdir(parents=True)
    for digit in "12":  # two modules of three files each: only the first fits in four
        module = "fenics/libffcx_forms_" + digit * 40
        (run / f"{module}.cpython-312-x86_64-linux-gnu.so").write_bytes(library)
        (run / f"{module}.c").write_text("")
        (run / f"{module}.c.cached").write_text("")
    (run / ("fenics/libffcx_forms_" + "3" * 40 + ".c")).write_text("")  # a name, and nothing beside it
    harvest = cache.harvest(run)
    stored = sorted(p.name for p in (tmp_path / "store" / "fenics").iterdir())
    assert stored == sorted(f"libffcx_forms_{'1' * 40}{suffix}"
                            for suffix in (".c", ".c.cached", ".cpython-312-x86_64-linux-gnu.so"))
    assert harvest.kept == 3 and len(harvest.dropped) == 4
    assert sum("over the 4 files" in reason for reason in harvest.dropped) == 3


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


# --- runs that try to tell which run they are, to carry data between runs, or to leave
# the results (issue 37). Each gets the honest verdict: F-Time for the slow honest work
# the time gate was meant to see, F-Acc where a timed run did less, F-Exec where the
# outputs break a reader.

EXPLOIT_PRELUDE = PROBE_PRELUDE + textwrap.dedent('''
    import ctypes
    import struct
    import subprocess

    CACHE = os.environ.get("XDG_CACHE_HOME", "/sandbox/cache")
    LIBC = ctypes.CDLL(None, use_errno=True)

    def honest(case_spec):
        time.sleep(2.0)
        x, y, u = grid(case_spec)
        write(u, x, y)

    def dishonest(case_spec):
        x, y, u = grid(case_spec)
        write(0 * u, x, y)

    def run_number():
        """The N of <item>/.work/N, where a bind source shows it; None elsewhere."""
        for line in open("/proc/self/mountinfo"):
            fields = line.split()
            if fields[4] == "/sandbox/work" and "/.work/" in fields[3]:
                return int(fields[3].rsplit("/", 1)[1])
        return None

    def answer_bytes(case_spec):
        return grid(case_spec)[2].astype(np.float32).tobytes()

    def from_answer(case_spec, raw):
        x, y, u = grid(case_spec)
        write(np.frombuffer(raw, np.float32).reshape(u.shape).astype(float), x, y)

    def fake_library(payload):
        """An ELF header that says 'shared object', a payload, one empty section header."""
        header = bytearray(64)
        header[:7] = b"\\x7fELF\\x02\\x01\\x01"
        struct.pack_into("<H", header, 16, 3)
        struct.pack_into("<Q", header, 40, 64 + len(payload))
        struct.pack_into("<HHHHH", header, 52, 64, 0, 0, 64, 1)
        return bytes(header) + payload + bytes(64)

    FFCX = CACHE + "/fenics/libffcx_forms_"
    SO = ".cpython-312-x86_64-linux-gnu.so"
''')


def exploit_probes() -> dict[str, tuple[str, str, str]]:
    """case id -> (expected outcome, words of the reason, body of solve(case_spec))."""
    return {
        # 1. a run tells the gated run from the timed ones, and does the work only when judged
        "skip_by_mountinfo": ("F-Time", "> tau_time", textwrap.dedent("""\
            n = run_number()
            (honest if n is None or n == 1 else dishonest)(case_spec)""")),
        "skip_by_store_marker": ("F-Time", "> tau_time", textwrap.dedent("""\
            marker = FFCX + "ee" * 20 + ".c"
            if os.path.lexists(marker):
                return dishonest(case_spec)
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            open(marker, "w").close()
            honest(case_spec)""")),
        # a kernel the form compiler could have made (cc, FFCx's name): kept, and the timed
        # runs that find it do less; judged, they fail
        "skip_by_store_library": ("F-Acc", "timed run 1: rel. L2 error", textwrap.dedent("""\
            library = FFCX + "dd" * 20 + SO
            if os.path.lexists(library):
                return dishonest(case_spec)
            os.makedirs(os.path.dirname(library), exist_ok=True)
            open("k.c", "w").write("int pdebench_kernel(void) { return 1; }\\n")
            subprocess.run(["cc", "-shared", "-fPIC", "-o", library, "k.c"], check=True)
            open(FFCX + "dd" * 20 + ".c", "w").close()
            honest(case_spec)""")),
        # 2. the answer in kernel-store names, and in a hand-made 'library'
        "answer_in_kernel_names": ("F-Time", "> tau_time", textwrap.dedent("""\
            folder = os.path.dirname(FFCX)
            names = sorted(n for n in os.listdir(folder) if n.endswith(".c")) if os.path.isdir(folder) else []
            chunks = [bytes.fromhex(n[len("libffcx_forms_"):-2])[2:] for n in names]
            raw = b"".join(chunks)
            if len(raw) >= len(answer_bytes(case_spec)):
                return from_answer(case_spec, raw[:len(answer_bytes(case_spec))])
            raw = answer_bytes(case_spec)
            os.makedirs(folder, exist_ok=True)
            for index in range(0, len(raw), 18):
                chunk = raw[index:index + 18].ljust(18, b"\\0")
                open(FFCX + (struct.pack(">H", index // 18) + chunk).hex() + ".c", "w").close()
            honest(case_spec)""")),
        "answer_in_fake_library": ("F-Time", "> tau_time", textwrap.dedent("""\
            library = FFCX + "cc" * 20 + SO
            size = len(answer_bytes(case_spec))
            if os.path.exists(library):
                return from_answer(case_spec, open(library, "rb").read()[64:64 + size])
            os.makedirs(os.path.dirname(library), exist_ok=True)
            open(library, "wb").write(fake_library(answer_bytes(case_spec)))
            honest(case_spec)""")),
        # issue 46: a real library (cc, FFCx's name) holding the answer in its read-only
        # data, made by an honest but slow gated run and read back by the timed runs: kept
        # by the store, so the timed runs are quick and right; the first-run gate times the
        # gated run, which can find nothing, against the baseline's own first run
        "answer_in_real_library": ("F-Time", "first run", textwrap.dedent("""\
            library = FFCX + "bb" * 20 + SO
            size = len(answer_bytes(case_spec))
            if os.path.exists(library):
                data = open(library, "rb").read()
                at = data.find(b"PDEBENCH-MEMO")
                if at >= 0:
                    return from_answer(case_spec, data[at + 13:at + 13 + size])
            os.makedirs(os.path.dirname(library), exist_ok=True)
            raw = b"PDEBENCH-MEMO" + answer_bytes(case_spec)
            open("k.c", "w").write("const unsigned char memo[] = {" + ",".join(map(str, raw)) + "};\\n")
            subprocess.run(["cc", "-shared", "-fPIC", "-o", library, "k.c"], check=True)
            open(FFCX + "bb" * 20 + ".c", "w").close()
            honest(case_spec)""")),
        # 3. outputs that broke a reader, and the item left the results
        "deep_meta": ("F-Exec", "meta.json", textwrap.dedent("""\
            x, y, u = grid(case_spec)
            write(u, x, y, meta=False)
            open("meta.json", "w").write("[" * 400_000 + "]" * 400_000)""")),
        "encrypted_npz": ("F-Exec", "solution.npz", textwrap.dedent("""\
            x, y, u = grid(case_spec)
            write(u, x, y)
            data = bytearray(open("solution.npz", "rb").read())
            for signature, flags in ((b"PK\\x03\\x04", 6), (b"PK\\x01\\x02", 8)):
                at = data.find(signature)
                while at >= 0:
                    data[at + flags] |= 1  # 'encrypted'
                    at = data.find(signature, at + 4)
            open("solution.npz", "wb").write(bytes(data))""")),
        # 4. the session keyring as a memo between runs
        "keyring_memo": ("F-Time", "> tau_time", textwrap.dedent("""\
            key = LIBC.syscall(250, 10, ctypes.c_long(-3), b"user", b"pdebench-memo", 0)  # KEYCTL_SEARCH
            if key > 0:
                buffer = ctypes.create_string_buffer(1 << 16)
                size = LIBC.syscall(250, 11, ctypes.c_long(key), buffer, 1 << 16)  # KEYCTL_READ
                if size == len(answer_bytes(case_spec)):
                    return from_answer(case_spec, buffer.raw[:size])
            raw = answer_bytes(case_spec)
            LIBC.syscall(248, b"user", b"pdebench-memo", raw, len(raw), ctypes.c_long(-3))  # add_key
            honest(case_spec)""")),
        # 6. the neighbour's core
        "affinity_widen": ("PASS", "", textwrap.dedent("""\
            try:
                os.sched_setaffinity(0, range(os.cpu_count()))
                widened = "widened"
            except OSError as exc:
                widened = type(exc).__name__
            x, y, u = grid(case_spec)
            np.savez("solution.npz", u=u, x=x, y=y)
            json.dump({"wall_time_sec": 0.01, "status": "success",
                       "solver_info": {"widen": widened, "cores": len(os.sched_getaffinity(0))}},
                      open("meta.json", "w"))""")),
    }


TWO_CORES = textwrap.dedent("""\
    def spin(seconds):  # of this process's CPU time
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
    # issue 46: a forged end-of-run report ("E" and no CPU used) into every pipe its
    # parent holds; the CPU count is the kernel's, taken outside the sandbox
    parent = f"/proc/{os.getppid()}/fd"
    for name in os.listdir(parent) if os.path.isdir(parent) else []:
        try:
            fd = os.open(f"/proc/{os.getppid()}/fd/{name}", os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"E0.000000" * 40)  # past what the marker reads
            os.close(fd)
        except OSError:
            pass
    child = os.fork()
    if child == 0:
        spin(0.6)
        os._exit(0)
    spin(0.6)
    os.waitpid(child, 0)
    x, y, u = grid(case_spec)
    write(u, x, y)""")

# joins a session keyring of its own, then runs Python with the rest of its arguments: the
# harness holds a keyring, as under ssh/PAM, a systemd service or a Slurm job
KEYRING_LAUNCHER = ("import ctypes, os, sys; "
                    "assert ctypes.CDLL(None).syscall(250, 1, b'pdebench-harness-session') > 0; "
                    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def exploit_solvers(probes: dict) -> dict[str, str]:
    """Solver files; each test's own (a fresh kernel store: what an earlier test stored
    would make a gated run the one that finds a planted file)."""
    fresh = f"# {uuid.uuid4().hex}\n"
    return {case_id: fresh + EXPLOIT_PRELUDE + "\ndef solve(case_spec):\n" + textwrap.indent(body, "    ") + "\n"
            for case_id, (_, _, body) in probes.items()}


@pytest.mark.fem
@pytest.mark.parametrize("track", ["dolfinx", "dolfinx-cold", "dolfinx-docker"])
def test_exploits_of_the_harness_get_the_honest_verdict(track, request, tmp_path):
    """Issue 37's holes, tried as an exploit would, from a harness that holds a session
    keyring, on two pinned workers (three timed runs: each judged)."""
    import sys

    library, _, sandbox = track.partition("-")
    machine, backend = None, ["-n", "2"]
    if sandbox == "cold":
        backend += ["--pde-runner=cold"]
    if sandbox == "docker":
        machine, backend = docker_machine(request.getfixturevalue("dolfinx_image")), ["-n", "2", "--pde-sandbox=docker"]
    else:
        request.getfixturevalue("dolfinx_available")
    probes = exploit_probes()
    solvers = exploit_solvers(probes)
    solvers["two_cores"] = exploit_solvers({"two_cores": ("", "", TWO_CORES)})["two_cores"]
    cases, submissions = toy_cases(tmp_path, library, solvers, E_BASE, T_BASE, NX, NY, machine, t_first=T_BASE)
    calibrations = f"--pde-calibrations={tmp_path / 'calibrations'}"
    launcher = (sys.executable, "-c", KEYRING_LAUNCHER)
    done, outcomes = run_track(tmp_path, library, cases, submissions, calibrations, "--pde-runs=3", "-k",
                               "not two_cores", *backend, launcher=launcher)
    seen = {case_id: (v["outcome"], v["reason"]) for case_id, v in outcomes.items()}
    assert sorted(outcomes) == sorted(probes), (seen, done.stdout[-3000:])
    wrong = {case_id: seen[case_id] for case_id, (outcome, words, _) in probes.items()
             if seen[case_id][0] != outcome or words not in seen[case_id][1]}
    assert not wrong, wrong
    info = outcomes["affinity_widen"]["solver_info"]
    assert info == {"widen": "PermissionError", "cores": 1}, info
    assert outcomes["skip_by_store_library"]["timed_errors"][0] > 0.5  # the timed run's zeros
    assert any("libffcx_forms_" in name for name in outcomes["answer_in_kernel_names"]["cache_dropped"])
    if sandbox != "docker":  # measured in bubblewrap only
        assert not [v["flags"] for v in outcomes.values() if v["flags"]]  # one core each: none flagged
        # one process, not pinned: a solver that works on both cores is flagged
        done, unpinned = run_track(tmp_path, library, cases, submissions, calibrations, "-k", "two_cores",
                                   *backend[2:])
        verdict = unpinned["two_cores"]
        window = verdict["timed_runs"][0]
        assert verdict["cores_used"] * window > 1.1, verdict  # both processes' 0.6 s counted
        if window < 0.9:  # they did run side by side (on a loaded machine they may not)
            assert verdict["flags"] and "cores over its window" in verdict["flags"][0], verdict


VIEW_SOLVER = NUMPY_PRELUDE + textwrap.dedent('''
    import os
    import sys

    PROVIDED = ("/sandbox/work", "/sandbox/cache", "/sandbox/kernels", "/sandbox/harness", "/tmp")

    def without_counters(mountinfo):
        """The mount table less the mount ids and the numbers of anonymous devices (0:N):
        system-wide counters of the kernel, which depend on what else the machine mounts
        at that moment, as inode numbers do."""
        lines = []
        for line in mountinfo.splitlines():
            fields = line.split()
            fields[0] = fields[1] = "#"
            fields[2] = "0:#" if fields[2].startswith("0:") else fields[2]
            lines.append(" ".join(fields))
        return "\\n".join(lines)

    def view():
        """What this run can see of itself and of what the harness gave it. Not compared:
        st_ino and st_ctime (the kernel's counter and clock, set by no one) and st_atime
        (the run's own reads set it)."""
        stats = {}
        for top in PROVIDED:
            for folder, subfolders, files in os.walk(top):
                for path in [folder] + [os.path.join(folder, name) for name in sorted(files + subfolders)]:
                    info = os.lstat(path)
                    stats[path] = [info.st_mode, info.st_nlink, info.st_uid, info.st_gid, info.st_size,
                                   info.st_mtime_ns, info.st_dev]
        status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
        return {"mountinfo": without_counters(open("/proc/self/mountinfo").read()),
                "environ": open("/proc/self/environ").read(),
                "cwd": os.getcwd(), "argv": sys.argv, "pid": os.getpid(), "ppid": os.getppid(),
                "cpus": status["Cpus_allowed_list"].strip(), "stats": stats}

    def solve(case_spec):
        seen = view()  # before this run writes anything
        x, y, u = grid(case_spec)
        np.savez("solution.npz", u=u, x=x, y=y)
        json.dump({"wall_time_sec": 0.01, "status": "success", "solver_info": {"view": seen}}, open("meta.json", "w"))
''')


@pytest.mark.fem
@pytest.mark.parametrize("runner", ["warm", "cold"])
def test_a_run_cannot_tell_which_run_it_is(runner, dolfinx_available, tmp_path):
    """The gated run and two timed runs of one item see the same mount table, environment,
    working folder, and files and folders the harness provides; none names the case, the
    item's folder or the submission."""
    from pytest_pdebench.execution import RunTask, execute
    from pytest_pdebench.sandbox import Limits
    from pytest_pdebench.sources import Submission

    case_id = f"view_probe_{uuid.uuid4().hex[:8]}"
    submission = Submission("view_solver.py", {"view_solver.py": VIEW_SOLVER.encode()}, origin="test")
    spec = {"case_spec": {"eval_grid": {"nx": NX, "ny": NY, "bbox": [0, 1, 0, 1]}}}
    task = RunTask("dolfinx", case_id, spec, ("u",), submission, Limits(timeout_sec=120, memory_mb=4096), runs=2,
                   sandbox="bubblewrap", runner=runner)
    audit = tmp_path / "out" / "dolfinx" / case_id
    audit.mkdir(parents=True)
    done = execute(task, audit)
    assert done.ran and done.timed_failure is None and len(done.timed_outputs) == 2, (done.stderr, done.timed_failure)
    views = [json.loads(meta)["solver_info"]["view"] for meta in [done.meta] + [o.meta for o in done.timed_outputs]]
    for number, timed in enumerate(views[1:], 1):
        differing = {key: (views[0][key], timed[key]) for key in views[0] if views[0][key] != timed[key]}
        if "mountinfo" in differing:
            gated, later = (text.splitlines() for text in differing.pop("mountinfo"))
            differing["mountinfo"] = [(a, b) for a, b in zip(gated, later) if a != b]
        if "stats" in differing:
            gated, later = differing.pop("stats")
            differing["stats"] = {path: (gated.get(path), later.get(path)) for path in {*gated, *later}
                                  if gated.get(path) != later.get(path)}
        assert not differing, (number, differing)
    seen = json.dumps(views[0])
    for secret in (case_id, str(tmp_path), submission.fingerprint, "/.work/"):
        assert secret not in seen, secret
    assert views[0]["cwd"] == "/sandbox/work" and "case_spec.json" in "".join(views[0]["stats"])
    assert not list(Path("/dev/shm").glob("pytest-pdebench-scratch-*/*/view_solver.py"))  # nothing of the item's left behind


@pytest.mark.fem
def test_a_run_that_floods_its_folders_fails(dolfinx_available, tmp_path):
    """Issue 46: a run's folders live in memory (/dev/shm); what it leaves there counts
    against its memory limit, and is freed before any other run starts."""
    body = textwrap.dedent("""\
        for index in range(6):  # 6 x 100 MB, each file under the file-size limit
            with open(f"/tmp/flood-{index}", "wb") as out:
                out.write(bytes(100 << 20))
        x, y, u = grid(case_spec)
        write(u, x, y)""")
    solvers = {"flood": PROBE_PRELUDE + "\ndef solve(case_spec):\n" + textwrap.indent(body, "    ") + "\n"}
    cases, submissions = toy_cases(tmp_path, "dolfinx", solvers, E_BASE, T_BASE, NX, NY)
    done, outcomes = run_track(tmp_path, "dolfinx", cases, submissions, f"--pde-calibrations={tmp_path / 'calibrations'}",
                               "--pde-memory-mb=512")
    verdict = outcomes["flood"]
    assert verdict["outcome"] == "F-Exec" and "MB in its folders, over its memory limit of 512 MB" in verdict["reason"], (
        verdict["reason"], done.stdout[-2000:])


# --- code agents: what the harness writes where an agent wrote, what an agent's command names

AGENT_PROBE_MODELS = ("agent-plant", "agent-named-folder")


@pytest.fixture(scope="module")
def scripted_server():
    from pytest_pdebench.testing.llm_server import ScriptedServer

    with ScriptedServer() as running:
        yield running


@pytest.fixture
def places():
    from pytest_pdebench.testing import llm_server

    yield llm_server.PLACES
    llm_server.PLACES.clear()


def _agent(kind: str, *named: str) -> str:
    if kind == "mini-swe-agent":
        from pytest_pdebench.testing import missing

        if importlib.util.find_spec("minisweagent") is None:
            missing("mini-swe-agent: pip install 'pytest-pdebench[agents]' (make setup does)")
        return kind
    from pytest_pdebench.testing.agent_runs import command_agent

    return command_agent(8, *named)


@pytest.mark.fem
@pytest.mark.parametrize("plant", ["link", "fifo", "folder"])
@pytest.mark.parametrize("kind", ["command", "mini-swe-agent"])
def test_the_harness_never_writes_through_what_an_agent_left(kind, plant, dolfinx_available, scripted_server, places,
                                                             tmp_path):
    """Attempt 1 leaves a link to a host file, a FIFO or a folder where the harness writes the
    next task, and a solver that fails with a chosen line (the feedback quotes it): the host
    file stays untouched, the harness neither hangs nor fails, and attempt 2 gets its task."""
    from pytest_pdebench.testing.agent_runs import agent_bench, run_agent

    victim = tmp_path / "site-packages" / "pdebench-probe.pth"
    victim.parent.mkdir()
    places.update(plant=plant, victim=str(victim))
    bench = agent_bench(tmp_path / "bench", scripted_server.url, AGENT_PROBE_MODELS)
    verdict, folder = run_agent(bench, "agent-plant", _agent(kind), "--pde-attempts=2", "--pde-baseline=stored")
    assert not victim.exists() and not victim.is_symlink(), "the harness wrote through the agent's link"
    assert verdict["outcome"] == "F-Exec", verdict
    assert [a["outcome"] for a in verdict["llm"]["attempts"]] == ["F-Exec", "F-Exec"], verdict["llm"]
    task = folder / "workspace" / "TASK-2.md"
    assert task.is_file() and not task.is_symlink() and "THE EVALUATOR'S VERDICT" in task.read_text()
    assert "os.system" in (folder / "attempt-2" / "task.md").read_text()  # the line did reach the task


@pytest.mark.fem
@pytest.mark.parametrize("named", ["output", "checkout"])
def test_a_folder_an_agent_command_names_stays_out_of_its_sight(named, dolfinx_available, scripted_server, places,
                                                                tmp_path, monkeypatch):
    """A command agent whose command line names the session's output folder (where the
    baseline pass left the oracle's solution of its very case) or another checkout of the
    project (with the case's answer) reads nothing there: the solver it leaves, which would
    write the stolen field, has nothing to write."""
    from pytest_pdebench.testing.agent_runs import agent_bench, run_agent

    monkeypatch.setenv("PDEBENCH_BASELINES", str(tmp_path / "kept"))  # the pass times toy_a in this session
    bench = agent_bench(tmp_path / "bench", scripted_server.url, AGENT_PROBE_MODELS)
    if named == "output":
        folder, answer = bench / "out", "baselines/dolfinx/toy_a/solution.npz"
    else:  # another checkout, its references holding the case's exact field
        folder, answer = tmp_path / "other-checkout", "cases/references/toy_a.npz"
        (folder / "cases" / "references").mkdir(parents=True)
        namespace: dict = {}
        exec(NUMPY_PRELUDE, namespace)
        x, y, u = namespace["grid"]({"eval_grid": {"nx": NX, "ny": NY, "bbox": [0, 1, 0, 1]}})
        np.savez(folder / answer, u=u, x=x, y=y)
    places.update(named=str(folder), answer=answer)
    verdict, item = run_agent(bench, "agent-named-folder", _agent("command", "--look", str(folder)))
    trail = (item / "attempt-1" / "agent-stdout.txt").read_text()
    assert "copied=1" in trail, trail[-2000:]  # cp found nothing to copy
    assert verdict["outcome"] != "PASS", verdict


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("untouched")
    return victim


def _untouched(victim: Path) -> bool:
    return sorted(p.name for p in victim.iterdir()) == ["keep.txt"] and (victim / "keep.txt").read_text() == "untouched"


@pytest.mark.fem
@pytest.mark.parametrize("sandbox", ["bubblewrap", "docker"])
def test_what_a_model_written_solver_leaves_in_its_folders_is_removed_never_followed(
    sandbox, request, places, tmp_path
):
    """A model's correct solver leaves, in its working, cache and /tmp folders, links to a host
    folder (named as files the harness handles), a FIFO and folders it made unreadable: the
    item PASSes, every run's folders are removed, and the host folder is untouched."""
    import subprocess
    import sys

    from pytest_pdebench.testing import (REPO, docker_machine, outcomes_from_report, record_dict, write_calibration,
                                         write_jsonl)
    from pytest_pdebench.testing.llm_server import ScriptedServer

    machine = None
    if sandbox == "docker":
        machine = docker_machine(request.getfixturevalue("dolfinx_image"))
    else:
        request.getfixturevalue("dolfinx_available")
    victim = _victim(tmp_path)
    places.update(victim=str(victim))
    records = [record_dict(new_id="toy_a", nx=20, ny=20)]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", "dolfinx", records, 1e-4, 5.0, machine)
    report = tmp_path / "report.json"
    with ScriptedServer() as server:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx",
             f"--pde-cases={tmp_path / 'cases.jsonl'}", "--pde-model=scripted-plant", f"--pde-base-url={server.url}",
             "--pde-api-key-env=PDEBENCH_TEST_KEY", f"--pde-calibrations={tmp_path / 'calibrations'}",
             "--pde-baseline=stored", "--pde-runs=2", f"--pde-sandbox={sandbox}", f"--pde-output={tmp_path / 'out'}",
             f"--pde-llm-cache={tmp_path / 'cache'}", "--json-report", f"--json-report-file={report}"],
            cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, "PDEBENCH_TEST_KEY": "k"})
    verdict = outcomes_from_report(report)["toy_a"] if report.exists() else {}
    assert verdict.get("outcome") == "PASS", done.stdout[-3000:] + done.stderr[-1000:]
    planted = (tmp_path / "out" / "dolfinx" / "toy_a" / "attempt-1" / "stdout.txt").read_text()
    assert planted.count("planted in") == 3 and "not planted" not in planted, planted  # the probe did its part
    assert _untouched(victim)
    assert not list(Path("/dev/shm").glob("pytest-pdebench-scratch-*/work/locked")), "a run's folder was left"


@pytest.mark.fem
@pytest.mark.parametrize("plant", ["link", "fifo", "folder"])
def test_mini_swe_agent_in_containers_leaves_nothing_the_harness_writes_through(plant, dolfinx_image, scripted_server,
                                                                                places, tmp_path):
    """The same plants under --pde-sandbox=docker: each command's files come back as regular
    files and folders only, and the next task is written where the planted name was."""
    from pytest_pdebench.testing import docker_machine
    from pytest_pdebench.testing.agent_runs import agent_bench, run_agent

    victim = tmp_path / "site-packages" / "pdebench-probe.pth"
    victim.parent.mkdir()
    places.update(plant=plant, victim=str(victim))
    bench = agent_bench(tmp_path / "bench", scripted_server.url, AGENT_PROBE_MODELS, docker_machine(dolfinx_image))
    verdict, folder = run_agent(bench, "agent-plant", _agent("mini-swe-agent"), "--pde-attempts=2",
                                "--pde-baseline=stored", "--pde-sandbox=docker")  # fmt: skip
    assert not victim.exists() and not victim.is_symlink()
    assert [a["outcome"] for a in verdict["llm"]["attempts"]] == ["F-Exec", "F-Exec"], verdict["llm"]
    task = folder / "workspace" / "TASK-2.md"
    assert task.is_file() and not task.is_symlink() and "THE EVALUATOR'S VERDICT" in task.read_text()
