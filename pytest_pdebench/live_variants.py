"""The variants a run draws as it goes (``--pde-variants``, ``--pde-sibling``): for a
published record, a sibling drawn afresh from its design (``making/variants.py`` says how),
with a solve-only part of its own built by the DOLFINx oracle in a child process and kept in
the answers cache, then checked as ``--pde-validate`` checks a new case.

On the run path: it draws with ``making/`` and never imports ``authoring/`` (the offline
builds of the suite; an import-linter contract in pyproject.toml holds it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from .bundled import answers_cache, bundled
from .cases import CaseRecord
from .making.solve_only import part_rule
from .making.suite import suite_designs
from .making.variants import Design, NoPartCarried, VariantError, drawn, record_digest, redraw_suffix
from .placement import NoCalibration, NotVaried
from .validation import static_problems

ORACLE = "submissions/oracle"  # its DOLFINx solvers build a variant's solve-only part
# a draw whose data the build refuses a part is drawn again (another key from the seed) so
# that a seed leaves few records out: 2 of 33 and 4 of 33 were left out with the first draw
# alone (seeds 7 and 11); every draw costs a part's build
REDRAWS = 2


class SolveOnlyError(Exception):
    """A variant whose solve-only part could not be built or kept; the message says why."""


class PartNotKept(SolveOnlyError):
    """The part was built, but the variant's drawn data cannot carry it (the build's rule
    refused it: ``reason`` says why). A property of that draw, not a fault of the run."""

    def __init__(self, reason: str):
        super().__init__(f"no solve-only part: {reason}")
        self.reason = reason


def variant_part(varied: CaseRecord, published: CaseRecord, folder: Path, oracle_dir: Path) -> CaseRecord:
    """VARIED (a variant of PUBLISHED, which has a part) with a part of its own, built into
    FOLDER by a child process (DOLFINx stays out of the harness's process) and kept there:
    a later call reads it back. The share is priced with the published record's thresholds
    (the variant's own come later, from its paired baseline); the part's path in the record
    is absolute. Raises PartNotKept where the build refused the part, SolveOnlyError
    where it could not run."""
    import fcntl
    import subprocess
    import sys

    folder.mkdir(parents=True, exist_ok=True)
    entry_path = folder / "part.json"
    with open(folder / ".lock", "w") as lock:  # two workers may draw the same variant (two tracks)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not entry_path.is_file():
            meta = varied.evaluation_metadata.model_copy(
                update={"thresholds": published.evaluation_metadata.thresholds}
            )
            (folder / "record.json").write_text(
                varied.model_copy(update={"evaluation_metadata": meta}).model_dump_json(exclude_none=True)
            )
            command = [sys.executable, "-m", "pytest_pdebench.making.solve_only", str(folder), str(oracle_dir)]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0 or not entry_path.is_file():
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise SolveOnlyError(f"the build of its solve-only part failed (DOLFINx needed): {last[:300]}")
    entry = json.loads(entry_path.read_text())
    if not entry["kept"]:
        raise PartNotKept(entry["reason"])
    built = CaseRecord.model_validate(entry["record"])
    part = built.evaluation_metadata.solve_only
    assert part is not None  # kept: the build wrote it
    part.path = str((folder / part.path).resolve())
    built.evaluation_metadata.thresholds = {}  # as the variant had them: paired baselines give its own
    return built


def variant(
    published: CaseRecord,
    design: Design,
    seed: int,
    case_dir: Path | None = None,
    parts: Path | None = None,
    oracle_dir: Path | None = None,
) -> CaseRecord | None:
    """The published record's variant for ``seed``, or None where records are not varied
    (no exact solution, a smoke case). Where the published record has a solve-only part,
    the variant gets one of its own (built by the DOLFINx oracle in ``oracle_dir`` into
    ``parts``/<digest>-<seed>, or read from there); a draw the build refuses a part is drawn
    again, up to REDRAWS times. Raises NoPartCarried where the build refuses every draw a
    part, VariantError where it cannot run or the variant fails the static checks."""
    for draw in range(REDRAWS + 1):
        record = drawn(published, design, seed, draw)
        if record is None:
            return None
        if published.evaluation_metadata.solve_only is None:
            break
        # the published data hide a part: so do the variant's
        name = f"{record_digest(published)}-{seed}{redraw_suffix(draw, '-')}-{part_rule()}"
        folder = (parts or answers_cache() / "variant-parts") / name
        try:
            record = variant_part(record, published, folder, oracle_dir or bundled(ORACLE) / "dolfinx")
            break
        except PartNotKept as exc:
            if draw == REDRAWS:
                raise NoPartCarried(f"{published.id} (seed {seed}, {REDRAWS + 1} draws): {exc}") from None
        except SolveOnlyError as exc:
            raise VariantError(f"{published.id} (seed {seed}): {exc}") from None
    assert record is not None  # the loop returns on None
    problems = static_problems(record, case_dir or Path("."))
    if problems:
        raise VariantError(f"{published.id} (seed {seed}): " + "; ".join(problems))
    return record


class LiveVariants:
    """The variants a run draws at evaluation time (``--pde-variants``, ``--pde-sibling``):
    each made when its item's turn comes, on the process that runs it (about 0.4 s of
    sympy; deterministic, so any worker draws the same), and kept for the run."""

    def __init__(self, oracle_dir: Path | None = None):
        self._designs: dict[str, Design] | None = None
        self.oracle_dir = oracle_dir  # the DOLFINx oracle, which builds variants' solve-only parts
        self._made: dict[tuple[str, int], CaseRecord | str] = {}

    def of(self, record: CaseRecord, seed: int, case_dir: Path | None) -> CaseRecord:
        """The record's variant for ``seed``; raises placement.NotVaried (with why) for a
        record that has none, NoCalibration for one whose variant fails its checks (the
        item cannot be judged: it fails, it is not skipped)."""
        key = (record_digest(record), seed)
        if key not in self._made:
            self._made[key] = self._draw(record, seed, case_dir)
        made = self._made[key]
        if isinstance(made, str):
            raise NotVaried(made)
        return made

    def _draw(self, record: CaseRecord, seed: int, case_dir: Path | None) -> CaseRecord | str:
        if self._designs is None:
            self._designs = {design.id: design for design in suite_designs()}
        design = self._designs.get(record.id)
        if design is None:  # the reasons name no case: the run's summary says each once
            return "not one of the suite's designs"
        try:
            varied = variant(record, design, seed, case_dir, oracle_dir=self.oracle_dir)
        except NoPartCarried:
            return NoPartCarried.NOT_VARIED
        except VariantError as exc:
            raise NoCalibration(f"no variant to judge: {exc}") from None
        if varied is None:
            if design.smoke:
                return "a smoke case"
            return "judged on a numerical reference: variants need an exact solution"
        return varied


def variants(
    records: Iterable[CaseRecord],
    seed: int,
    case_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    parts: Path | None = None,
) -> tuple[list[CaseRecord], list[str]]:
    """(variants, "<id>: why" of the records left as they are) for ``seed``; solve-only
    parts go to ``parts`` (default: the answers cache). A part the build refuses leaves its
    record as it is (why: ``NoPartCarried.NOT_VARIED``, and the build's reason after " | ")."""
    designs = {design.id: design for design in suite_designs()}
    made, kept = [], []
    for record in records:
        design = designs.get(record.id)
        if design is None:
            kept.append(f"{record.id}: not a design of the suite")
            continue
        try:
            varied = variant(record, design, seed, case_dir, parts)
        except NoPartCarried as exc:
            kept.append(f"{record.id}: {NoPartCarried.NOT_VARIED} | {exc}")
            continue
        if varied is None:
            kept.append(f"{record.id}: {'a smoke case' if design.smoke else 'no exact solution'}")
            continue
        made.append(varied)
        if progress:
            progress(record.id)
    return made, kept
