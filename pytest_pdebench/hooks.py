"""The benchmark's pytest hooks, registered by the plugin (``plugin.py``) once a ``--pde-*``
option asks for benchmark items: the run's start (sandbox check), collection of case files,
the header, the verdict words, the shard's selection, the recorder of verdicts and the
terminal's tables."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from . import items as case_items
from .session import PdeRun

VERBOSE_WORDS = {
    "PASS": ("passed", ".", "PASS"),
    "F-Exec": ("failed", "F", "F-Exec"),
    "F-Acc": ("failed", "A", "F-Acc"),
    "F-Time": ("failed", "T", "F-Time"),
}


def start_benchmark(config: pytest.Config) -> None:
    """The benchmark's run from the options (None: no source option, after all) and, when there
    is one, this module's hooks registered for it."""
    import sys

    from .notices import PdeBenchWarning
    from .options import run_from_config
    from .session import pin_worker, terminate_as_interrupt

    _add_extensions(config)
    run = run_from_config(config)
    if run is None:
        return
    pin_worker(config)
    terminate_as_interrupt()
    config.stash[case_items.PDE_RUN] = run
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(run.cases_path)]  # a source option alone means: the cases
    backend_problem = None if run.static_only else _sandbox_problem(run)
    if backend_problem:
        raise pytest.UsageError(backend_problem)
    if run.settings.sandbox == "none":
        config.issue_config_time_warning(
            PdeBenchWarning("--pde-sandbox=none: solvers run UNSANDBOXED with your user's rights, network and files"),
            stacklevel=2,
        )
    config.pluginmanager.register(sys.modules[__name__], "pdebench-hooks")


def _add_extensions(config: pytest.Config) -> None:
    """The backends and tracks other plugins give (hookspecs.py), before the options are read."""
    from .libraries import use_tracks
    from .sandbox import add_backends

    backends: dict = {}
    config.hook.pytest_pdebench_add_backends(config=config, backends=backends)
    tracks: dict = {}
    config.hook.pytest_pdebench_add_tracks(config=config, tracks=tracks)
    try:
        add_backends(backends)
        use_tracks(tracks)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _sandbox_problem(run) -> str | None:
    from .sandbox import get_backend

    try:
        backend = get_backend(run.settings.sandbox)
    except ValueError as exc:
        return f"--pde-sandbox: {exc}"
    problem = backend.available()
    if problem is None and hasattr(backend, "sweep") and not hasattr(run.config, "workerinput"):
        _sweep(backend)  # containers of runs that died (killed, power cut) go first
    return problem


def _sweep(backend) -> None:
    """Housekeeping, never the run's end: an engine that cannot list its containers is
    reported and the run goes on (each run removes its own container)."""
    import warnings

    from .notices import PdeBenchWarning

    try:
        backend.sweep()
    except Exception as exc:
        warnings.warn(PdeBenchWarning(f"could not remove the containers of earlier runs: {exc}"), stacklevel=2)


def pytest_collect_file(file_path, parent):
    return case_items.collect_jsonl(file_path, parent)


def pytest_report_header(config: pytest.Config):
    run = _run(config)
    meta = run.session_metadata()
    tracks = ", ".join(meta["libraries"])
    if not run.libraries_chosen:
        tracks += f" (the tracks {meta['source']} has solvers for; --pde-library chooses)"
    return [
        f"pdebench: {meta['mode']} of {meta['source']} on {tracks}; "
        f"machine {meta['machine']}; sandbox {meta['sandbox']}; artifacts in {meta['output']}",
        f"pdebench: cases {meta['cases']} ({run.case_count} records)",
        *([run.timing.local_line()] if run.settings.times_baselines else []),
        *([f"pdebench WARNING: {meta['gates']} (every verdict says so)"] if meta.get("gates") else []),
        *(f"pdebench WARNING: {line}" for line in run.timing.mismatches(run.present_libraries())),
    ]


def _run(config: pytest.Config) -> PdeRun:
    """The session's run: stashed before this module was registered, so always there."""
    return config.stash[case_items.PDE_RUN]  # type: ignore[return-value]


def pytest_report_teststatus(report, config):
    verdict = case_items.verdict_of(report)
    if verdict and report.when == "call" and not verdict.get("calibration_problem"):
        return VERBOSE_WORDS[verdict["outcome"]]


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item, call):
    if call.when == "call":
        verdict = case_items.verdict_of(item)
        if verdict:
            return {"pde": verdict}
        case = case_items.described(item)  # for the stand-in's family
        return {case_items.ITEM_KEY: case} if case else None


def _unfinished_as_interrupted(json_report: dict) -> list[str]:
    """The tests the interrupt stopped mid-way: pytest-json-report calls a test "passed" once
    its setup passed, and an interrupted call leaves no report, so such a test would read as
    passed without a verdict. Their outcome becomes "interrupted" (summary counts too)."""
    running = [
        test for test in json_report.get("tests") or [] if "call" not in test and test.get("outcome") == "passed"
    ]
    summary = json_report.get("summary") or {}
    for test in running:
        test["outcome"] = "interrupted"
        summary["passed"] = summary.get("passed", 1) - 1
        summary["interrupted"] = summary.get("interrupted", 0) + 1
    if summary.get("passed") == 0:
        del summary["passed"]
    return [test["nodeid"] for test in running]


def _crash_line(report) -> str | None:
    """The one line pytest shows for a failure (xdist: "worker 'gw0' crashed ...")."""
    crash = getattr(report.longrepr, "reprcrash", None)
    lines = str(report.longrepr or "").strip().splitlines()
    line = getattr(crash, "message", None) or (lines[-1] if lines else None)
    return line[:200] if line else None


class _Recorder:
    """Controller-side: gathers verdicts from reports (xdist relays them here)."""

    def __init__(self, run):
        self.run = run
        self.verdicts: list[dict] = []  # one per item with a verdict (or a stand-in for a crash)
        self.not_run: list[dict] = []  # items skipped (no runtime, no variant): case, reason
        self.calibrations: dict = {}
        self.counted: set[str] = set()  # node ids with a verdict or a stand-in: one each
        self.validated: Counter[str] = Counter()  # --pde-validate: records passed, failed, skipped
        self.trials: Counter[str] = Counter()  # --pde-validate: trial runs per library
        self.lifting: dict[str, tuple[str, float | None]] = {}  # --pde-validate: id: (family, the build's estimate)
        self.selected: int | None = None  # items the session set out to run
        self.interrupted = False  # Ctrl-C or SIGTERM (session.terminate_as_interrupt)

    def pytest_collection_finish(self, session):
        if session.items:  # under xdist the controller collects nothing: its workers say below
            self.selected = len(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        self.selected = len(ids)

    def pytest_keyboard_interrupt(self, excinfo):
        self.interrupted = True

    @property
    def judged(self) -> int:
        """Items that reached an outcome: a verdict, or a reason they were not run."""
        return len(self.verdicts) + len(self.not_run)

    def cut_short(self) -> str | None:
        """The line that says the run was interrupted, or None."""
        if not self.interrupted:
            return None
        of = f" of {self.selected}" if self.selected is not None else ""
        return (
            f"pdebench: interrupted: {self.judged}{of} items judged; the tables and the reports hold those only. "
            "The same command with --pde-resume judges the rest (the verdicts written are kept)"
        )

    def pytest_runtest_logreport(self, report):
        if self.run.validate and report.when == "call":
            self.validated[report.outcome] += 1
            self.trials.update(value["library"] for key, value in report.user_properties if key == "pde_trial")
            self.lifting.update((v[0], (v[1], v[2])) for key, v in report.user_properties if key == "pde_lifting")
        verdict = case_items.verdict_of(report)
        if verdict and report.when == "call":
            self.verdicts.append(verdict)
            self.counted.add(report.nodeid)
        elif report.nodeid not in self.counted and (skipped := case_items.not_run(report)):
            self.not_run.append(skipped)
            self.counted.add(report.nodeid)
        elif report.failed and report.nodeid not in self.counted:
            case = case_items.described(report)
            stand_in = case_items.no_verdict(report.nodeid, self.run.source.label, _crash_line(report), case)
            if stand_in:
                self.verdicts.append(stand_in)
                self.counted.add(report.nodeid)

    def report_metadata(self) -> dict:
        """The session's metadata, the items not run and, when it was cut short, how far it got."""
        meta = {**self.run.session_metadata(), "not_run": self.not_run}
        if self.interrupted:
            meta["interrupted"] = {"judged": self.judged, "selected": self.selected}
        return meta

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report):
        json_report["pde"] = self.report_metadata()
        if self.interrupted:
            json_report["pde"]["interrupted"]["running"] = _unfinished_as_interrupted(json_report)

    def pytest_sessionfinish(self, session):
        if self.run.mode == "calibration":
            from .calibration import write_passing

            run = self.run
            self.calibrations = write_passing(
                self.verdicts,
                run.placement.store_for,
                run.store.machine,
                run.timing.probe_sec(),
                run.timing.of,
                by_machine=run.cluster is not None,
            )
        if self.not_run and session.exitstatus == pytest.ExitCode.OK:
            # items were selected and not judged (a runtime, a solver, a baseline missing): a CI
            # job must not go green on them; the summary says which and why
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.run.settings.sandbox == "docker":
            from .sandbox import get_backend

            _sweep(get_backend("docker"))  # an interrupted xdist worker cannot remove its own container

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        from .report import (
            failed_folders,
            llm_usage,
            not_run_summary,
            resumed_line,
            t_base_origins,
            tables_by_library,
        )

        if self.run.validate:
            from .validation import checks_ran

            terminalreporter.section("PDEAgent-Bench validation")
            for line in checks_ran(self.validated, self.trials, self.run.static_only, self.lifting):
                terminalreporter.write_line(line)
        cut_short = self.cut_short()
        if not self.verdicts and not self.not_run:
            if cut_short:
                terminalreporter.write_line(cut_short)
            return
        terminalreporter.section("PDEAgent-Bench outcomes")
        if cut_short:
            terminalreporter.write_line(cut_short)
        for library, table in tables_by_library(self.verdicts, not_run=self.not_run):
            terminalreporter.write_line(f"{library}:")
            terminalreporter.write_line(table)
        for line in not_run_summary(self.not_run) + failed_folders(self.verdicts, config.option.verbose > 0):
            terminalreporter.write_line(line)
        for line in filter(
            None, [llm_usage(self.verdicts), t_base_origins(self.verdicts), resumed_line(self.verdicts)]
        ):
            terminalreporter.write_line(line)
        for library, path in self.calibrations.items():
            terminalreporter.write_line(f"calibration for {library} written to {path}")
        if config.getoption("pde_report"):
            from .analysis.render import report_of_session

            terminalreporter.write_line(
                report_of_session(self.verdicts, self.report_metadata(), Path(config.getoption("pde_report")))
            )
        terminalreporter.write_line(f"artifacts: {self.run.settings.output_dir}")
        if cut_short:  # once more at the end, where a person looks
            terminalreporter.write_line(cut_short)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(session, config, items):
    run = _run(config)
    if config.option.pde_sample:
        from .shards import sample

        kept, left_out = sample(items, config.option.pde_sample)
        if left_out:
            config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    if run.shard is not None:
        from .shards import keep

        mine, others, run.shard_info = keep(items, run.shard, run.settings.runs)
        if others:
            config.hook.pytest_deselected(items=others)
        items[:] = mine


def pytest_collection_finish(session):
    run = _run(session.config)
    hint = _nothing_selected(session, run)
    if hint:
        session.config.get_terminal_writer().line(hint)
    if run.cluster is not None:
        run.prefetch(session.items)
        session.config.get_terminal_writer().line(
            f"pdebench: runs on {len(run.cluster.workers)} workers at {run.cluster.address} "
            f"({', '.join(f'{n} {m}' for m, n in run.cluster.machines().items())}), "
            f"up to {run.cluster.ahead} sent ahead"
        )


def _nothing_selected(session, run) -> str | None:
    """Where -k or -m left no item: what the items are called, how to find a case, and
    whether the case asked for lacks the chosen tracks."""
    option = session.config.option
    if session.items or not (option.keyword or option.markexpr):
        return None
    asked = " and ".join(f"{flag} {text!r}" for flag, text in (("-k", option.keyword), ("-m", option.markexpr)) if text)
    hint = (
        f"pdebench: {asked} selected no item; an item is case_id[library] "
        "(`pdebench cases --match PATTERN` lists the cases and their tracks)"
    )
    if option.keyword and option.keyword.isidentifier():  # a bare word: the cases it names, on other tracks
        from .cases import load_cases

        named = [r for _, _, r in load_cases(run.cases_path) if option.keyword in r.id]
        tracks = ", ".join(run.libraries)
        elsewhere = [f"{r.id} ({', '.join(r.supported_libraries)})" for r in named[:3]]
        if elsewhere:
            more = f" and {len(named) - 3} more" if len(named) > 3 else ""
            hint += f"; the cases it names are not on the {tracks} track: {', '.join(elsewhere)}{more}"
    if option.markexpr:  # a marker the suite does not have: the ones it has
        import re

        from .vocabulary import MARKERS

        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", option.markexpr)) - {"and", "or", "not"}
        unknown = sorted(words - set(MARKERS))
        if unknown:
            hint += (
                f"; no item has the marker {', '.join(unknown)}: the markers are {', '.join(dict.fromkeys(MARKERS))}"
            )
    return hint


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller: the folder its workers share for the baseline pass (baseline_pass.py)."""
    folder = _run(node.config).pass_folder()
    if folder is not None:
        node.workerinput["pdebench_pass"] = str(folder)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    """The items' loop, after this machine's missing baselines are timed (--pde-baseline=local)."""
    option = session.config.option
    if option.collectonly or (session.testsfailed and not option.continue_on_collection_errors):
        return (yield)
    with _run(session.config).items_phase(session):
        return (yield)


def pytest_unconfigure(config):
    _run(config).close()  # a cluster: what is queued is cancelled and what runs is killed


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    run = _run(session.config)
    if not hasattr(session.config, "workerinput"):
        session.config.pluginmanager.register(_Recorder(run), "pdebench-recorder")
