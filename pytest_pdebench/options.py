"""The ``--pde-*`` options, read and checked once: what a pytest run of the benchmark is
(source, tracks, cases, settings, calibrations, cluster, shard), or None when no source
option asks for benchmark items. A wrong option is a ``pytest.UsageError`` that says which
and why.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from .bundled import bundled, case_source, count_records, named_cases
from .calibration import CalibrationStore
from .cases import LIBRARIES
from .placement import SIBLING_SEED
from .session import PdeRun, terminate_as_interrupt
from .settings import Settings, gate_options
from .shards import Shard, ShardError
from .sources.folder import DirectorySource
from .thresholds import Alphas
from .visibility import never_show


def run_from_config(config: pytest.Config) -> PdeRun | None:
    """None unless a source option asks for benchmark items."""
    opt = config.option
    validate = opt.pde_validate is not None
    submissions = _bundled_folder(opt.pde_submissions, config.rootpath)
    added = config.hook.pytest_pdebench_source(config=config)  # a plugin's source (hookspecs.py)
    if added is not None and (submissions or opt.pde_model or opt.pde_calibrate or validate):
        raise pytest.UsageError(
            f"a plugin's source ({added.label}) gives this run's solvers: it does not go with --pde-submissions, "
            "--pde-model, --pde-calibrate or --pde-validate"
        )
    if opt.pde_agent and not opt.pde_model:
        raise pytest.UsageError("--pde-agent needs --pde-model: the model the agent works with")
    if opt.pde_model and (submissions or opt.pde_calibrate or validate):
        raise pytest.UsageError(
            "--pde-model generates the solvers: it does not go with --pde-submissions, "
            "--pde-calibrate or --pde-validate"
        )
    if submissions is None and (opt.pde_calibrate or validate):
        submissions = str(bundled(DEFAULT_ORACLE, config.rootpath))
    if submissions is None and not opt.pde_model and added is None:
        return None
    rootdir = config.rootpath
    cases = named_cases(opt.pde_cases) if opt.pde_cases else None  # --pde-cases=smoke: the smoke suite
    cases_path = Path(opt.pde_validate or cases or case_source(rootdir))
    if not cases_path.exists():
        raise pytest.UsageError(f"--pde-cases: no file or directory at {cases_path}")
    case_count = count_records(cases_path)
    if not case_count:
        raise pytest.UsageError(
            f"{cases_path}: no case records in it (no non-blank line in a *.jsonl file); pass --pde-cases with "
            f"a file or folder of records, or leave it out for the bundled suite ({bundled('cases')})"
        )
    if opt.pde_runs < 1:
        raise pytest.UsageError("--pde-runs must be at least 1")
    if opt.pde_sample is not None and opt.pde_sample < 1:
        raise pytest.UsageError(
            f"--pde-sample: at least 1 item per family and construction method, not {opt.pde_sample}"
        )
    baseline, default_baseline = _baseline(opt, validate)
    alphas = Alphas(opt.pde_alpha_acc, opt.pde_alpha_time, opt.pde_tau_min, opt.pde_tau_max)
    settings = Settings(
        output_dir=Path("."),
        runs=opt.pde_runs,
        timeout_sec=opt.pde_timeout,
        memory_mb=opt.pde_memory_mb,
        sandbox=opt.pde_sandbox,
        calibrate=opt.pde_calibrate or validate,
        resume=opt.pde_resume,
        alphas=alphas,
        images=_image_overrides(opt.pde_image),
        runner=opt.pde_runner,
        pictures=opt.pde_pictures,
        baseline=baseline,
        oracle_dir=_oracle_dir(opt, rootdir),
        variant_seed=opt.pde_variants,
        sibling=opt.pde_sibling,
        gate_options=gate_options(alphas, baseline, default_baseline),
    )  # the output folder below, once the source has named the run
    if added is not None:
        source, label = added, re.sub(r"[^A-Za-z0-9_.-]+", "-", added.label)
    elif opt.pde_model:
        from .sources.model import model_source_from_options  # the model client's modules: only for a model's run

        source = model_source_from_options(opt, rootdir, not hasattr(config, "workerinput"), settings)
        label = source.run_label
    else:
        assert submissions is not None  # no model: a folder was given or defaulted (returned above if not)
        try:
            source = DirectorySource(Path(submissions))
        except FileNotFoundError as exc:
            raise pytest.UsageError(str(exc)) from None
        label = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(submissions).resolve().name)
    mode = "validation" if validate else "calibration" if opt.pde_calibrate else "runs"
    if opt.pde_variants is not None:  # another case set, another audit folder: resume keeps them apart
        label += f"-variants-{opt.pde_variants}"
    elif baseline == "paired":
        label += "-paired"
    # a validation's run folders go under the folder it was started from, never beside the case file
    home = config.invocation_params.dir if validate else rootdir
    output = Path(opt.pde_output) if opt.pde_output else home / "reports" / mode / label
    settings = dataclasses.replace(settings, output_dir=output.resolve())
    calibrations = Path(opt.pde_calibrations) if opt.pde_calibrations else bundled("calibrations", rootdir)
    libraries = _libraries(opt.pde_library)
    if not opt.pde_library and isinstance(source, DirectorySource):  # what the folder has solvers for
        libraries = source.tracks(libraries)
        if not libraries:
            raise pytest.UsageError(
                f"--pde-submissions: no solver files in {submissions} (expected <library>/<case_id>.py, "
                "<library>/<family>.py or <library>/solver.py; .cpp for dealii: see the solver contract)"
            )
    # what the session reads and writes is never shown to a run or an agent (visibility.py)
    never_show(
        cases_path if cases_path.is_dir() else cases_path.parent,
        calibrations,
        settings.oracle_dir,
        settings.output_dir,
        getattr(getattr(source, "cache", None), "directory", None),  # a model's answers
    )
    cluster = _cluster(config, libraries, settings) if opt.pde_cluster and not validate else None
    if cluster is not None:
        settings = dataclasses.replace(settings, remote_runtimes=cluster.runtimes(libraries))
    return PdeRun(
        config,
        cases_path.resolve(),
        libraries,
        source,
        settings,
        CalibrationStore(calibrations, runtime_tag=settings.runtime_tag),
        validate=validate,
        static_only=opt.pde_validate_static,
        cluster=cluster,
        shard=_shard(opt.pde_shard),
        libraries_chosen=bool(opt.pde_library) or not isinstance(source, DirectorySource),
        case_count=case_count,
    )


DEFAULT_ORACLE = "submissions/oracle"
BUNDLED_SOLVERS = ("oracle", "textbook")  # --pde-submissions=oracle names the bundled folder


def _bundled_folder(value: str | None, rootdir: Path) -> str | None:
    """--pde-submissions as given, or, for a bundled folder's name that is no folder here,
    that folder (``oracle``: the strong oracle, ``textbook``: the plain solvers)."""
    if value in BUNDLED_SOLVERS and not Path(value).is_dir():
        return str(bundled(f"submissions/{value}", rootdir))
    return value


def _libraries(values: list[str] | None) -> tuple[str, ...]:
    if not values:
        return LIBRARIES
    chosen: list[str] = []
    for value in values:
        for name in filter(None, (v.strip().lower() for v in value.split(","))):
            if name not in LIBRARIES:
                raise pytest.UsageError(f"--pde-library: unknown library {name!r}; choose from {', '.join(LIBRARIES)}")
            if name not in chosen:
                chosen.append(name)
    return tuple(chosen)


def _image_overrides(values: list[str]) -> tuple[tuple[str, str], ...]:
    chosen = {}
    for value in values:
        track, sep, image = value.partition("=")
        track = track.strip().lower()
        if not sep or not image.strip() or track not in LIBRARIES:
            raise pytest.UsageError(
                f"--pde-image {value!r}: expected TRACK=IMAGE with TRACK one of "
                f"{', '.join(LIBRARIES)} (e.g. dolfinx=dolfinx/dolfinx:v0.11.0)"
            )
        chosen[track] = image.strip()
    return tuple(sorted(chosen.items()))


def _baseline(opt, validate: bool) -> tuple[str, str]:
    """--pde-baseline, checked against the options it goes with (paired under --pde-variants),
    and what it would be without the option."""
    if opt.pde_variants is not None and not 0 <= opt.pde_variants < SIBLING_SEED:
        raise pytest.UsageError(f"--pde-variants: the seed must be in 0..{SIBLING_SEED - 1}, not {opt.pde_variants}")
    live = opt.pde_variants is not None or opt.pde_sibling
    if live and (opt.pde_calibrate or validate):
        raise pytest.UsageError(
            "--pde-variants and --pde-sibling evaluate a submission on fresh cases: they do not go with "
            "--pde-calibrate or --pde-validate (`pdebench variants` writes variants to validate)"
        )
    default = "stored" if opt.pde_calibrate or validate or getattr(opt, "pde_cluster", None) else "local"
    default = "paired" if opt.pde_variants is not None else default
    baseline = opt.pde_baseline or default
    if baseline == "stored" and opt.pde_variants is not None:
        raise pytest.UsageError("--pde-variants: a variant has no stored calibration; its baseline is paired")
    if baseline in ("paired", "local") and (opt.pde_calibrate or validate):
        raise pytest.UsageError(f"--pde-baseline={baseline} times the oracle beside a submission: not for calibration")
    if baseline == "local" and getattr(opt, "pde_cluster", None):
        raise pytest.UsageError(
            "--pde-baseline=local keeps this machine's baselines; on a cluster use 'stored' (each worker class's "
            "calibration) or 'paired'"
        )
    return baseline, default


def _oracle_dir(opt, rootdir: Path) -> Path:
    folder = Path(opt.pde_oracle) if opt.pde_oracle else bundled(DEFAULT_ORACLE, rootdir)
    if not folder.is_dir():
        raise pytest.UsageError(f"--pde-oracle: no directory at {folder}")
    return folder.resolve()


def _shard(value: str | None):
    try:
        return Shard.parse(value) if value else None
    except ShardError as exc:
        raise pytest.UsageError(str(exc)) from None


def _cluster(config: pytest.Config, libraries: tuple[str, ...], settings: Settings):
    """The Dask cluster of --pde-cluster (controller only: it replaces pytest-xdist)."""
    from .cluster.controller import Cluster, ClusterError

    if hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None):
        raise pytest.UsageError(
            "--pde-cluster spreads the items over the cluster's workers: leave out -n "
            "(xdist workers would each be a controller of their own)"
        )
    terminate_as_interrupt()  # before the cluster, which notes SIGTERM as it does SIGINT
    try:
        cluster = Cluster(config.option.pde_cluster, list(libraries), settings.sandbox, dict(settings.images))
    except ClusterError as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        cluster.runtimes(libraries)  # workers that disagree stop the run here
    except ClusterError as exc:
        cluster.close()
        raise pytest.UsageError(str(exc)) from None
    return cluster
