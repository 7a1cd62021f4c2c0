"""Every place the package changes the file system, found by reading its source, and where
it writes (issue 62: one link-safe writer).

A folder an untrusted process holds or has held (a run's working and cache folders, a build
folder, an agent's workspace and cache, a container's copied-out files) is touched only
through ``run_files.HeldFolder`` and ``run_files.remove_tree``, which reach every name by
descriptor and never follow a link. Everything else the package writes is listed here with
the folder it writes, none of which an untrusted process ever held. A new write fails this
test until it is listed: if it touches a held folder, go through ``run_files`` instead.

The scan reads calls by name (``write_text``, ``open(..., "w")``, ``os.open`` with a write
flag, ``unlink``, ``mkdir``, ``shutil.*``, ``os.rename``, ...); tests/test_redteam.py plants
a link, a FIFO and a folder at the names the harness writes in held folders.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_pdebench"
MUTATING = {"write_text", "write_bytes", "unlink", "mkdir", "rmdir", "rmtree", "remove_tree", "symlink", "symlink_to",
            "hardlink_to", "link", "chmod", "fchmod", "utime", "touch", "makedirs", "savez", "savez_compressed",
            "mkstemp", "mkdtemp", "removedirs", "mkfifo", "truncate", "freeze", "freeze_tree"}
SHUTIL = {"copy", "copy2", "copyfile", "copytree", "move", "rmtree"}
WRITE_FLAGS = {"O_CREAT", "O_WRONLY", "O_RDWR", "O_TRUNC", "O_APPEND"}

# The modules that handle held folders: each write site, function by function, and why it
# is safe. Their other calls on held folders go through run_files.
HANDLERS = {
    "run_files.py": {  # the mechanism itself
        "_open_folder": ["chmod"],  # a folder a run made unreadable, by its O_PATH descriptor
        "_remove_entry": ["rmdir", "unlink", "unlink"],  # by descriptor
        "HeldFolder.make": ["mkdir", "remove_tree"],  # a new folder in the harness's parent
        "HeldFolder.folder": ["mkdir"],  # by descriptor
        "HeldFolder.write": ["fchmod", "os.open"],  # O_CREAT | O_EXCL | O_NOFOLLOW, by descriptor
    },
    "execution.py": {  # the item's scratch folder: the harness's; runs see only its subfolders
        "ItemRun.__init__": ["copy", "freeze_tree", "mkdir", "mkdir"],  # runner.py and the store, before any run
        "ItemRun._fresh": ["mkdir", "rename"],  # the last run's folder renamed to the trash, a new one made
        "ItemRun._write_inputs": ["copy2", "write_bytes", "write_bytes"],  # into the folder _fresh just made
        "ItemRun.build": ["mkdir", "write_bytes"],  # a new build folder, before the compile
        "ItemRun.clear": ["remove_tree"],
        "ItemRun.run": ["freeze_tree", "remove_tree"],  # freezes the new folders before the run
    },
    "kernel_cache.py": {  # the store is the harness's (runs see it read-only); harvest reads by descriptor
        "KernelCache._store": ["chmod", "freeze", "freeze", "mkdir", "mkstemp", "replace"],
        "KernelCache.empty": ["mkdir", "remove_tree"],
        "KernelCache.prepare": ["makedirs", "makedirs", "symlink"],  # into the cache folder _fresh just made
    },
    "libraries/dealii.py": {
        "DealiiTrack.build": ["copy2"],  # a cached program into the new build folder, before the compile
        "DealiiTrack.detect": ["mkdir"],  # the toolchain's header folder (the cache root's)
        "_built_program": ["mkdir"],  # a new folder beside the build folder, written through HeldFolder
    },
    "run_folders.py": {  # scratch folders: made, locked and swept by the harness
        "Scratch.__init__": ["mkdtemp", "os.open", "rename"],
        "Scratch.remove": ["remove_tree"],
        "freeze": ["utime"],  # follow_symlinks=False, on folders the harness just made
        "freeze_tree": ["freeze", "freeze"],
        "sweep_scratch": ["os.open", "remove_tree", "remove_tree", "remove_tree"],
    },
    "sandbox/docker_backend.py": {
        "DockerBackend._create": ["open"],  # the engine's log of a container (the harness's temp file)
    },
    "sources/agents/base.py": {  # the item folder is the harness's; the workspace only through HeldFolder
        "AgentSource._run_attempt": ["mkdir", "remove_tree", "unlink", "unlink", "unlink"],  # item folder files
        "AgentSource._add_spent": ["write_text"],  # the item folder's spending file
    },
    "sources/agents/command.py": {"CommandAgent.run_agent": ["mkdir"]},  # the agent's cache, in the item folder
    "sources/agents/mini_swe.py": {
        "SandboxEnvironment.execute": ["mkdir"],  # the agent's cache, in the item folder
        "_quiet_imports": ["mkdir"],  # mini-swe-agent's config folder, in the item folder
    },
    "sources/agents/forwarder.py": {"main": ["os.open"]},  # inside the sandbox: /dev/null
    "sources/agents/proxy.py": {  # the proxy's socket (a harness temp folder) and its log (the item folder)
        "MeteringProxy.__init__": ["chmod", "unlink"],
        "MeteringProxy.__enter__": ["mkdir"],
        "MeteringProxy.__exit__": ["unlink"],
        "MeteringProxy.log": ["open"],
    },
    "evaluation.py": {  # the item's audit folder: no run sees it (an agent's workspace is removed with remove_tree)
        "_judged": ["mkdir", "remove_tree", "write_bytes"],
    },
    "judge.py": {  # the item's audit folder, as above
        "Judge._gated_run": ["write_bytes", "write_bytes"],
        "Judge.all_gates": ["write_text", "write_text", "write_text"],
        "Judge.worth_timing": ["replace"],
        "Judge.draw": ["write_text"],  # pictures.log (fields.png itself is matplotlib's savefig, into the same folder)
    },
    "verdict.py": {"Verdict.write": ["mkdir", "write_text"]},  # the item's audit folder, as above
    "cluster/worker.py": {  # the worker's own folders (an item's runs are in a scratch folder)
        "RunSite._pin": ["mkdir", "open"],
        "run_on_worker": ["mkdir", "mkdtemp", "rmtree"],
    },
}

# The other modules write only folders no untrusted process ever held: how many sites, where.
HARNESS_ONLY = {
    "analysis/figures.py": (1, "the report's output folder"),
    "analysis/item_pages.py": (3, "the report's item pages"),
    "analysis/render.py": (6, "the report's output folder"),
    "analysis/runs.py": (2, "a report's run folder"),
    "attempts.py": (2, "an attempt's audit folder"),
    "authoring/attack_audit.py": (1, "the attack audit's report"),
    "authoring/parts.py": (2, "the part store and the suite generator's discarded list (offline builds)"),
    "authoring/rebuilds.py": (1, "a regenerated case file's folder"),
    "authoring/references.py": (3, "the suite's references (offline builds)"),
    "authoring/upstream.py": (1, "an imported case file"),
    "authoring/variants.py": (1, "a variants case file"),
    "live_variants.py": (3, "a variant's part folder in the answers cache (harness only; hidden from runs)"),
    "making/attack.py": (1, "the attacker's temp folder"),
    "making/lifting.py": (4, "a copy of the lifting rung: its folder, links and setting, in a temp or report folder no run holds"),
    "making/refinement.py": (1, "a build's temp folder"),
    "making/solve_only.py": (5, "a part's references (another tier's build's put back), its entry (the part store, the answers cache; hidden from runs)"),
    "baseline_pass.py": (8, "the pass's coordination folder and the baselines' audit folder"),
    "calibration.py": (4, "the calibration store"),
    "cases.py": (5, "case files and the checked-cases cache"),
    "cli/run.py": (2, "the command's --out files"),
    "cli/suite.py": (2, "the command's --out files"),
    "containers.py": (9, "image build contexts and podman's service files"),
    "kept_baselines.py": (4, "the kept-baselines store (hidden from runs)"),
    "libraries/cxx_toolchain.py": (15, "the deal.II toolchain cache (its header folder read-only to runs)"),
    "llm/cache.py": (7, "the response cache and the spending ledger"),
    "machine_lock.py": (2, "the machine's lock files (O_EXCL | O_NOFOLLOW, regular files only)"),
    "sandbox/warm.py": (2, "the zygote's own temp folder"),
    "scaffolds/grid_utilities.py": (2, "inside a run: the solver's own outputs"),
    "session.py": (2, "the pass's coordination folder"),
    "data/attacker/solver.py": (2, "inside an attack: the attacker's own outputs in its scratch folder"),
    "testing/__init__.py": (6, "the tests' temp folders"),
    "testing/conformance.py": (13, "the checks' temp folders"),
    "testing/redteam.py": (1, "the probes' temp folders"),
    "testing/probes.py": (3, "the probes' temp folders"),
    "testing/agent_runs.py": (2, "the tests' temp folders"),
    "testing/loopback.py": (2, "the tests' temp folders"),
    "testing/slurm_node.py": (9, "the test cluster's temp folders"),
    "gates.py": (1, "an in-memory buffer (np.savez into BytesIO)"),
    "visibility.py": (1, "the answers cache, made so that it is hidden from the start"),
}


def _name_of(func) -> tuple[str | None, str | None]:
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        return func.attr, owner
    if isinstance(func, ast.Name):
        return func.id, None
    return None, None


def _names_in(node) -> set[str]:
    return {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node) if isinstance(n, (ast.Attribute, ast.Name))}


def _site(call: ast.Call) -> str | None:
    """The kind of file-system change a call makes, or None."""
    name, owner = _name_of(call.func)
    if name is None:
        return None
    if name in SHUTIL:
        return name if owner == "shutil" else None
    if name in MUTATING:
        return name
    if name == "remove" and owner == "os":
        return name
    if name in ("rename", "replace"):  # os.rename/os.replace, or Path.rename(target) (str.replace takes two)
        return name if owner == "os" or (len(call.args) == 1 and not call.keywords) else None
    if name == "open":
        if owner == "os":
            return "os.open" if len(call.args) > 1 and _names_in(call.args[1]) & WRITE_FLAGS else None
        mode = call.args[0] if owner is not None and call.args else call.args[1] if len(call.args) > 1 else None
        mode = next((k.value for k in call.keywords if k.arg == "mode"), mode)
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+"):
            return "open"
    return None


def write_sites() -> dict[str, dict[str, list[str]]]:
    """module -> function (qualified) -> the kinds of change its calls make, in order."""
    found: dict[str, dict[str, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        scope: list[str] = []

        class Visitor(ast.NodeVisitor):
            def visit_FunctionDef(self, node):
                scope.append(node.name)
                self.generic_visit(node)
                scope.pop()

            visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef  # noqa: N815

            def visit_Call(self, node):
                kind = _site(node)
                if kind:
                    found.setdefault(module, {}).setdefault(".".join(scope) or "<module>", []).append(kind)
                self.generic_visit(node)

        Visitor().visit(ast.parse(path.read_text()))
    return found


def test_every_write_of_the_package_is_listed_with_the_folder_it_writes():
    found = write_sites()
    problems = []
    for module, functions in sorted(found.items()):
        if module in HANDLERS:
            for function, kinds in sorted(functions.items()):
                if sorted(kinds) != sorted(HANDLERS[module].get(function, [])):
                    problems.append(f"{module}:{function} {sorted(kinds)} (listed: {HANDLERS[module].get(function)})")
            problems += [f"{module}:{f} listed but gone" for f in HANDLERS[module] if f not in functions]
        elif module in HARNESS_ONLY:
            count = sum(len(kinds) for kinds in functions.values())
            if count != HARNESS_ONLY[module][0]:
                problems.append(f"{module}: {count} write sites, {HARNESS_ONLY[module][0]} listed ({sorted(functions)})")
        else:
            problems.append(f"{module}: writes, and is not listed: {functions}")
    problems += [f"{m}: listed, writes nothing now" for m in [*HANDLERS, *HARNESS_ONLY] if m not in found]
    assert not problems, (
        "file-system writes not as listed (a write into a folder an untrusted process held must go through "
        "run_files.HeldFolder; any other, list it here with the folder it writes):\n" + "\n".join(problems)
    )


def test_the_scan_finds_the_kinds_of_write_it_looks_for():
    source = """
import os, shutil
from pathlib import Path
def f(p: Path):
    p.write_text("x"); open(p, "w"); open(p); p.open("ab"); os.open(p, os.O_WRONLY | os.O_CREAT)
    os.open(p, os.O_RDONLY); shutil.copy2(p, p); "a".replace("a", "b"); p.replace(p); p.unlink()
"""
    kinds = [k for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call) for k in [_site(node)] if k]
    assert sorted(kinds) == sorted(["write_text", "open", "open", "os.open", "copy2", "replace", "unlink"])
