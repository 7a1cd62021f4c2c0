"""pytest collectors and items: a JSONL file of cases, one item per (case, library)."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest

from .cases import LIBRARIES, CaseFileError, CaseRecord, claim_id, iter_case_file, iter_case_lines
from .gates import GateFailure

# the runs' modules (evaluation, placement, reference: numpy, sympy) are imported by the items'
# methods, not here: a --pde-validate run of static checks does not need them

if TYPE_CHECKING:
    from .evaluation import Verdict
    from .placement import Placement
    from .settings import Settings
    from .sources import Source


class CaseRun(Protocol):
    """What the items use of the session's run (``session.PdeRun``, a layer above this
    module: the plugin puts it in the config's stash under PDE_RUN)."""

    config: pytest.Config
    libraries: tuple[str, ...]
    source: Source
    settings: Settings
    validate: bool
    static_only: bool

    @property
    def placement(self) -> Placement: ...

    def missing_track(self, library: str) -> str | None: ...

    def evaluate(self, record: CaseRecord, library: str, case_dir: Path, machine: str | None = None) -> Verdict: ...


PDE_RUN = pytest.StashKey["CaseRun"]()
SEEN_IDS = pytest.StashKey[dict]()
BACKSTOP_MARGIN_SEC = 120
# a case item's name: case[library], or case[library@machine class] on a cluster of several
CASE_ITEM_NAME = re.compile(r"(?P<case_id>[a-z0-9][a-z0-9_]*) ?\[(?P<library>[a-z]+)(?:@(?P<machine>[^\[\]]+))?\]")
NO_VERDICT = "no verdict"
ITEM_KEY = "pde_item"  # a case item's user property: what it is, on every report


class CalibrationRejected(Exception):
    """A baseline that ran but cannot define thresholds."""


class CaseFile(pytest.File):
    def collect(self):
        run = self.config.stash[PDE_RUN]
        seen = self.config.stash.setdefault(SEEN_IDS, {})
        if run.validate:
            yield from self._validation_items(seen)
            return
        try:
            classes = run.placement.calibration_classes()  # a cluster of several machine classes: one item each
            for line, record in iter_case_file(self.path):
                claim_id(seen, record, self.path, line)
                for library in run.libraries:
                    if library in record.supported_libraries:
                        for machine in classes:
                            yield CaseItem.from_parent(
                                self,
                                name=case_item_name(record.id, library, machine),
                                record=record,
                                library=library,
                                line=line,
                                machine=machine,
                            )
        except CaseFileError as exc:
            raise self.CollectError(str(exc)) from None

    def _validation_items(self, seen: dict):
        """One item per line: a broken record fails on its own, named by id (or line)."""
        for line, case_id, item in iter_case_lines(self.path):
            name = f"{case_id or f'line{line}'}[validate]"
            if isinstance(item, CaseRecord):
                try:
                    claim_id(seen, item, self.path, line)
                except CaseFileError as exc:
                    item, name = exc, f"{case_id}[validate:line{line}]"
            yield ValidateItem.from_parent(self, name=name, outcome=item, line=line)


class ValidationFailure(Exception):
    pass


class ValidateItem(pytest.Item):
    """``--pde-validate``: the static checks, then a trial calibration run per library."""

    def __init__(self, *, outcome, line: int, **kwargs):
        super().__init__(**kwargs)
        bracketed_id(self)
        self.outcome, self.line = outcome, line

    def runtest(self):
        from .libraries import RuntimeMissing
        from .validation import lifting_gain, static_problems

        if isinstance(self.outcome, CaseFileError):
            raise ValidationFailure(f"record at {self.outcome}")
        record = self.outcome
        problems = static_problems(record, self.path.parent)
        if problems:
            raise ValidationFailure(f"record {record.id}: " + "; ".join(problems))
        if record.evaluation_metadata.solve_only is not None:  # the summary's lifting line
            self.user_properties.append(("pde_lifting", [record.id, record.family, lifting_gain(record)]))
        run = self.config.stash[PDE_RUN]
        if run.static_only:
            return
        tried = []
        for library in (lib for lib in run.libraries if lib in record.supported_libraries):
            try:
                run.settings.runtime(library)
            except RuntimeMissing:
                continue
            verdict = run.evaluate(record, library, self.path.parent)
            tried.append(library)
            self.user_properties.append(("pde_trial", verdict.to_dict()))
            if not verdict.passed:
                raise ValidationFailure(
                    f"record {record.id}: trial run on {library}: {verdict.outcome}: {verdict.reason}"
                )
            if verdict.calibration_problem:
                raise ValidationFailure(
                    f"record {record.id}: trial run on {library}: thresholds: {verdict.calibration_problem}"
                )
        if not tried:
            pytest.skip(
                f"record {record.id}: static checks pass; no runtime here for a trial run "
                f"({', '.join(record.supported_libraries)})"
            )

    def repr_failure(self, excinfo, style=None):
        from .reference import ReferenceError

        if isinstance(excinfo.value, (ValidationFailure, ReferenceError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, self.line - 1, self.name


def bracketed_id(item: pytest.Item) -> None:
    """Give an item named ``base[params]`` the structured id pytest 9 parses that name into
    (``NodeId(names=(base,), params=params)``): the cache's ``--lf``/``--ff``/``--sw`` keys are
    node ids read back that way, and an id with the brackets in its name never matched them
    (``--lf`` reran the whole suite). Older pytest has no structured ids: nothing to do."""
    node_id = getattr(item, "_id", None)
    if node_id is None or not hasattr(node_id, "with_params") or item.parent is None:
        return
    base, _, params = item.name.partition("[")
    if params.endswith("]"):
        item._id = item.parent.id.child(base).with_params(params[:-1])


class CaseItem(pytest.Item):
    def __init__(self, *, record: CaseRecord, library: str, line: int, machine: str | None = None, **kwargs):
        super().__init__(**kwargs)
        bracketed_id(self)
        self.record, self.library, self.line, self.machine = record, library, line, machine
        for marker in (
            record.family,
            *record.pde_classification.math_type,
            library,
            record.domain_type,
            record.evaluation_metadata.construction_method,
        ):
            self.add_marker(_mark(marker))
        self.extra_keyword_matches.update({record.id, record.family, library, record.domain_type})
        # on every report of the item, skipped ones too: the controller's "not run" rows need the family
        self.user_properties.append((ITEM_KEY, {"case_id": record.id, "library": library, "family": record.family}))
        if self.config.pluginmanager.hasplugin("timeout"):
            run = self.config.stash[PDE_RUN]
            per_run = run.settings.timeout_sec or record.evaluation_config.timeout_sec
            # a backstop only: the sandbox kills solvers (and the client model calls) long before
            per_attempt = (run.settings.runs + 1) * (per_run + 30)
            option, writing = run.config.option, 0.0  # the time a source may take to write the code
            if option.pde_agent:
                writing = option.pde_agent_timeout + option.pde_agent_action_timeout
            elif option.pde_model:
                writing = option.pde_llm_timeout * (option.pde_llm_retries + 1)
            self.add_marker(pytest.mark.timeout(run.source.attempts * (per_attempt + writing) + BACKSTOP_MARGIN_SEC))

    def setup(self):
        why = self.config.stash[PDE_RUN].missing_track(self.library)
        if why:
            pytest.skip(why)

    def runtest(self):
        from .baselines import BaselineFailure
        from .placement import NoCalibration, NotVaried
        from .sources import NotRun

        run = self.config.stash[PDE_RUN]
        no_baseline: str | None = None
        try:
            verdict = run.evaluate(self.record, self.library, self.path.parent, self.machine)
        except NotRun as exc:  # budget spent or not in the replay cache: not a failure
            pytest.skip(f"not run: {exc}")
        except NotVaried as exc:  # --pde-variants: the record has none (said, and counted, in the report)
            pytest.skip(f"no variant ({exc})")
        except (NoCalibration, BaselineFailure) as exc:
            no_baseline = str(exc)  # failed below, outside the handler: one message, not a chained pair
        if no_baseline is not None:
            pytest.fail(no_baseline, pytrace=False)
        said = verdict.to_dict()
        extra: dict = {}  # the last word of other plugins (hookspecs.pytest_pdebench_verdict)
        self.config.hook.pytest_pdebench_verdict(config=self.config, verdict=dict(said), extra=extra)
        self.user_properties.append(("pde", {**said, "extra": extra} if extra else said))
        if verdict.calibration_problem:
            raise CalibrationRejected(f"baseline rejected: {verdict.calibration_problem}")
        if not verdict.passed:
            raise GateFailure(verdict.outcome, verdict.reason)

    def repr_failure(self, excinfo, style=None):
        from .reference import ReferenceError

        if isinstance(excinfo.value, (GateFailure, CalibrationRejected, ReferenceError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, self.line - 1, f"{self.record.id} [{self.library}]"


@functools.cache
def _mark(name: str) -> pytest.MarkDecorator:
    """One decorator per marker name (pytest builds and checks one per add_marker("name") call:
    a third of the items' construction over the suite's 1,468 items)."""
    return getattr(pytest.mark, name)


def case_item_name(case_id: str, library: str, machine: str | None) -> str:
    return f"{case_id}[{library}@{machine}]" if machine else f"{case_id}[{library}]"


def case_item_of(nodeid: str) -> tuple[str, str] | None:
    """(case id, library) of a case item's node id (``cases.jsonl::poisson_1[dolfinx]``);
    None for any other test (a validation item, another plugin's test). A case file outside
    the rootdir gives node ids with no path (``::poisson_1[dolfinx]``)."""
    path, sep, name = nodeid.rpartition("::")
    match = CASE_ITEM_NAME.fullmatch(name)
    if not sep or not (path.endswith(".jsonl") or not path) or not match or match["library"] not in LIBRARIES:
        return None
    return match["case_id"], match["library"]


def no_verdict(nodeid: str, source: str | None, crash: str | None = None, described: dict | None = None) -> dict | None:
    """The stand-in verdict of a case item that ran and ended without one (its test crashed
    before the verdict was written, its xdist worker died, its paired oracle failed): F-Exec,
    so that the item stays in every denominator and a solver cannot drop the items it would
    fail. None for a test that is not a case item. The family is the item's ``ITEM_KEY``
    property where the report carries it (``described``), else "?"."""
    item = (described["case_id"], described["library"]) if described else case_item_of(nodeid)
    if item is None:
        return None
    return {
        "case_id": item[0],
        "library": item[1],
        "family": (described or {}).get("family", "?"),
        "source": source,
        "outcome": "F-Exec",
        "reason": f"{NO_VERDICT} ({crash})" if crash else NO_VERDICT,
        "no_verdict": True,
    }


def not_run(report) -> dict | None:
    """What a skipped case item's report says: its case, library and family, and the reason
    it was not run (no runtime here, no variant, no money left); None for any other report."""
    item = described(report)
    if item is None or not getattr(report, "skipped", False):
        return None
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return {**item, "reason": reason.removeprefix("Skipped: ")}


def described(node) -> dict | None:
    """A case item's ``ITEM_KEY`` property (case, library, family), from the item or any of
    its reports; None for other tests."""
    return dict(getattr(node, "user_properties", ())).get(ITEM_KEY)


def verdict_of(report) -> dict | None:
    for key, value in getattr(report, "user_properties", ()):
        if key == "pde":
            return value
    return None


def collect_jsonl(file_path: Path, parent) -> CaseFile | None:
    if file_path.suffix == ".jsonl" and PDE_RUN in parent.config.stash:
        return CaseFile.from_parent(parent, path=file_path)
    return None
