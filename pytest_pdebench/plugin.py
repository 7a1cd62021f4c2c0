"""pytest-pdebench: PDEAgent-Bench cases as pytest items. The options, and the switch that
turns the benchmark on (docs/design.md).

pytest imports this module in every run of an environment where the plugin is installed, so
it imports nothing of its own but the names of the markers: the benchmark's hooks
(``hooks.py``: collection, verdicts, tables) and everything they use are imported and
registered only once a ``--pde-*`` option asks for benchmark items."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .shared_options import add_shared
from .vocabulary import MARKERS

if TYPE_CHECKING:  # pytest itself is loaded by whoever loads this module: no import of it here
    import pytest

# the options that ask for benchmark items (options.run_from_config decides the rest)
SOURCE_OPTIONS = ("pde_submissions", "pde_model", "pde_agent", "pde_calibrate", "pde_validate")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pdebench", "PDEAgent-Bench (pytest-pdebench)")
    group.addoption(
        "--pde-submissions",
        metavar="DIR",
        help="evaluate the hand-written solvers in DIR (DIR/<library>/<case_id|family|solver>.py); 'oracle' "
        "and 'textbook' name the bundled folders",
    )
    add_shared(group.addoption, "pde-", "library", action="append", more="repeat or comma-separate",
               said="the tracks --pde-submissions has solvers for; all three for a model or an agent")  # fmt: skip
    add_shared(group.addoption, "pde-", "cases", more="'smoke' names the bundled 53-case smoke suite",
               said="the bundled suite, or a cases/ folder here that holds records")  # fmt: skip
    add_shared(group.addoption, "pde-", "runs", default=3, said="3, as the paper")
    group.addoption(
        "--pde-timeout",
        type=float,
        metavar="SECONDS",
        help="per-run timeout of the submission's runs, overrides the cases' timeout_sec "
        "(the oracle's baseline runs keep the case's)",
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
        default="bubblewrap",
        metavar="NAME",
        help="isolation backend: bubblewrap; 'docker' runs each solver in a container of the track's image "
        "(the engine at DOCKER_HOST); 'none' runs solvers unsandboxed (unsafe); or one a plugin adds",
    )
    group.addoption(
        "--pde-runner",
        choices=("warm", "cold"),
        default="warm",
        help="'warm' (default): with bubblewrap, import the track once per worker and fork each run "
        "from it; 'cold': a fresh interpreter per run (as the docker sandbox always does)",
    )
    group.addoption(
        "--pde-pictures",
        choices=("failed", "all", "none"),
        default="failed",
        help="fields.png in an item's audit folder (solution, reference, pointwise error, the boundary "
        "pieces named): for the items that did not pass (default), every item, or none",
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
        "--pde-sample",
        type=int,
        metavar="N",
        help="run up to N items of each track's family and construction method (the same in every "
        "session): a first look at the whole benchmark in minutes",
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
        help="'local' (the default): baselines this machine timed, kept between sessions; items that have "
        "none are timed first, the oracle alone, before any submission runs; 'stored' (the default with "
        "--pde-cluster): thresholds from calibrations/; 'paired' (with --pde-variants): the oracle runs "
        "beside each submission on the same worker, its error and time set the thresholds",
    )
    add_shared(group.addoption, "pde-", "oracle", more="the solvers paired baselines run", said="the bundled oracle")
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
    add_shared(group.addoption, "pde-", "calibrations", said="calibrations/")
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
        "--pde-agent-dir",
        action="append",
        metavar="DIR",
        help="a command agent's own folder (its program, its virtual environment): visible read-only "
        "at its own path in the sandbox, where nothing else of the host is (repeatable)",
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


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs  # the extension points another plugin implements

    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    for name in MARKERS:
        config.addinivalue_line("markers", f"{name}: PDEAgent-Bench cases tagged {name}")
    source_hook = config.pluginmanager.hook.pytest_pdebench_source.get_hookimpls()
    if not source_hook and not any(getattr(config.option, name, None) not in (None, False) for name in SOURCE_OPTIONS):
        return  # another project's test run: it pays for the options and the markers only
    from .hooks import start_benchmark

    start_benchmark(config)
