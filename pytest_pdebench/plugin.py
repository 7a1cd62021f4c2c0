"""pytest-pdebench: PDEAgent-Bench cases as pytest items. Options and hooks only;
each concern lives in its own module (see the README's design section)."""

from __future__ import annotations

import pytest

from . import items
from .cases import FAMILIES, LIBRARIES, MATH_TYPES
from .domains import DOMAIN_TYPES

VERBOSE_WORDS = {"PASS": ("passed", ".", "PASS"), "F-Exec": ("failed", "F", "F-Exec"),
                 "F-Acc": ("failed", "A", "F-Acc"), "F-Time": ("failed", "T", "F-Time")}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pdebench", "PDEAgent-Bench (pytest-pdebench)")
    group.addoption("--pde-submissions", metavar="DIR", help="evaluate the hand-written solvers in DIR "
                    "(DIR/<library>/<case_id|family|solver>.py)")
    group.addoption("--pde-library", action="append", metavar="NAME", help="library track(s): dolfinx, firedrake, "
                    "dealii; repeat or comma-separate (default: all)")
    group.addoption("--pde-cases", metavar="PATH", help="case file or directory (default: the bundled cases/)")
    group.addoption("--pde-runs", type=int, default=1, metavar="N", help="timed runs per item, averaged (default 1)")
    group.addoption("--pde-timeout", type=float, metavar="SECONDS", help="per-run timeout, overrides the cases' "
                    "timeout_sec")
    group.addoption("--pde-alpha-acc", type=float, metavar="A", help="accuracy multiplier (default: case, 10)")
    group.addoption("--pde-alpha-time", type=float, metavar="A", help="runtime multiplier (default: case, 3)")
    group.addoption("--pde-tau-min", type=float, metavar="TAU", help="accuracy floor (default: case, 1e-6)")
    group.addoption("--pde-memory-mb", type=int, default=8192, metavar="MB", help="address-space limit per run")
    group.addoption("--pde-sandbox", choices=("bubblewrap", "none"), default="bubblewrap",
                    help="isolation backend; 'none' runs solvers unsandboxed (unsafe)")
    group.addoption("--pde-output", metavar="DIR", help="audit directory per item (default: reports/runs/<source>)")
    group.addoption("--pde-resume", action="store_true", help="reuse verdicts of items whose inputs did not change")
    group.addoption("--pde-calibrate", action="store_true", help="measure baselines (default source: the oracle) "
                    "and write calibrations/<library>/<machine>.json")
    group.addoption("--pde-calibrations", metavar="DIR", help="calibration directory (default: calibrations/)")
    group.addoption("--pde-validate", metavar="PATH", help="gate new cases: one test per record in PATH, static "
                    "checks then a trial calibration run of the oracle (default source: the bundled oracle)")
    group.addoption("--pde-validate-static", action="store_true", help="with --pde-validate: static checks only")


def pytest_configure(config: pytest.Config) -> None:
    for name in (*FAMILIES, *MATH_TYPES, *LIBRARIES, *DOMAIN_TYPES):
        config.addinivalue_line("markers", f"{name}: PDEAgent-Bench cases tagged {name}")
    from .session import PdeRun, PdeBenchWarning

    run = PdeRun.from_config(config)
    if run is None:
        return
    config.stash[items.PDE_RUN] = run
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(run.cases_path)]  # a source option alone means: the cases
    backend_problem = None if run.static_only else _sandbox_problem(run)
    if backend_problem:
        raise pytest.UsageError(backend_problem)
    if run.settings.sandbox == "none":
        config.issue_config_time_warning(PdeBenchWarning(
            "--pde-sandbox=none: solvers run UNSANDBOXED with your user's rights, network and files"), stacklevel=2)


def _sandbox_problem(run) -> str | None:
    from .sandbox import get_backend

    return get_backend(run.settings.sandbox).available()


def pytest_collect_file(file_path, parent):
    return items.collect_jsonl(file_path, parent)


def pytest_report_header(config: pytest.Config):
    run = config.stash.get(items.PDE_RUN, None)
    if run:
        meta = run.session_metadata()
        return [f"pdebench: {meta['mode']} of {meta['source']} on {', '.join(meta['libraries'])}; "
                f"machine {meta['machine']}; sandbox {meta['sandbox']}; artifacts in {meta['output']}"]


def pytest_report_teststatus(report, config):
    verdict = items.verdict_of(report)
    if verdict and report.when == "call" and not verdict.get("calibration_problem"):
        return VERBOSE_WORDS[verdict["outcome"]]


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item, call):
    if call.when == "call":
        verdict = items.verdict_of(item)
        return {"pde": verdict} if verdict else None


class _Recorder:
    """Controller-side: gathers verdicts from reports (xdist relays them here)."""

    def __init__(self, run):
        self.run = run
        self.calibrations: dict = {}

    def pytest_runtest_logreport(self, report):
        verdict = items.verdict_of(report)
        if verdict and report.when == "call":
            self.run.verdicts.append(verdict)

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report):
        json_report["pde"] = self.run.session_metadata()

    def pytest_sessionfinish(self, session):
        if self.run.mode == "calibration":
            self.calibrations = self.run.write_calibration()

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        from .report import tables_by_library

        if not self.run.verdicts:
            return
        terminalreporter.section("PDEAgent-Bench outcomes")
        for library, table in tables_by_library(self.run.verdicts):
            terminalreporter.write_line(f"{library}:")
            terminalreporter.write_line(table)
        for library, path in self.calibrations.items():
            terminalreporter.write_line(f"calibration for {library} written to {path}")
        terminalreporter.write_line(f"artifacts: {self.run.settings.output_dir}")


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    run = session.config.stash.get(items.PDE_RUN, None)
    if run is not None and not hasattr(session.config, "workerinput"):
        session.config.pluginmanager.register(_Recorder(run), "pdebench-recorder")
