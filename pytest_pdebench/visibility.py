"""What untrusted code sees: one allow-list.

A solver's run, a code agent and every command an agent runs see their own read-write
folders (a run's working, cache and /tmp folders; an agent's workspace and cache) and,
read-only, exactly what ``RunRequest.read_only`` lists, which only these put there:

- the system: ``/usr`` and the top-level links into it (every backend; ``bubblewrap.py``);
- the track's runtime: its Python prefix and base prefix, Firedrake's PETSc folder,
  deal.II's precompiled header (``libraries/``: ``Runtime.read_only``);
- what the harness put there on purpose: ``runner.py``, the item's kernel store, an
  agent's forwarder and the proxy's socket folder (``execution.py``, ``sources/agents``);
- an agent's own program and files, declared with ``--pde-agent-dir`` (each folder at its
  own path, so a virtual environment's scripts still find their interpreter).

Nothing else of the host is mounted: not a folder an agent's command line names, not the
session's folders. And inside the allowed folders, what holds answers is never shown
(``hidden_within``: each is mounted over with an empty read-only folder): every installed
copy of this package and every checkout's ``cases/``, ``calibrations/`` and
``submissions/`` found there, this checkout's, the cache root's kept baselines, answers
and deal.II binaries, and the folders the session reads or writes (``never_show``: its
case file's folder, calibrations, oracle, output and audit folders, the LLM cache). A
declared agent folder inside one of those is refused (``check_declared``). Containers
mount nothing of the host (``docker_backend.py``): their allow-list is the image.
"""

from __future__ import annotations

import functools
from pathlib import Path

from .bundled import CHECKOUT, PACKAGE, answers_cache, baselines_folder, cache_root

ANSWER_KEY = ("cases", "calibrations", "submissions")  # a checkout's folders that hold answers
PACKAGE_NAME = PACKAGE.name
# where an allowed folder may hold a copy of this package: an install (a venv, /usr, /usr/local)
# or a checkout inside it (pip's editable installs from git clone into <venv>/src/<name>)
INSTALLED_COPIES = (
    "lib/python3*/site-packages/pytest_pdebench",
    "lib/python3*/dist-packages/pytest_pdebench",
    "lib/python3/dist-packages/pytest_pdebench",
    "local/lib/python3*/dist-packages/pytest_pdebench",
    "local/lib/python3*/site-packages/pytest_pdebench",
    "src/*/pytest_pdebench",
    "pytest_pdebench",
    "*/pytest_pdebench",
)
_session_folders: list[Path] = []


class DeclaredFolderRefused(ValueError):
    """A folder declared for an agent holds, or sits in, what a run must never see."""


def never_show(*folders: Path | str | None) -> None:
    """The session's own folders (cases, calibrations, oracle, output, caches): hidden from
    every run and agent wherever an allowed folder holds them."""
    for folder in folders:
        if folder is not None:
            resolved = Path(folder).resolve()
            if resolved not in _session_folders:
                _session_folders.append(resolved)


def never_visible() -> list[Path]:
    """The folders no run may see, wherever they are."""
    binaries = [path for path in cache_root().glob("dealii-*/bin")]
    return [
        PACKAGE,
        *(CHECKOUT / name for name in ANSWER_KEY),
        answers_cache(),
        baselines_folder(),
        *binaries,
        *_session_folders,
    ]


def hidden_within(root: str) -> tuple[str, ...]:
    """The folders under ``root`` (an allowed read-only folder) that a run must not see:
    the never-visible folders under it, every copy of this package found there and, for
    a copy that is a checkout, its answer-key folders."""
    answers_cache().mkdir(parents=True, exist_ok=True)  # made now, so that a later answer is hidden too
    # keyed by the never-visible list as it is now (it follows the cache root, the session's
    # folders and the binary caches made so far), so no change of them can meet a stale answer
    return _hidden_within(root, tuple(never_visible()))


@functools.lru_cache(maxsize=64)
def _hidden_within(root: str, never: tuple[Path, ...]) -> tuple[str, ...]:
    top = Path(root).resolve()
    candidates = list(never)
    if top.is_dir():
        for pattern in INSTALLED_COPIES:
            for package in top.glob(pattern):
                candidates.append(package)
                if (package.parent / "pyproject.toml").is_file():  # a checkout: its answers beside it
                    candidates += [package.parent / name for name in ANSWER_KEY]
    found = []
    for candidate in candidates:
        resolved = candidate.resolve()
        if resolved.is_dir() and resolved.is_relative_to(top):
            found.append(str(resolved))
    return tuple(dict.fromkeys(found))


def hidden_in(read_only) -> list[str]:
    """``hidden_within`` over a run's read-only folders (/usr among them: a system-wide pip
    install lands in /usr/local)."""
    roots = dict.fromkeys(str(Path(p).resolve()) for p in ["/usr", *read_only])
    return list(dict.fromkeys(hidden for root in roots for hidden in hidden_within(root)))


def check_declared(folder: Path | str) -> Path:
    """A folder declared as an agent's (``--pde-agent-dir``), resolved; refused if it is, or
    lies inside, a folder no run may see (what lies below it is hidden as in any allowed
    folder)."""
    path = Path(folder).resolve()
    if not path.is_dir():
        raise DeclaredFolderRefused(f"{folder}: not a folder")
    for hidden in never_visible():
        hidden = hidden.resolve()
        if path == hidden or path.is_relative_to(hidden):
            raise DeclaredFolderRefused(
                f"{folder} lies in {hidden}, which no run or agent may see "
                "(answers, baselines or the session's folders)"
            )
    if path == Path("/") or path == Path.home().resolve():
        raise DeclaredFolderRefused(f"{folder}: declare the agent's own folder, not the whole of {path}")
    return path
