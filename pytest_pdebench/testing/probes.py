"""The red-team probes themselves: solver bodies that try to pass without solving, each with
the verdict an honest harness gives it (outcome, words of the reason), for the Python tracks
(``python_probes``, ``exploit_probes``) and the deal.II track (``cpp_probes``). The checks that
run them through the plugin are ``testing.redteam``'s.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path

import numpy as np

from . import EXACT_CPP, NUMPY_PRELUDE, exact_cpp_program

E_BASE, T_BASE = 1e-4, 0.5  # tau_acc 1e-3, tau_time 1.5 s; the slow solvers sleep 2 s
NX = NY = 20

# files named as the track's form compiler names its kernels: the memo must not survive them
FAKE_KERNELS = {
    "dolfinx": {
        "kernel_source": "fenics/libffcx_forms_" + "ab" * 20 + ".c",
        "fake_library": "fenics/libffcx_forms_" + "cd" * 20 + ".cpython-312-x86_64-linux-gnu.so",
        "pickled": "fenics/libffcx_forms_" + "ef" * 20 + ".c.cached",
    },
    "firedrake": {
        "kernel_source": "pyop2/ab/" + "ab" * 15 + ".pickle",
        "fake_library": "pyop2/cd/" + "cd" * 15 + ".so",
        "pickled": "tsfc/ef/" + "ef" * 15 + ".pickle",
    },
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
        "link_absolute": (
            "F-Exec",
            "symbolic link",
            f"os.symlink('{stored}/solution.npz', 'solution.npz'); os.symlink('{stored}/meta.json', 'meta.json')",
        ),
        "link_relative": ("F-Exec", "symbolic link", f"os.symlink('{relative}/solution.npz', 'solution.npz'); meta()"),
        "fifo_output": ("F-Exec", "is a FIFO", "os.mkfifo('solution.npz'); meta()"),
        "device_output": ("F-Exec", "symbolic link", "os.symlink('/dev/zero', 'solution.npz'); meta()"),
        "folder_output": ("F-Exec", "is a folder", "os.mkdir('solution.npz'); meta()"),
        "oversize_output": (
            "F-Exec",
            "-byte cap",
            "x, y, u = grid(case_spec)\nnp.savez('solution.npz', u=u, x=x, y=y, pad=np.zeros(400_000)); meta()",
        ),
        "bomb_output": (
            "F-Exec",
            "unpacks to",
            "x, y, u = grid(case_spec)\n"
            "np.savez_compressed('solution.npz', u=u, x=x, y=y, pad=np.zeros(20_000_000)); meta()",
        ),
        "memo_cache": ("F-Time", "> tau_time", f"memo_solve(case_spec, {cache} + '/memo.npy')"),
        "memo_home": ("F-Time", "> tau_time", "memo_solve(case_spec, os.path.expanduser('~/memo.npy'))"),
        "memo_tmpdir": ("F-Time", "> tau_time", "memo_solve(case_spec, os.environ.get('TMPDIR', '/tmp') + '/m.npy')"),
        "memo_run_folder": ("F-Time", "> tau_time", "memo_solve(case_spec, 'memo.npy')"),
        "memo_above_run_folder": ("F-Time", "> tau_time", "memo_solve(case_spec, '../memo.npy')"),
        "memo_shm": ("F-Time", "> tau_time", "memo_solve(case_spec, '/dev/shm/memo.npy')"),
        "memo_kernel_source": (
            "F-Time",
            "> tau_time",
            f"memo_solve(case_spec, {cache} + '/{kernels['kernel_source']}')",
        ),
        "memo_fake_library": (
            "F-Time",
            "> tau_time",
            f"memo_solve(case_spec, {cache} + '/{kernels['fake_library']}', header={elf!r})",
        ),
        "memo_pickled_array": (
            "F-Time",
            "> tau_time",
            f"memo_solve(case_spec, {cache} + '/{kernels['pickled']}', pickled=True)",
        ),
        "audit_write": (
            "F-Time",
            "> tau_time",
            textwrap.dedent("""\
            for path in ("../verdict.json", "../../verdict.json", "../../audit_write/verdict.json",
                         "/sandbox/verdict.json", "../solution.npz"):
                try:
                    open(path, "w").write('{"outcome": "PASS"}')
                except OSError:
                    pass
            time.sleep(2.0); x, y, u = grid(case_spec); write(u, x, y)"""),
        ),
        "lingering_child": (
            "F-Acc",
            "rel. L2 error",
            textwrap.dedent("""\
            x, y, u = grid(case_spec)
            write(0 * u, x, y)
            if os.fork() == 0:  # rewrites the output with the right answer after the solver exits
                os.setsid()
                time.sleep(0.5)
                write(u, x, y)
                os._exit(0)"""),
        ),
    }


def in_words(words: str, copies_out: bool) -> str:
    """The reason a verdict gives: a link or FIFO never leaves a backend that copies a run's
    regular files out (a container), so there the output is simply missing."""
    return "is missing" if copies_out and words in ("symbolic link", "is a FIFO") else words


def stored_answer(folder: Path) -> Path:
    """A correct answer and meta.json for the toy case, as an earlier run would leave them."""
    folder.mkdir(parents=True, exist_ok=True)
    x, y = np.linspace(0, 1, NX), np.linspace(0, 1, NY)
    X, Y = np.meshgrid(x, y)
    np.savez(folder / "solution.npz", u=np.sin(np.pi * X) * np.sin(np.pi * Y), x=x, y=y)
    (folder / "meta.json").write_text(json.dumps({"wall_time_sec": 0.01, "status": "success"}))
    return folder


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
        '  std::ofstream(std::string(argv[2]) + "/solution_grid.bin"',
        "  if (!recall(u)) { std::this_thread::sleep_for(std::chrono::seconds(2)); remember(u); }\n"
        '  std::ofstream(std::string(argv[2]) + "/solution_grid.bin"',
        1,
    )
    link = (
        "#include <filesystem>\n#include <string>\nint main(int argc, char **argv)\n{\n"
        "  const std::string out(argv[2]);\n"
        f'  std::filesystem::create_symlink("{stored}/solution.npz", out + "/solution.npz");\n'
        f'  std::filesystem::create_symlink("{stored}/meta.json", out + "/meta.json");\n'
        '  std::filesystem::create_symlink("/dev/zero", out + "/solution_grid.bin");\n  return 0;\n}\n'
    )
    # the gated run (N = 1 in <item>/.work/N, where the mount table shows it) does the work
    # slowly; any other writes zeros at once
    skip = EXACT_CPP.replace("TOKEN", uuid.uuid4().hex).replace(
        "  DROP\n",
        '  std::ifstream mounts("/proc/self/mountinfo");\n'
        "  int run = 1;\n"
        "  for (std::string line; std::getline(mounts, line);)\n"
        '    if (line.find(" /sandbox/work ") != std::string::npos && line.find("/.work/") != std::string::npos)\n'
        '      run = std::stoi(line.substr(line.find("/.work/") + 7));\n'
        "  if (run == 1)\n"
        "    std::this_thread::sleep_for(std::chrono::seconds(2));\n"
        "  else\n"
        "    for (auto &value : u)\n"
        "      value = 0;\n",
        1,
    )
    skip = "#include <chrono>\n#include <string>\n#include <thread>\n" + skip
    return {
        "cpp_link": ("F-Exec", "symbolic link", link),
        "cpp_memo": ("F-Time", "> tau_time", memo),
        "cpp_skip_by_mountinfo": ("F-Time", "> tau_time", skip),
    }


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
        "skip_by_mountinfo": (
            "F-Time",
            "> tau_time",
            textwrap.dedent("""\
            n = run_number()
            (honest if n is None or n == 1 else dishonest)(case_spec)"""),
        ),
        "skip_by_store_marker": (
            "F-Time",
            "> tau_time",
            textwrap.dedent("""\
            marker = FFCX + "ee" * 20 + ".c"
            if os.path.lexists(marker):
                return dishonest(case_spec)
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            open(marker, "w").close()
            honest(case_spec)"""),
        ),
        # a kernel the form compiler could have made (cc, FFCx's name): kept, and the timed
        # runs that find it do less; judged, they fail
        "skip_by_store_library": (
            "F-Acc",
            "timed run 1: rel. L2 error",
            textwrap.dedent("""\
            library = FFCX + "dd" * 20 + SO
            if os.path.lexists(library):
                return dishonest(case_spec)
            os.makedirs(os.path.dirname(library), exist_ok=True)
            open("k.c", "w").write("int pdebench_kernel(void) { return 1; }\\n")
            subprocess.run(["cc", "-shared", "-fPIC", "-o", library, "k.c"], check=True)
            open(FFCX + "dd" * 20 + ".c", "w").close()
            honest(case_spec)"""),
        ),
        # 2. the answer in kernel-store names, and in a hand-made 'library'
        "answer_in_kernel_names": (
            "F-Time",
            "> tau_time",
            textwrap.dedent("""\
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
            honest(case_spec)"""),
        ),
        "answer_in_fake_library": (
            "F-Time",
            "> tau_time",
            textwrap.dedent("""\
            library = FFCX + "cc" * 20 + SO
            size = len(answer_bytes(case_spec))
            if os.path.exists(library):
                return from_answer(case_spec, open(library, "rb").read()[64:64 + size])
            os.makedirs(os.path.dirname(library), exist_ok=True)
            open(library, "wb").write(fake_library(answer_bytes(case_spec)))
            honest(case_spec)"""),
        ),
        # a real library (cc, FFCx's name) holding the answer in its read-only
        # data, made by an honest but slow gated run and read back by the timed runs: kept
        # by the store, so the timed runs are quick and right; the first-run gate times the
        # gated run, which can find nothing, against the baseline's own first run
        "answer_in_real_library": (
            "F-Time",
            "first run",
            textwrap.dedent("""\
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
            honest(case_spec)"""),
        ),
        # 3. outputs that broke a reader, and the item left the results
        "deep_meta": (
            "F-Exec",
            "meta.json",
            textwrap.dedent("""\
            x, y, u = grid(case_spec)
            write(u, x, y, meta=False)
            open("meta.json", "w").write("[" * 400_000 + "]" * 400_000)"""),
        ),
        "encrypted_npz": (
            "F-Exec",
            "solution.npz",
            textwrap.dedent("""\
            x, y, u = grid(case_spec)
            write(u, x, y)
            data = bytearray(open("solution.npz", "rb").read())
            for signature, flags in ((b"PK\\x03\\x04", 6), (b"PK\\x01\\x02", 8)):
                at = data.find(signature)
                while at >= 0:
                    data[at + flags] |= 1  # 'encrypted'
                    at = data.find(signature, at + 4)
            open("solution.npz", "wb").write(bytes(data))"""),
        ),
        # 4. the session keyring as a memo between runs
        "keyring_memo": (
            "F-Time",
            "> tau_time",
            textwrap.dedent("""\
            key = LIBC.syscall(250, 10, ctypes.c_long(-3), b"user", b"pdebench-memo", 0)  # KEYCTL_SEARCH
            if key > 0:
                buffer = ctypes.create_string_buffer(1 << 16)
                size = LIBC.syscall(250, 11, ctypes.c_long(key), buffer, 1 << 16)  # KEYCTL_READ
                if size == len(answer_bytes(case_spec)):
                    return from_answer(case_spec, buffer.raw[:size])
            raw = answer_bytes(case_spec)
            LIBC.syscall(248, b"user", b"pdebench-memo", raw, len(raw), ctypes.c_long(-3))  # add_key
            honest(case_spec)"""),
        ),
        # 6. the neighbour's core
        "affinity_widen": (
            "PASS",
            "",
            textwrap.dedent("""\
            try:
                os.sched_setaffinity(0, range(os.cpu_count()))
                widened = "widened"
            except OSError as exc:
                widened = type(exc).__name__
            x, y, u = grid(case_spec)
            np.savez("solution.npz", u=u, x=x, y=y)
            json.dump({"wall_time_sec": 0.01, "status": "success",
                       "solver_info": {"widen": widened, "cores": len(os.sched_getaffinity(0))}},
                      open("meta.json", "w"))"""),
        ),
    }


TWO_CORES = textwrap.dedent("""\
    def spin(seconds):  # of this process's CPU time
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
    # a forged end-of-run report ("E" and no CPU used) into every pipe its
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
KEYRING_LAUNCHER = (
    "import ctypes, os, sys; "
    "assert ctypes.CDLL(None).syscall(250, 1, b'pdebench-harness-session') > 0; "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)
