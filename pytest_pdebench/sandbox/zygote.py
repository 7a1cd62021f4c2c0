"""The warm runner's server (standard library only; run by the track's Python).

    python -I zygote.py [--defer-mpi] [--map=LIBRARIES] [--code=PACKAGES] MODULES

It imports MODULES once, maps LIBRARIES (shared objects, not imported), and then serves
runs sent by the harness over its stdin (a unix socket: one JSON request per message, the
run's stdout, stderr and marker pipes attached). The harness has already started the run's
sandbox, the same bubblewrap sandbox a fresh process gets, holding only a placeholder
process; the request names its pid 1 (``ns_pid``). For each run:

    zygote ── joiner (joins the sandbox's namespaces) ── solver (in the sandbox's pid namespace)

* The joiner, a fork of the zygote, enters the sandbox's mount, pid, network, IPC, UTS,
  cgroup and user namespaces (setns), so its root is the sandbox's, and forks the solver
  (a fork is what enters a pid namespace).
* The solver drops every capability, sets no_new_privs, takes the run's limits, and goes
  on as runner.py does in a fresh process: (MPI initialisation and) the track's
  remaining imports, the marker, the submission, os._exit.
* The joiner reaps the solver and exits with its status (128 + n for signal n, as
  bubblewrap reports it); the zygote reaps the joiner and tells the harness. The
  harness then ends the sandbox, and with its pid 1 whatever the solver left running.

The zygote itself runs outside every sandbox and no run can reach it: a run sees only its
sandbox's processes and files, and the zygote never runs submission code.

MPI is not initialised in the zygote (``--defer-mpi``: mpi4py is imported with
``rc.initialize = False``): a forked copy of an initialised MPI library (MPICH with UCX
here) is not something MPI supports, so each solver initialises its own before its clock
starts, as a fresh process does.

Extension modules whose import would start MPI (petsc4py's PETSc, DOLFINx's C++ module)
are only mapped here (``--map``: ``package/folder/name*suffix``, the package found without
importing it): the dynamic loader's work on them and on the libraries they link (PETSc, MPI,
HDF5, ...) is done once, and a run's import finds them loaded and only initialises them.

Packages imported only after MPI (Firedrake's own, PyOP2, TSFC: ``--code``) cannot be
imported here; the zygote reads their modules' bytecode instead (each ``.py`` file's code
object, as an import would read it, none of it run), and a run's import of such a module
runs that code object: it is spared finding, reading and unmarshalling the cached bytecode
(0.1 s of Firedrake's 0.45 s import), and imports as it would have otherwise.

Some libraries open cache files when imported: pytools' persistent dicts (loopy's code
caches, under Firedrake) connect to an sqlite file at construction. Imported in the zygote,
that would be a file outside every sandbox and a connection its forks share; so while the
zygote imports, such a dict is made without its file, and each run opens its own where the
run's XDG_CACHE_HOME says, before its clock starts, as its own import would have.
"""

import ctypes
import fcntl
import json
import os
import resource
import signal
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = "/sandbox/harness"  # where the sandbox shows runner.py
sys.path.insert(0, HERE)
import runner  # type: ignore[import-not-found]  # noqa: E402  (beside this file: top-level on sys.path, not the package's)

PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
NS_GET_USERNS = 0xB701  # ioctl on a namespace: its owning user namespace
NAMESPACES = ("mnt", "pid", "net", "ipc", "uts", "cgroup", "user")  # joined in this order (see _join)
WORK = "/sandbox/work"

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _join(ns_pid: int) -> None:
    """Enter the namespaces of process ``ns_pid`` that differ from ours.

    bubblewrap makes two user namespaces: one it sets the sandbox up in, which owns the
    mount, pid and other namespaces, and inside it the one its process runs in. Joining
    the owner first gives the rights to join the rest, whether the harness is root or not
    (a process has every capability in a user namespace it joins, and in its children)."""
    own = {name: os.stat(f"/proc/self/ns/{name}").st_ino for name in NAMESPACES}  # /proc is ours until mnt
    fds = {}
    try:
        for name in NAMESPACES:
            path = f"/proc/{ns_pid}/ns/{name}"
            if os.path.exists(path) and os.stat(path).st_ino != own[name]:
                fds[name] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        user_now = own["user"]
        if "mnt" in fds:
            fds["owner"] = fcntl.ioctl(fds["mnt"], NS_GET_USERNS)
            if os.fstat(fds["owner"]).st_ino != user_now:
                _check(_libc.setns(fds["owner"], 0), "setns to the sandbox's owner user namespace")
                user_now = os.fstat(fds["owner"]).st_ino
        for name in NAMESPACES[:-1]:
            if name in fds:
                _check(_libc.setns(fds[name], 0), f"setns {name}")
        if "user" in fds and os.fstat(fds["user"]).st_ino != user_now:
            _check(_libc.setns(fds["user"], 0), "setns user")
    finally:
        for fd in fds.values():
            os.close(fd)


def _drop_capabilities() -> None:
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3: all zero
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _apply_limits(limits: dict) -> None:
    memory = limits["memory_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 5))
    size = limits["file_size_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _start_mpi() -> None:
    """MPI_Init in the run, at the thread level mpi4py would have asked for."""
    import mpi4py
    from mpi4py import MPI

    levels = {
        "single": MPI.THREAD_SINGLE,
        "funneled": MPI.THREAD_FUNNELED,
        "serialized": MPI.THREAD_SERIALIZED,
        "multiple": MPI.THREAD_MULTIPLE,
    }
    MPI.Init_thread(levels.get(mpi4py.rc.thread_level, MPI.THREAD_MULTIPLE))


class _MpiOnImport:
    """A run whose submission names none of the track's modules starts no MPI before its
    clock; should it import one all the same (a name built at run time), MPI starts first,
    as it would have, and inside the timed window: the import is the submission's work."""

    def __init__(self, roots):
        self.roots = frozenset(roots)

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.roots:
            sys.meta_path.remove(self)
            _start_mpi()
        return None  # the import itself goes on as usual


def _solver(request: dict, fds: list, defer_mpi: bool) -> None:
    """The run itself, inside the sandbox (never returns)."""
    stdout, stderr, marker = fds
    try:
        os.setsid()
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.dup2(marker, 3)
        os.closerange(4, resource.getrlimit(resource.RLIMIT_NOFILE)[0])  # nothing of the zygote's
        os.chdir(WORK)
        _drop_capabilities()
        _apply_limits(request["limits"])
        os.environ["PDEBENCH_MARKER_FD"] = "3"
        # what a fresh run's interpreter would say about itself: its arguments, its main
        # module and path (multiprocessing's spawn imports the main module again by path)
        sys.argv = [f"{HARNESS}/runner.py", request["solver"], request["preload"]]
        sys.modules["__main__"].__file__ = f"{HARNESS}/runner.py"
        sys.path[:] = [HARNESS if entry == HERE else entry for entry in sys.path]
        numpy_random = sys.modules.get("numpy.random")  # seeded once in the zygote; `random` reseeds itself
        if numpy_random is not None:
            numpy_random.seed()  # fresh entropy, as a fresh process's import draws
        if defer_mpi and request.get("start_mpi", True):
            _start_mpi()
        elif defer_mpi:
            sys.meta_path.insert(0, _MpiOnImport(request.get("mpi_on_import", ())))
    except BaseException as exc:  # noqa: BLE001 - a run must end here, never return into the zygote's loop
        runner._fail(f"PDEBENCH: the warm runner could not start the run: {exc!r}", 125)
    try:
        if _deferred is not None:
            _deferred.reopen()
        if _code is not None:
            _code.install()
        runner.preload(request["preload"])
    except BaseException:  # noqa: BLE001 - as a fresh process's failing import would
        import traceback

        runner._fail("PDEBENCH: importing the track failed\n" + traceback.format_exc(), 1)
    runner.run_solver(request["solver"])


def _exit_status(status: int) -> int:
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _joiner(request: dict, fds: list, defer_mpi: bool) -> None:
    """Enter the run's sandbox, fork the solver, leave with its status (never returns)."""
    try:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _join(request.pop("ns_pid"))  # a host pid, different in every run: the solver must not find it
        solver = os.fork()
    except BaseException as exc:  # noqa: BLE001 - the sandbox's failure, not the run's
        os.write(fds[1], f"PDEBENCH: the warm runner could not start the run: {exc!r}\n".encode())
        os._exit(125)
    if solver == 0:
        _solver(request, fds, defer_mpi)
    for fd in fds:
        os.close(fd)
    while True:
        try:
            _, status = os.waitpid(solver, 0)
            os._exit(_exit_status(status))
        except InterruptedError:
            continue


def _send(channel: socket.socket, message: dict) -> None:
    channel.send(json.dumps(message).encode())


def _serve(channel: socket.socket, request: dict, fds: list, defer_mpi: bool) -> None:
    joiner = os.fork()
    if joiner == 0:
        channel.close()
        _joiner(request, fds, defer_mpi)
    for fd in fds:
        os.close(fd)
    _, status, usage = os.wait4(joiner, 0)  # its usage holds the solver's, which it reaped
    _send(channel, {"returncode": _exit_status(status), "cpu_sec": usage.ru_utime + usage.ru_stime})


class _CacheFilesDeferred:
    """While the zygote imports: pytools' persistent dicts are made without opening their
    file (``reopen`` gives each run its own)."""

    def __init__(self, modules: str):
        self.made: list = []
        self.base = None
        if "pytools" not in modules.split(","):
            return
        from pytools.persistent_dict import _PersistentDictBase  # type: ignore[import-not-found]  # Firedrake's runtime

        self.base, self.connect = _PersistentDictBase, _PersistentDictBase.__init__
        _PersistentDictBase.__init__ = lambda own, *args, **kwargs: self.made.append((own, args, kwargs))

    def done(self) -> None:
        """The zygote's imports are over: dicts made later (in a run) open their file at once."""
        if self.base is not None:
            self.base.__init__ = self.connect

    def reopen(self) -> None:
        """In a run: each deferred dict opens its file, as made in a fresh process."""
        for own, args, kwargs in self.made:
            self.connect(own, *args, **kwargs)


_deferred: _CacheFilesDeferred | None = None  # main's, for its runs


def _package_folders(package: str) -> list:
    """The folders of a top-level package, found without importing it (nothing of it runs)."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    return list(spec.submodule_search_locations or []) if spec else []


class _ReadCode:
    """The code objects of every module under some packages, read in the zygote; in a run,
    a finder that imports those modules from them (before the path finder, after any hook)."""

    def __init__(self, packages: list):
        import importlib.machinery

        self.codes: dict = {}
        machinery = importlib.machinery
        writes = sys.dont_write_bytecode
        sys.dont_write_bytecode = True  # a missing .pyc is compiled here, never written out here
        try:
            for package in packages:
                for root in _package_folders(package):
                    self._read(package, root, machinery.SourceFileLoader)
        finally:
            sys.dont_write_bytecode = writes
        codes = self.codes

        class Loader(machinery.SourceFileLoader):
            def get_code(self, fullname):
                code = codes.pop(fullname, None)
                return code if code is not None else super().get_code(fullname)

        self.loader, self.source_loader = Loader, machinery.SourceFileLoader
        self.path_finder = machinery.PathFinder

    def _read(self, package: str, root: str, loader) -> None:
        for folder, subfolders, files in os.walk(root):
            subfolders[:] = sorted(name for name in subfolders if name not in ("__pycache__", "tests", "test"))
            prefix = package if folder == root else package + "." + os.path.relpath(folder, root).replace(os.sep, ".")
            for name in files:
                if not name.endswith(".py"):
                    continue
                module = prefix if name == "__init__.py" else f"{prefix}.{name[:-3]}"
                try:
                    self.codes[module] = loader(module, os.path.join(folder, name)).get_code(module)
                except Exception:  # noqa: BLE001 - a module that does not compile is left to its import
                    pass

    def find_spec(self, name, path=None, target=None):
        if name not in self.codes:
            return None
        spec = self.path_finder.find_spec(name, path, target)
        loader = spec.loader if spec is not None else None
        if isinstance(loader, self.source_loader) and type(loader) is self.source_loader:  # a plain .py module
            spec.loader = self.loader(loader.name, loader.path)  # type: ignore[union-attr]  # spec is set
        return spec

    def install(self) -> None:
        """In a run: before the path finder (hooks before it still come first)."""
        finders = sys.meta_path
        place = next((i for i, finder in enumerate(finders) if finder is self.path_finder), len(finders))
        finders.insert(place, self)


_code: _ReadCode | None = None  # main's, for its runs


def _map_libraries(patterns: list) -> None:
    """dlopen each shared object ``package/folder/name*suffix`` names, as an import would
    (RTLD_NOW, local symbols) but running none of its Python; one that fails is left to the
    run's import. (No glob module: nothing a run would not have imported itself.)"""
    for pattern in patterns:
        package, _, relative = pattern.partition("/")
        folder_part, _, name = relative.rpartition("/")
        prefix, _, suffix = name.partition("*")
        for root in _package_folders(package):
            folder = os.path.join(root, folder_part)
            names = os.listdir(folder) if os.path.isdir(folder) else []
            for found in sorted(n for n in names if n.startswith(prefix) and n.endswith(suffix)):
                try:
                    ctypes.CDLL(os.path.join(folder, found), mode=os.RTLD_NOW | os.RTLD_LOCAL)
                except OSError:
                    pass


def main() -> None:
    arguments = sys.argv[1:]
    defer_mpi = "--defer-mpi" in arguments
    given = dict(a[2:].partition("=")[::2] for a in arguments if a.startswith("--") and "=" in a)
    modules = next((a for a in arguments if not a.startswith("--")), "")
    channel = socket.socket(fileno=0)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the harness gone, so is the zygote
    started = time.perf_counter()
    if defer_mpi:
        import mpi4py

        mpi4py.rc.initialize = False
    global _deferred, _code
    _deferred = _CacheFilesDeferred(modules)
    try:
        runner.preload(modules)
        _map_libraries([pattern for pattern in given.get("map", "").split(",") if pattern])
        if given.get("code"):
            _code = _ReadCode(given["code"].split(","))
    finally:
        _deferred.done()
    if defer_mpi:
        from mpi4py import MPI

        if MPI.Is_initialized():  # forks would share one MPI process's state: refuse, never run so
            _send(channel, {"ready": False, "error": f"importing {modules} initialised MPI in the zygote"})
            return
    _send(channel, {"ready": True, "preload_sec": time.perf_counter() - started})
    del started  # nothing in a run's copy of this process tells how long the zygote has served
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 3)
        except ConnectionError:
            return
        if not message:
            return  # the harness closed its end: the session is over
        request = json.loads(message)
        del message  # the solver is a fork of this process: it keeps only what it needs
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            _send(channel, {"error": "expected the run's stdout, stderr and marker"})
            continue
        _serve(channel, request, fds, defer_mpi)


if __name__ == "__main__":
    main()
