"""pytest-pdebench: PDEAgent-Bench cases as pytest items. Options and hooks only;
each concern lives in its own module (docs/design.md).

pytest loads this plugin in every run of the environment it is installed in: the
session's modules (runs, gates, reports) are imported inside the hooks, once a
``--pde-*`` option asks for benchmark items, so that other test runs do not pay for them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from . import items
from .cases import CONSTRUCTION_METHODS, FAMILIES, LIBRARIES, MATH_TYPES
from .domains import DOMAIN_TYPES
from .items import PDE_RUN  # for the hook whose argument is named items

if TYPE_CHECKING:
    from .session import PdeRun

VERBOSE_WORDS = {
    "PASS": ("passed", ".", "PASS"),
    "F-Exec": ("failed", "F", "F-Exec"),
    "F-Acc": ("failed", "A", "F-Acc"),
    "F-Time": ("failed", "T", "F-Time"),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pdebench", "PDEAgent-Bench (pytest-pdebench)")
    group.addoption(
        "--pde-submissions",
        metavar="DIR",
        help="evaluate the hand-written solvers in DIR (DIR/<library>/<case_id|family|solver>.py); 'oracle' "
        "and 'textbook' name the bundled folders",
    )
    group.addoption(
        "--pde-library",
        action="append",
        metavar="NAME",
        help="library track(s): dolfinx, firedrake, dealii; repeat or comma-separate (default: the tracks "
        "--pde-submissions has solvers for; all three for a model or an agent)",
    )
    group.addoption(
        "--pde-cases",
        metavar="PATH",
        help="case file or directory (default: the bundled suite, or a cases/ folder here that holds records); "
        "'smoke' names the bundled 53-case smoke suite",
    )
    group.addoption(
        "--pde-runs", type=int, default=3, metavar="N", help="timed runs per item, averaged (default 3, as the paper)"
    )
    group.addoption(
        "--pde-timeout", type=float, metavar="SECONDS", help="per-run timeout, overrides the cases' timeout_sec"
    )
    group.addoption("--pde-alpha-acc", type=float, metavar="A", help="accuracy multiplier (default: case, 10)")
    group.addoption("--pde-alpha-time", type=float, metavar="A", help="runtime multiplier (default: case, 3)")
    group.addoption("--pde-tau-min", type=float, metavar="TAU", help="accuracy floor (default: case, 1e-6)")
    group.addoption(
        "--pde-tau-max",
        type=float,
        metavar="TAU",
        help="accuracy cap (default: case, 8e-3; not in the paper: use 1 to leave it out)",
    )
    group.addoption("--pde-memory-mb", type=int, default=8192, metavar="MB", help="address-space limit per run")
    group.addoption(
        "--pde-sandbox",
        choices=("bubblewrap", "docker", "none"),
        default="bubblewrap",
        help="isolation backend: 'docker' runs each solver in a container of the track's image "
        "(the engine at DOCKER_HOST); 'none' runs solvers unsandboxed (unsafe)",
    )
    group.addoption(
        "--pde-runner",
        choices=("warm", "cold"),
        default="warm",
        help="'warm' (default): with bubblewrap, import the track once per worker and fork each run "
        "from it; 'cold': a fresh interpreter per run (as the docker sandbox always does)",
    )
    group.addoption(
        "--pde-image",
        action="append",
        default=[],
        metavar="TRACK=IMAGE",
        help="with --pde-sandbox=docker: run TRACK in IMAGE instead of its recipe's image (repeatable)",
    )
    group.addoption(
        "--pde-cluster",
        metavar="ADDRESS",
        help="run the submissions on the workers of a Dask cluster "
        "(tcp://HOST:PORT or a scheduler file) instead of here; replaces -n",
    )
    group.addoption(
        "--pde-shard",
        metavar="K/N",
        help="run shard K of N of the selected items (a Slurm array or "
        "CI matrix; `pdebench merge` joins the N reports)",
    )
    group.addoption("--pde-output", metavar="DIR", help="audit directory per item (default: reports/runs/<source>)")
    group.addoption(
        "--pde-report",
        metavar="DIR",
        help="write the tables and figures of this run into DIR at the end "
        "(as `pdebench report` does from a stored run)",
    )
    group.addoption(
        "--pde-variants",
        type=int,
        metavar="SEED",
        help="run every item on its variant for SEED, a fresh case drawn from the record's design "
        "(records with a numerical reference have none: skipped); implies --pde-baseline=paired",
    )
    group.addoption(
        "--pde-baseline",
        choices=("stored", "paired", "local"),
        help="'stored' (default without --pde-variants): thresholds from calibrations/; 'paired': the oracle "
        "runs beside each submission on the same worker, its error and time set the thresholds; 'local': a "
        "baseline this machine timed (kept from an earlier paired item), else paired now and kept",
    )
    group.addoption(
        "--pde-oracle",
        metavar="DIR",
        help="the solvers paired baselines run (laid out as --pde-submissions; default: the bundled oracle)",
    )
    group.addoption(
        "--pde-sibling",
        action="store_true",
        help="also run each passing solver, unchanged, on a second variant no prompt showed (a report column)",
    )
    group.addoption("--pde-resume", action="store_true", help="reuse verdicts of items whose inputs did not change")
    group.addoption(
        "--pde-calibrate",
        action="store_true",
        help="measure baselines (default source: the oracle) and write calibrations/<library>/<machine>.json",
    )
    group.addoption("--pde-calibrations", metavar="DIR", help="calibration directory (default: calibrations/)")
    group.addoption(
        "--pde-validate",
        metavar="PATH",
        help="gate new cases: one test per record in PATH, static "
        "checks then a trial calibration run of the oracle (default source: the bundled oracle)",
    )
    group.addoption("--pde-validate-static", action="store_true", help="with --pde-validate: static checks only")
    llm = parser.getgroup("pdebench-llm", "PDEAgent-Bench: solvers generated by an LLM")
    llm.addoption(
        "--pde-model",
        metavar="NAME",
        help="generate each solver with this model (a registry name such as opus-4.7, or a model id at --pde-base-url)",
    )
    llm.addoption("--pde-base-url", metavar="URL", help="OpenAI-compatible endpoint (overrides the registry's)")
    llm.addoption(
        "--pde-api-key-env",
        metavar="VAR",
        help="environment variable with the API key (default: the registry's, else OPENAI_API_KEY)",
    )
    llm.addoption(
        "--pde-models", metavar="FILE", help="extra model registry (TOML, like pytest_pdebench/llm/models.toml)"
    )
    llm.addoption(
        "--pde-attempts",
        type=int,
        default=1,
        metavar="N",
        help="attempts per item, each after the previous one's feedback (default 1: single shot)",
    )
    llm.addoption(
        "--pde-prompt",
        choices=("single", "template"),
        default="single",
        help="'template': the prompt carries a runnable scaffold and leaves the numerics to the model",
    )
    llm.addoption("--pde-replay", action="store_true", help="no API calls: answers from the response cache only")
    llm.addoption("--pde-budget", type=float, metavar="USD", help="stop making new calls once this much is spent")
    llm.addoption("--pde-llm-cache", metavar="DIR", help="response cache (default: reports/llm-cache)")
    llm.addoption("--pde-llm-timeout", type=float, default=600.0, metavar="SECONDS", help="per request (default 600)")
    llm.addoption(
        "--pde-llm-retries",
        type=int,
        default=5,
        metavar="N",
        help="retries on 429/5xx/timeouts (default 5, exponential backoff)",
    )
    llm.addoption(
        "--pde-llm-backoff",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="first retry delay (doubles each time; a Retry-After header wins)",
    )
    llm.addoption("--pde-guides", metavar="DIR", help="library guides appended to prompts (default: guides/)")
    agent = parser.getgroup("pdebench-agent", "PDEAgent-Bench: solvers written by a code agent (with --pde-model)")
    agent.addoption(
        "--pde-agent",
        metavar="AGENT",
        help="'mini-swe-agent' (built in), or a command line run in the "
        "item's sandbox, with {workdir}, {prompt_file} and {model} filled in",
    )
    agent.addoption(
        "--pde-agent-timeout",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="the agent's wall-clock limit per attempt (default 1800)",
    )
    agent.addoption(
        "--pde-agent-steps",
        type=int,
        default=50,
        metavar="N",
        help="model calls per attempt (mini-swe-agent; default 50)",
    )
    agent.addoption(
        "--pde-agent-cost",
        type=float,
        metavar="USD",
        help="cost limit per item: the model endpoint refuses further calls beyond it",
    )
    agent.addoption(
        "--pde-agent-action-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="one shell command of mini-swe-agent (default 300)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for name in (*FAMILIES, *MATH_TYPES, *LIBRARIES, *DOMAIN_TYPES, *CONSTRUCTION_METHODS):
        config.addinivalue_line("markers", f"{name}: PDEAgent-Bench cases tagged {name}")
    from .options import run_from_config
    from .placement import PdeBenchWarning
    from .session import pin_worker, terminate_as_interrupt

    run = run_from_config(config)
    if run is None:
        return
    pin_worker(config)
    terminate_as_interrupt()
    config.stash[items.PDE_RUN] = run
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


def _sandbox_problem(run) -> str | None:
    from .sandbox import get_backend

    backend = get_backend(run.settings.sandbox)
    problem = backend.available()
    if problem is None and hasattr(backend, "sweep") and not hasattr(run.config, "workerinput"):
        _sweep(backend)  # containers of runs that died (killed, power cut) go first
    return problem


def _sweep(backend) -> None:
    """Housekeeping, never the run's end: an engine that cannot list its containers is
    reported and the run goes on (each run removes its own container)."""
    import warnings

    from .placement import PdeBenchWarning

    try:
        backend.sweep()
    except Exception as exc:
        warnings.warn(PdeBenchWarning(f"could not remove the containers of earlier runs: {exc}"), stacklevel=2)


def pytest_collect_file(file_path, parent):
    return items.collect_jsonl(file_path, parent)


def pytest_report_header(config: pytest.Config):
    run = cast("PdeRun | None", config.stash.get(items.PDE_RUN, None))  # what pytest_configure put there
    if run:
        meta = run.session_metadata()
        tracks = ", ".join(meta["libraries"])
        if not run.libraries_chosen:
            tracks += f" (the tracks {meta['source']} has solvers for; --pde-library chooses)"
        return [
            f"pdebench: {meta['mode']} of {meta['source']} on {tracks}; "
            f"machine {meta['machine']}; sandbox {meta['sandbox']}; artifacts in {meta['output']}",
            f"pdebench: cases {meta['cases']} ({run.case_count} records)",
            *(f"pdebench WARNING: {line}" for line in run.timing.mismatches(run.present_libraries())),
        ]


def pytest_report_teststatus(report, config):
    verdict = items.verdict_of(report)
    if verdict and report.when == "call" and not verdict.get("calibration_problem"):
        return VERBOSE_WORDS[verdict["outcome"]]


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item, call):
    if call.when == "call":
        verdict = items.verdict_of(item)
        if verdict:
            return {"pde": verdict}
        case = items.described(item)  # for the stand-in's family
        return {items.ITEM_KEY: case} if case else None


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

    def pytest_runtest_logreport(self, report):
        if self.run.validate and report.when == "call":
            self.validated[report.outcome] += 1
            self.trials.update(value["library"] for key, value in report.user_properties if key == "pde_trial")
        verdict = items.verdict_of(report)
        if verdict and report.when == "call":
            self.verdicts.append(verdict)
            self.counted.add(report.nodeid)
        elif report.nodeid not in self.counted and (skipped := items.not_run(report)):
            self.not_run.append(skipped)
            self.counted.add(report.nodeid)
        elif report.failed and report.nodeid not in self.counted:
            case = items.described(report)
            stand_in = items.no_verdict(report.nodeid, self.run.source.label, _crash_line(report), case)
            if stand_in:
                self.verdicts.append(stand_in)
                self.counted.add(report.nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report):
        json_report["pde"] = {**self.run.session_metadata(), "not_run": self.not_run}

    def pytest_sessionfinish(self, session):
        if self.run.mode == "calibration":
            self.calibrations = self.run.write_calibration(self.verdicts)
        if self.not_run and session.exitstatus == pytest.ExitCode.OK:
            # items were selected and not judged (a runtime, a solver, a baseline missing): a CI
            # job must not go green on them; the summary says which and why
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.run.settings.sandbox == "docker":
            from .sandbox import get_backend

            _sweep(get_backend("docker"))  # an interrupted xdist worker cannot remove its own container

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        from .report import failed_folders, llm_usage, not_run_summary, t_base_origins, tables_by_library

        if self.run.validate:
            from .validation import checks_ran

            terminalreporter.section("PDEAgent-Bench validation")
            for line in checks_ran(self.validated, self.trials, self.run.static_only):
                terminalreporter.write_line(line)
        if not self.verdicts and not self.not_run:
            return
        terminalreporter.section("PDEAgent-Bench outcomes")
        for library, table in tables_by_library(self.verdicts, not_run=self.not_run):
            terminalreporter.write_line(f"{library}:")
            terminalreporter.write_line(table)
        for line in not_run_summary(self.not_run) + failed_folders(self.verdicts, config.option.verbose > 0):
            terminalreporter.write_line(line)
        for line in filter(None, [llm_usage(self.verdicts), t_base_origins(self.verdicts)]):
            terminalreporter.write_line(line)
        for library, path in self.calibrations.items():
            terminalreporter.write_line(f"calibration for {library} written to {path}")
        if config.getoption("pde_report"):
            from .analysis.render import report_of_session

            terminalreporter.write_line(
                report_of_session(self.verdicts, self.run.session_metadata(), Path(config.getoption("pde_report")))
            )
        terminalreporter.write_line(f"artifacts: {self.run.settings.output_dir}")


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(session, config, items):
    run = config.stash.get(PDE_RUN, None)
    if run is not None and run.shard is not None:
        from .shards import keep

        mine, others, run.shard_info = keep(items, run.shard, run.settings.runs)
        if others:
            config.hook.pytest_deselected(items=others)
        items[:] = mine


def pytest_collection_finish(session):
    run = session.config.stash.get(items.PDE_RUN, None)
    if run is not None and run.cluster is not None:
        run.prefetch(session.items)
        session.config.get_terminal_writer().line(
            f"pdebench: runs on {len(run.cluster.workers)} workers at {run.cluster.address} "
            f"({', '.join(f'{n} {m}' for m, n in run.cluster.machines().items())}), "
            f"up to {run.cluster.ahead} sent ahead"
        )


def pytest_unconfigure(config):
    run = config.stash.get(items.PDE_RUN, None)
    if run is not None:
        run.close()  # a cluster: what is queued is cancelled and what runs is killed


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    run = session.config.stash.get(items.PDE_RUN, None)
    if run is not None and not hasattr(session.config, "workerinput"):
        session.config.pluginmanager.register(_Recorder(run), "pdebench-recorder")
