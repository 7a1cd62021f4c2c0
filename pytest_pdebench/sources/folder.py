"""Where a submission comes from. A source turns (case, library) into solver files.

Directory layout for ``--pde-submissions=DIR`` (first match wins):

    DIR/<library>/<case_id><suffix>     a solver for one case
    DIR/<library>/<family><suffix>      a solver for a whole PDE family
    DIR/<library>/solver<suffix>        one solver for everything
    DIR/<case_id><suffix>, DIR/<family><suffix>, DIR/solver<suffix>   (same, without the library folder)

``<suffix>`` is ``.py`` for DOLFINx and Firedrake, ``.cpp``/``.cc`` for deal.II. Files
named ``_*.py`` (Python) or ``_*.h``/``_*.hpp`` (C++: header-only helpers, included by the
solver) beside the chosen solver are helpers and travel with it into the sandbox (for
example shared mesh or output code); so do those at the top of DIR, shared by every
library's solvers (beside the solver wins on a name clash).
"""

from __future__ import annotations

from pathlib import Path

from ..cases import CaseRecord
from ..libraries import get_track
from . import Draft, ItemView, Submission

HELPER_SUFFIXES = {".py": (".py",), ".cpp": (".h", ".hpp"), ".cc": (".h", ".hpp")}


class NoSubmission(Exception):
    """There is no solver for this case; the message lists where we looked."""


class DirectorySource:
    """Hand-written solvers in a directory: one attempt, audited in the item folder."""

    attempts = 1
    attempt_folders = False
    prefetchable = True  # draft() needs no item folder and no model: a cluster may run it ahead

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise FileNotFoundError(f"--pde-submissions: no directory at {self.directory}")
        self._tracks: dict[tuple[str, ...], tuple[str, ...]] = {}  # asked for every item: looked up once

    @property
    def label(self) -> str:
        return str(self.directory)

    def tracks(self, libraries: tuple[str, ...]) -> tuple[str, ...]:
        """The libraries this folder has solvers for: a ``<library>/`` folder with a solver
        file of the track's kind, or such files at the top (a ``.py`` serves both Python
        tracks). Helpers (``_*``) are not solvers."""

        def solvers(folder: Path, suffixes: tuple[str, ...]) -> bool:
            return folder.is_dir() and any(
                p.is_file() and not p.name.startswith("_") for s in suffixes for p in folder.glob(f"*{s}")
            )

        if libraries not in self._tracks:
            self._tracks[libraries] = tuple(
                library
                for library in libraries
                if solvers(self.directory / library, get_track(library).suffixes)
                or solvers(self.directory, get_track(library).suffixes)
            )
        return self._tracks[libraries]

    def candidates(self, record: CaseRecord, library: str, suffixes: tuple[str, ...]) -> list[Path]:
        folders = [self.directory / library, self.directory]
        stems = [record.id, record.family, "solver"]
        return [folder / f"{stem}{suffix}" for folder in folders for stem in stems for suffix in suffixes]

    def submission_for(self, record: CaseRecord, library: str, suffixes: tuple[str, ...]) -> Submission:
        candidates = self.candidates(record, library, suffixes)
        for path in candidates:
            if path.is_file():
                solver_name = f"solver{path.suffix}"
                files = {solver_name: self._read(path)}
                for folder in dict.fromkeys([self.directory, path.parent]):  # the solver's own folder last
                    for suffix in HELPER_SUFFIXES.get(path.suffix, (path.suffix,)):
                        for helper in sorted(folder.glob(f"_*{suffix}")):
                            files[helper.name] = self._read(helper)
                return Submission(solver_name, files, str(path))
        shown = ", ".join(str(p.relative_to(self.directory)) for p in candidates)
        raise NoSubmission(f"no solver for case {record.id!r} in {self.directory} (looked for {shown})")

    def _read(self, path: Path) -> bytes:
        """A solver or helper file. A link is followed within the folder, and outside it
        only to a source file of the same kind (a helper shared by several folders): one
        to a reference, a calibration or a case file would carry the answer into the sandbox."""
        target = path.resolve()
        if not target.is_relative_to(self.directory.resolve()) and target.suffix != path.suffix:
            raise NoSubmission(
                f"{path} links to {target}, outside {self.directory} and not a {path.suffix} file: not followed"
            )
        return target.read_bytes()

    def draft(self, item: ItemView, attempt: int, feedback=None):
        try:
            return Draft(self.submission_for(item.record, item.library, get_track(item.library).suffixes))
        except NoSubmission as exc:
            return Draft(None, reason=str(exc))

    def summary(self, history: list[dict]) -> None:
        return None


ORACLE = Path(__file__).resolve().parents[2] / "submissions" / "oracle"


def oracle_fingerprint(record: CaseRecord, library: str, oracle: Path = ORACLE) -> str | None:
    """The fingerprint the bundled oracle's submission for this item has now (None where it
    has no solver): figures measured with other oracle code are stale."""
    try:
        return DirectorySource(oracle).submission_for(record, library, get_track(library).suffixes).fingerprint
    except NoSubmission:
        return None
