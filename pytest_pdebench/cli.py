"""The ``pdebench`` command: build cases, write the schema, calibrate, show tables.

``pdebench --help`` lists every subcommand (the list is made from the parser itself);
``pdebench COMMAND --help`` gives one's options. An input that is missing or cannot be
read ends the command with one line naming it and what to pass instead (exit code 2).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import textwrap
from collections import Counter
from pathlib import Path

# each command imports what it runs: `pdebench --help` and a quick command stay quick
from .bundled import UPSTREAM_FILE, bundled, case_source
from .vocabulary import FAMILIES

say = functools.partial(print, flush=True)  # progress of long commands, seen as it happens in a log

# what an input argument should name, said when it does not
CASES_OPTION = "a case file (JSONL) or a folder of them with --cases"
CASES_ARGUMENT = "the path of a case file (JSONL) or of a folder of them"
CASE_FILE = "the path of one case file (JSONL), not a folder (the builds rewrite it: cases/suite.jsonl)"
JSON_REPORT = "the JSON report of a benchmark run (pytest --json-report --json-report-file=FILE writes it)"
ORACLE = "the oracle's solver folder with --oracle"
GUIDES = "the folder of library guides with --guides (guides/ in a checkout)"


class InputError(Exception):
    """An input the command cannot use; the message names it and says what to pass."""


def _check_input(path: Path, what: str) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file or folder; pass {what}")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: not readable (permissions); pass {what}")
    if what == CASE_FILE and path.is_dir():
        raise InputError(f"{path}: a folder; pass {what}")


def _check_inputs(args: argparse.Namespace) -> None:
    """Every input the subcommand declared (``inputs``: argument -> what it names) exists
    and can be read, before the command starts any work."""
    for dest, what in args.inputs.items():
        if getattr(args, dest) is not None:  # None: an optional input left out (its default is found later)
            _check_input(Path(getattr(args, dest)), what)


def _cases(args) -> int:
    """``pdebench cases``: the records of the suite a run here takes (or --cases), filtered."""
    import fnmatch

    from tabulate import tabulate

    from .cases import case_files, iter_case_file

    source = Path(args.cases) if args.cases else case_source(Path.cwd())
    rows, total = [], 0
    for file in case_files(source):
        for _, record in iter_case_file(file):
            total += 1
            spec = record.case_spec
            if (
                (args.family and record.family not in args.family)
                or (args.domain and record.domain_type not in args.domain)
                or (args.library and not set(args.library) & set(record.supported_libraries))
                or (args.match and not fnmatch.fnmatch(record.id, args.match))
            ):
                continue
            rows.append(
                [
                    record.id,
                    record.family,
                    record.domain_type,
                    " ".join(record.supported_libraries),
                    "manufactured" if record.evaluation_metadata.manufactured_solution else "numerical reference",
                    ("transient" if spec.pde.time else "steady") + (", 3-D" if spec.eval_grid.nz else ""),
                ]
            )
    if rows:
        headers = ["id", "family", "domain", "libraries", "answer", "kind"]
        print(tabulate(rows, headers=headers, tablefmt=args.format))
    print(f"{len(rows)} of {total} records in {source}")
    return 0 if rows else 1


def _provision(args) -> int:
    """``pdebench provision LIBRARY``: Firedrake's runtime built by the recipe the package
    ships (its steps print as they go; resumable), deal.II's Debian packages named."""
    import subprocess
    import time

    if args.library == "dealii":
        from .libraries.dealii import DealiiTrack

        print(DealiiTrack.install_hint)
        return 0
    from .libraries.firedrake import PROVISION_SCRIPT

    command = ["bash", str(PROVISION_SCRIPT), *(["--print"] if args.print else [])]
    if args.dry_run:
        print(" ".join(command))
        return 0
    started = time.monotonic()
    code = subprocess.run(command).returncode
    if not args.print:
        minutes = (time.monotonic() - started) / 60
        print(f"pdebench provision firedrake: {'done' if code == 0 else 'failed'} in {minutes:.1f} min")
    return code


def _schema(args) -> int:
    from .cases import schema_text

    # --check looks at the schema of the cases a run here would take (a project without a
    # suite of its own: the bundled one); writing, at this folder's cases/
    path = Path(args.path or (case_source(Path.cwd()) if args.check else Path("cases")) / "schema.json")
    if args.check:
        if not path.is_file() or path.read_text() != schema_text():
            print(f"{path} is out of date: run `pdebench schema`", file=sys.stderr)
            return 1
        print(f"{path} matches the models")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schema_text())
    print(f"wrote {path}")
    return 0


def _build_starter(args) -> int:
    from .authoring.calibration_configs import attach, read_distribution
    from .authoring.starter import starter_records
    from .cases import rewrite_case_file

    path = Path(args.output)
    pools = read_distribution(Path(args.upstream))  # before the build (half a minute): a missing file stops here
    records = attach(starter_records(), pools)
    rewrite_case_file(path, records)
    print(f"wrote {len(records)} cases to {path}")
    return 0


def _calibrate(args) -> int:
    import pytest

    from .calibration import materialize_case_files

    command = [
        "-p",
        "no:cacheprovider",
        "--pde-calibrate",
        f"--pde-library={args.library}",
        f"--pde-cases={args.cases}",
        f"--pde-submissions={args.oracle}",
        f"--pde-runs={args.runs}",
        f"--pde-calibrations={args.calibrations}",
        "-q",
        "-rfE",
    ] + args.pytest_args
    if args.cluster:  # every machine class of the cluster's workers, each on its own workers
        command.append(f"--pde-cluster={args.cluster}")
    code = pytest.main(command)
    if args.update_cases:
        materialize_case_files(Path(args.cases), args.library, Path(args.calibrations))
    return int(code)


def _materialize(args) -> int:
    from .calibration import materialize_case_files

    materialize_case_files(Path(args.cases), args.library, Path(args.calibrations), machine=args.machine)
    return 0


def _report(args) -> int:
    from .analysis.render import write_report
    from .analysis.runs import ReportError, load_run, parse_run_argument

    try:
        runs = [load_run(path, name) for name, path in map(parse_run_argument, args.runs)]
    except ReportError as exc:
        print(f"pdebench report: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    summary = write_report(runs, out, with_figures=not args.no_figures)
    items = sum(len(run.rows) for run in runs)
    for run in runs:
        if run.cut_short:
            print(f"pdebench report: WARNING: {run.cut_short}", file=sys.stderr)
    print(
        f"report over {len(runs)} run(s), {items} items: {out / 'report.md'}, {out / 'report.html'} "
        f"({len(summary['tables'])} tables, {len(summary['figures'])} figures)"
    )
    return 0


def _merge(args) -> int:
    from .shards import ShardError, merge_reports

    try:
        merged = merge_reports([Path(path) for path in args.shards])
    except ShardError as exc:
        print(f"pdebench merge: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(merged, indent=1))
    counts = ", ".join(
        f"{merged['summary'][k]} {k}" for k in sorted(merged["summary"]) if k not in ("total", "collected")
    )
    print(f"merged {len(args.shards)} shards, {merged['summary']['total']} items ({counts}) into {out}")
    return 0


def _table(args) -> int:
    from .analysis.runs import json_report_verdicts
    from .report import stage_rates, tables_by_library

    path = Path(args.report)
    verdicts = json_report_verdicts(_json_report(path))
    if not verdicts:
        raise InputError(f"{path}: no PDEAgent-Bench verdicts in it; pass {JSON_REPORT}")
    libraries: dict[str, list[dict]] = {}
    for verdict in verdicts:
        libraries.setdefault(verdict["library"], []).append(verdict)
    if args.json:  # for scripts: the gates' pass rates per library, and nothing else on stdout
        print(json.dumps({library: stage_rates(part) for library, part in sorted(libraries.items())}, indent=1))
        return 0
    for library, table in tables_by_library(verdicts, args.format):
        print(f"{library}:\n{table}\n\n{_gates_line(libraries[library])}\n")
    return 0


def _json_report(path: Path) -> dict:
    """The pytest JSON report at ``path``; InputError when it is not one."""
    try:
        document = json.loads(path.read_text())
    except OSError as exc:  # a folder, a file gone since
        raise InputError(f"{path}: cannot read it ({exc.strerror}); pass {JSON_REPORT}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not text; pass {JSON_REPORT}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc.msg}, line {exc.lineno}); pass {JSON_REPORT}") from None
    if not isinstance(document, dict) or "tests" not in document:
        raise InputError(f"{path}: JSON, but not a pytest JSON report (no 'tests'); pass {JSON_REPORT}")
    return document


def _gates_line(verdicts: list[dict]) -> str:
    """How many items passed each gate, of those that reached it (the table's counts, staged)."""
    counts = Counter(v["outcome"] for v in verdicts)
    executed = len(verdicts) - counts["F-Exec"]
    accurate = executed - counts["F-Acc"]
    steps = (
        ("executed", executed, len(verdicts), "items"),
        ("accurate", accurate, executed, "executed"),
        ("fast", counts["PASS"], accurate, "accurate"),
    )
    return "gates passed: " + "; ".join(
        f"{gate} {part} of {whole} {of}" + (f" ({100 * part / whole:.1f}%)" if whole else "")
        for gate, part, whole, of in steps
    )


def _import_upstream(args) -> int:
    from .authoring.upstream import import_to

    source = Path(args.source)
    if not source.is_file():
        raise InputError(f"{source}: no such file; pass the upstream case file (benchmark_v2.jsonl of PDEAgent-Bench)")

    def progress(line, case_id):
        if line % 25 == 0:
            print(f"line {line}: {case_id}", file=sys.stderr, flush=True)

    print(import_to(source, Path(args.output), progress))
    return 0


def _build_references(args) -> int:
    from .authoring.references import build_references

    kept, tried = build_references(Path(args.cases), Path(args.oracle), args.family, args.rebuild, log=say)
    print(f"kept {kept} of {tried}; discarded: {tried - kept}")
    return 0 if kept == tried else 1


def _build_solve_only(args) -> int:
    from .authoring.solve_only import assemble, build_parts, discard_without_part

    out = Path(args.out)
    if not args.assemble:
        index, count = (int(n) for n in args.shard.split("/"))
        kept, tried = build_parts(
            Path(args.cases),
            out,
            Path(args.oracle),
            args.family,
            (index - 1, count),
            log=say,
            retry=args.retry,
            again=_under_margin(args.again) if args.again else frozenset(),
        )
        print(f"kept {kept} of {tried}")
    if args.discard:
        discard_without_part(Path(args.cases), out, log=say)
    replaced, missing = assemble(Path(args.cases), out, log=say)
    for line in missing:
        print(f"  without a part: {line}")
    return 0 if not missing else 1


def _under_margin(audit: str) -> set[str]:
    """The records an attack-audit file (``--out``) found under ATTACK_MARGIN."""
    from .authoring.attack import ATTACK_MARGIN, read_attacks

    rows = read_attacks(Path(audit))
    if not rows:
        raise SystemExit(f"{audit}: no attack-audit rows there (pdebench attack-audit --out FILE writes them)")
    return {case_id for case_id, row in rows.items() if row["margin"] is not None and row["margin"] < ATTACK_MARGIN}


def _build_suite(args) -> int:
    from .authoring.calibration_configs import attach, read_distribution
    from .authoring.suite import suite_records
    from .cases import rewrite_case_file

    def progress(index, total, case_id):
        if index % 25 == 0 or index == total:
            say(f"[{index}/{total}] {case_id}")

    path = Path(args.output)
    pools = read_distribution(Path(args.upstream))  # before the long build: a missing file stops here
    records = attach(suite_records(progress=progress), pools)
    rewrite_case_file(path, records)
    print(f"wrote {len(records)} cases to {path}")
    return 0


def _calibration_configs(args) -> int:
    from .authoring.calibration_configs import update_case_files

    update_case_files(
        Path(args.cases),
        Path(args.upstream),
        Path(args.calibrations),
        refine=args.refine,
        coarsen=args.coarsen,
        own=args.own,
        families=args.family,
    )
    return 0


def _seed(text: str) -> int:
    """A variant's seed: a whole number, 0 or more (numpy's generators take no other)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: a seed is 0 or more")
    return value


def _variants(args) -> int:
    import fnmatch

    from .authoring.variants import write_variants

    families = set(args.family or [])
    output = Path(args.output or f"reports/variants/seed-{args.seed}.jsonl")

    def selected(record) -> bool:
        return (not families or record.family in families) and (
            not args.match or fnmatch.fnmatch(record.id, args.match)
        )

    return write_variants(Path(args.cases), args.seed, output, selected)


def _leak_audit(args) -> int:
    from .leaks import leak_audit

    print(leak_audit(Path(args.cases), args.library, args.format))
    return 0


def _attack_audit(args) -> int:
    from .authoring.attack import ATTACK_MARGIN, attack_audit, attacker_path

    solver = Path(args.solver) if args.solver else attacker_path()
    if not solver.is_file():
        raise InputError(f"{solver}: no attacker solver there (pass --solver FILE)")
    return attack_audit(
        Path(args.cases),
        solver,
        ATTACK_MARGIN if args.margin is None else args.margin,
        Path(args.out) if args.out else None,
        args.family,
    )


def _reference_agreement(args) -> int:
    import pytest

    from .authoring.references import store_reference_agreement

    output, code = Path(args.output), 0
    if not args.no_run:  # the strong oracle's run; its verdicts under --output are what is kept
        marker = [] if args.all_records else ["-m", "reference_numerical"]
        code = pytest.main(
            [
                "-p",
                "no:cacheprovider",
                *marker,
                f"--pde-library={args.library}",
                f"--pde-cases={args.cases}",
                f"--pde-submissions={args.oracle}",
                "--pde-runs=1",
                f"--pde-output={output}",
                "--pde-resume",
                "-q",
                "-rfE",
                *args.pytest_args,
            ]
        )
    path, count = store_reference_agreement(
        Path(args.cases), args.library, output, Path(args.calibrations), args.all_records
    )
    print(
        f"{path}: the strong oracle's error (and time) on {count} records "
        f"(pdebench calibration-summary compares them with tau_acc and tau_time)"
    )
    return int(code)


def _calibration_summary(args) -> int:
    from .analysis.calibration_summary import calibration_summary

    summary = calibration_summary(Path(args.cases), args.library, Path(args.calibrations), args.format)
    if summary is None:
        print(f"no calibrated cases for {args.library} in {args.cases}", file=sys.stderr)
        return 1
    print(summary)
    return 0


def _prompt(args) -> int:
    from .cases import agent_view, load_cases
    from .prompts import single_shot_prompt
    from .scaffolds import scaffold_for

    record = next((r for _, _, r in load_cases(Path(args.cases)) if r.id == args.case_id), None)
    if record is None:
        print(f"no case {args.case_id!r} in {args.cases}", file=sys.stderr)
        return 2
    view = agent_view(record, args.library)
    scaffold = scaffold_for(view) if args.template else None
    sys.stdout.write(single_shot_prompt(view, record.evaluation_config.timeout_sec, Path(args.guides), scaffold))
    return 0


def _prompt_cost(args) -> int:
    from .cases import load_cases
    from .llm.tokens import run_cost
    from .prompts import item_prompts

    records = [record for _, _, record in load_cases(Path(args.cases))]
    print(run_cost(item_prompts(records, Path(args.guides), args.library)))
    return 0


def _containers(args) -> int:
    from .containers import DEFAULT_BUILDS, ContainerError, build, images_listing, prune, serve_podman

    try:
        if args.action == "build":
            for track in args.tracks or DEFAULT_BUILDS:
                print(build(track, base_from_registry=args.base_from_registry))
        elif args.action == "engine":
            return serve_podman(Path(args.folder), log=say)
        elif args.action == "list":
            print(images_listing())
        else:
            print("\n".join(f"removed {tag}" for tag in prune()) or "nothing to remove")
    except ContainerError as exc:
        print(f"pdebench containers: {exc}", file=sys.stderr)
        return 1
    return 0


def _command(commands, name: str, what: str, func, **inputs: str) -> argparse.ArgumentParser:
    """A subcommand: ``what`` is its line in ``pdebench --help`` and the head of its own
    help; ``inputs`` maps its arguments that name files or folders to read (by dest) to
    what they should name, checked before ``func`` runs."""
    command = commands.add_parser(name, description=what)
    command.set_defaults(func=func, inputs=inputs)
    return command


def _usage_word(action: argparse.Action) -> str:
    """How an argument is written in the synopsis (its metavar, choices or name)."""
    if action.metavar:
        word = str(action.metavar)
    elif action.choices:
        word = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        word = action.dest.upper()
    if action.option_strings:
        return f"{action.option_strings[0]} {word}"
    forms = {"?": f"[{word}]", "*": f"[{word} ...]", "+": f"{word} [{word} ...]"}
    return forms.get(str(action.nargs), word)


# what a user of the benchmark runs; the rest builds and calibrates the suite (its maintainers)
USER_COMMANDS = ("cases", "provision", "table", "report", "merge", "prompt", "prompt-cost", "containers")


def _synopsis(commands, column: int = 40, width: int = 100) -> str:
    """One entry per subcommand of the parser, a user's first, then the suite maintainer's:
    its positional and required arguments, and what it does."""
    lines: list[str] = []
    users = [name for name in USER_COMMANDS if name in commands.choices]
    maintainers = [name for name in commands.choices if name not in USER_COMMANDS]
    for heading, names in (
        ("running and reading results:", users),
        ("building and calibrating the suite:", maintainers),
    ):
        lines += ([""] if lines else []) + [heading, *_entries(commands, names, column, width)]
    return "\n".join(lines)


def _entries(commands, names: list[str], column: int, width: int) -> list[str]:
    lines = []
    for name in names:
        command = commands.choices[name]
        needed = [a for a in command._actions if a.required or not a.option_strings]
        left = " ".join(["pdebench", name, *map(_usage_word, needed)])
        what = textwrap.wrap(command.description or "", width - column, break_on_hyphens=False) or [""]
        if len(left) < column - 1:
            lines.append(left.ljust(column) + what[0])
        else:
            lines += [left, " " * column + what[0]]
        lines += [" " * column + line for line in what[1:]]
    return lines


def _shipped(name: str) -> str:
    """The default of an input the package ships: the folder of that name here (a checkout,
    or a project with its own), else the bundled one, so an installed tool runs anywhere."""
    return name if Path(name).exists() else str(bundled(name))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-pdebench")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pdebench", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"pdebench (pytest-pdebench) {_version()}")
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="one of those above; pdebench COMMAND --help for its options",
    )

    listing = _command(
        commands,
        "cases",
        "list the cases a run here takes (the bundled suite, or this folder's cases/)",
        _cases,
        cases=CASES_OPTION,
    )
    listing.add_argument("--cases", help="a case file or folder instead")
    for name, what in (("family", "FAMILY"), ("domain", "DOMAIN"), ("library", "LIBRARY")):
        listing.add_argument(f"--{name}", action="append", metavar=what, help=f"only this {name} (repeatable)")
    listing.add_argument(
        "--match", metavar="PATTERN", help="only ids matching this shell pattern (poisson_*_l_shape_*)"
    )
    listing.add_argument("--format", default="simple", help="tabulate format (simple, github, ...)")

    provision = _command(
        commands,
        "provision",
        "set up a track's runtime: firedrake (built from PyPI sources, about 20 min once), dealii (the apt line)",
        _provision,
    )
    provision.add_argument("library", choices=("firedrake", "dealii"), help="the track")
    provision.add_argument("--print", action="store_true", help="firedrake: only print where the runtime lives")
    provision.add_argument("--dry-run", action="store_true", help="only print the command it would run")

    schema = _command(commands, "schema", "write (or check) cases/schema.json", _schema)
    schema.add_argument(
        "--path",
        help="the schema file (default: cases/schema.json here; with --check, the schema of the cases a run "
        "here takes: this folder's cases/ if it holds records, else the bundled suite's)",
    )
    schema.add_argument("--check", action="store_true", help="only check that the file matches the record models")

    starter = _command(
        commands,
        "build-starter",
        "derive the starter cases (tests/cases/starter.jsonl, the smoke suite) with sympy",
        _build_starter,
    )
    starter.add_argument("--output", default="tests/cases/starter.jsonl")
    starter.add_argument("--upstream", default=str(UPSTREAM_FILE))

    calibrate = _command(
        commands,
        "calibrate",
        "measure e_base and t_base with the oracle on this machine (calibrations/)",
        _calibrate,
        cases=CASES_OPTION,
        oracle=ORACLE,
    )
    calibrate.add_argument("--library", default="dolfinx")
    calibrate.add_argument("--cases", default=_shipped("cases"))
    calibrate.add_argument("--oracle", default=_shipped("submissions/oracle"))
    calibrate.add_argument("--calibrations", default="calibrations")
    calibrate.add_argument("--runs", type=int, default=3, help="timed runs averaged into t_base (default 3)")
    calibrate.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="calibrate on the workers of a Dask cluster "
        "(tcp://HOST:PORT or a scheduler file): one calibration file per kind of machine",
    )
    calibrate.add_argument("--update-cases", action="store_true", help="also materialize thresholds in the records")
    calibrate.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")

    materialize = _command(
        commands,
        "materialize",
        "write this machine's calibration into the records (after calibrating in parts)",
        _materialize,
        cases=CASES_OPTION,
    )
    materialize.add_argument("--library", default="dolfinx")
    materialize.add_argument("--cases", default="cases")
    materialize.add_argument("--calibrations", default="calibrations")
    materialize.add_argument(
        "--machine", help="the machine class whose calibration file to write (default: this machine's)"
    )

    table = _command(
        commands, "table", "outcome table of a pytest JSON report, per library", _table, report=JSON_REPORT
    )
    table.add_argument("report", metavar="REPORT.json")
    table.add_argument("--format", default="github", help="tabulate format (github, latex, simple, ...)")
    table.add_argument(
        "--json",
        action="store_true",
        help="instead of the tables, print the gates' pass rates per library as JSON (for scripts)",
    )

    merge = _command(commands, "merge", "join the JSON reports of the N shards of a run (--pde-shard) into one", _merge)
    merge.add_argument("shards", nargs="+", metavar="SHARD_REPORT", help="the N shards' --json-report files")
    merge.add_argument("--out", required=True, help="the merged report (then `pdebench report` reads it as one run)")

    report = _command(commands, "report", "the paper's tables and figures from stored runs (never re-runs)", _report)
    report.add_argument(
        "runs",
        nargs="+",
        metavar="[NAME=]RUN",
        help="pytest JSON reports (--json-report) or verdict files (JSON lines); NAME= names the system",
    )
    report.add_argument("--out", default="reports/report", help="the report folder (default reports/report)")
    report.add_argument("--no-figures", action="store_true", help="tables only (no matplotlib)")

    upstream = _command(
        commands,
        "import-upstream",
        "convert the public PDEAgent-Bench case file (benchmark_v2.jsonl, read at run time, never committed)",
        _import_upstream,
    )
    upstream.add_argument("source", nargs="?", default=str(UPSTREAM_FILE))
    upstream.add_argument(
        "--output",
        default="reports/upstream/cases.jsonl",
        help="where to write (keep it out of git: derived from CC BY data)",
    )

    suite = _command(commands, "build-suite", "the full suite from authoring/design_matrix.toml", _build_suite)
    suite.add_argument(
        "--output", default="cases/suite.jsonl", help="where to write (built fields of existing records are kept)"
    )
    suite.add_argument(
        "--upstream",
        default=str(UPSTREAM_FILE),
        help="the upstream records the calibration settings are drawn from (read, never committed)",
    )

    configs = _command(
        commands,
        "calibration-configs",
        "draw the records' calibration settings again (in place; after a change of RESOLUTION_SCALE)",
        _calibration_configs,
        cases=CASES_ARGUMENT,
    )
    configs.add_argument("cases", nargs="?", default=_shipped("cases"))
    configs.add_argument("--upstream", default=str(UPSTREAM_FILE))
    configs.add_argument(
        "--refine",
        metavar="LIBRARY",
        help="instead: finer meshes where this machine's calibration of LIBRARY has e_base >= 1e-3",
    )
    configs.add_argument(
        "--coarsen",
        metavar="LIBRARY",
        help="instead: coarser meshes where this machine's "
        "calibration of LIBRARY is more accurate than its strong oracle (reference-agreement "
        "--all-records)",
    )
    configs.add_argument(
        "--own",
        action="store_true",
        help="with --coarsen: change that library's setting "
        "only (its strong oracle is weaker than the others'; the source says 'for LIBRARY')",
    )
    configs.add_argument("--calibrations", default="calibrations")
    configs.add_argument("--family", action="append", help="only the records of this family (repeatable)")

    summary = _command(
        commands,
        "calibration-summary",
        "e_base, tau_acc and t_base distributions (the paper's tables 6 and 7)",
        _calibration_summary,
        cases=CASES_OPTION,
    )
    summary.add_argument("--library", default="dolfinx")
    summary.add_argument("--cases", default=_shipped("cases"))
    summary.add_argument("--calibrations", default=_shipped("calibrations"))
    summary.add_argument("--format", default="simple")

    agreement = _command(
        commands,
        "reference-agreement",
        "the strong oracle against the references of the reference-based records (checked by calibration-summary)",
        _reference_agreement,
        cases=CASES_OPTION,
    )
    agreement.add_argument("--library", default="dolfinx")
    agreement.add_argument("--cases", default=_shipped("cases"))
    agreement.add_argument("--oracle", default=_shipped("submissions/oracle"))
    agreement.add_argument("--calibrations", default="calibrations")
    agreement.add_argument(
        "--output", default="reports/calibration/strong", help="the runs' audit folders (finished items are reused)"
    )
    agreement.add_argument(
        "--all-records",
        action="store_true",
        help="every record, not only the reference-based ones (the strong oracle as the anchor that must pass)",
    )
    agreement.add_argument(
        "--no-run",
        action="store_true",
        help="read the verdicts already in --output "
        "(a run of the oracle with the same cases, e.g. benchmarks/validity.py's)",
    )
    agreement.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")

    varied = _command(
        commands,
        "variants",
        "live variants: each record's sibling drawn afresh from its design, as one JSONL file",
        _variants,
        cases=CASES_ARGUMENT,
    )
    varied.add_argument("cases", nargs="?", default=_shipped("cases"), help="a case file or folder (default: cases/)")
    varied.add_argument("--seed", type=_seed, required=True)
    varied.add_argument("--family", action="append", choices=FAMILIES, help="only these families (repeatable)")
    varied.add_argument(
        "--match", metavar="PATTERN", help="only ids matching this shell pattern (biharmonic_*_00[0-4])"
    )
    varied.add_argument("--output", help="the JSONL file to write (default: reports/variants/seed-S.jsonl)")

    audit = _command(
        commands,
        "leak-audit",
        "per family: records whose agent-visible data give the answer away, and what solvers that solve nothing pass",
        _leak_audit,
        cases=CASES_ARGUMENT,
    )
    audit.add_argument("cases")
    audit.add_argument("--library", default="dolfinx", help="whose tau_acc decides a pass")
    audit.add_argument("--format", default="simple")

    attack = _command(
        commands,
        "attack-audit",
        "per family: how close the ansatz-fit attacker (no mesh, no solve) comes to each record's answer",
        _attack_audit,
        cases=CASES_ARGUMENT,
        solver="the attacker's solver file (a Python file with solve(case_spec))",
    )
    attack.add_argument("cases", nargs="?", default="cases", help="a case file or folder (default: cases/)")
    attack.add_argument("--solver", help="the attacker's solver file (default: the bundled ansatz-fit attacker)")
    attack.add_argument("--margin", type=float, help="the attacker's error over tau_acc a record must keep (default 3)")
    attack.add_argument("--out", help="a JSONL file of one result per record; a rerun skips those already in it")
    attack.add_argument("--family", action="append", choices=FAMILIES, help="only these families (repeatable)")

    references = _command(
        commands,
        "build-references",
        "numerical references for records without an exact solution (needs DOLFINx)",
        _build_references,
        cases=CASE_FILE,
        oracle=ORACLE,
    )
    references.add_argument("cases", help="one case file (the references are written beside it): cases/suite.jsonl")
    references.add_argument("--oracle", default=_shipped("submissions/oracle/dolfinx"))
    references.add_argument("--family", action="append", help="only these families (repeatable)")
    references.add_argument("--rebuild", action="store_true", help="also records that have a reference")

    solve_only = _command(
        commands,
        "build-solve-only",
        "give manufactured records a part of their solution only a solve recovers (needs DOLFINx)",
        _build_solve_only,
        cases=CASE_FILE,
        oracle=ORACLE,
    )
    solve_only.add_argument("cases", help="one case file (rewritten from it into --out): cases/suite.jsonl")
    solve_only.add_argument("--out", required=True, help="folder for the parts, the references and suite.jsonl")
    solve_only.add_argument("--oracle", default=_shipped("submissions/oracle/dolfinx"))
    solve_only.add_argument("--family", action="append", help="only these families (repeatable)")
    solve_only.add_argument("--shard", default="1/1", help="I/N: every N-th record from the I-th (two processes)")
    solve_only.add_argument("--assemble", action="store_true", help="only write OUT/suite.jsonl from the parts")
    solve_only.add_argument("--retry", action="store_true", help="build again the records that kept no part")
    solve_only.add_argument(
        "--again",
        metavar="AUDIT",
        help="build again the parts of the records an attack-audit file (its --out) has under the margin",
    )
    solve_only.add_argument(
        "--discard",
        action="store_true",
        help="list the records that kept no part in discarded.toml (build-suite then deals others)",
    )

    prompt = _command(
        commands, "prompt", "print the prompt a model gets for a case", _prompt, cases=CASES_OPTION, guides=GUIDES
    )
    prompt.add_argument("case_id")
    prompt.add_argument("--library", default="dolfinx")
    prompt.add_argument("--cases", default=_shipped("cases"))
    prompt.add_argument("--guides", default=_shipped("guides"))
    prompt.add_argument("--template", action="store_true", help="the template-guided prompt (with a scaffold)")

    cost = _command(
        commands,
        "prompt-cost",
        "prompt tokens of every item and the cost of a run per registry model",
        _prompt_cost,
        cases=CASES_OPTION,
        guides=GUIDES,
    )
    cost.add_argument("--library", action="append", help="only these tracks (repeatable)")
    cost.add_argument("--cases", default=_shipped("cases"))
    cost.add_argument("--guides", default=_shipped("guides"))

    containers = _command(
        commands,
        "containers",
        "the tracks' container images (--pde-sandbox=docker): build, list, prune, or serve an engine",
        _containers,
    )
    containers.add_argument(
        "action",
        choices=("build", "list", "prune", "engine"),
        help="engine: serve podman's Docker API here (podman and runc from apt)",
    )
    containers.add_argument(
        "tracks",
        nargs="*",
        help="build: these tracks (default dolfinx and dealii; firedrake builds PETSc, about 25 min)",
    )
    containers.add_argument(
        "--base-from-registry",
        action="store_true",
        help="build FROM debian:<release> instead of a local debootstrap base",
    )
    containers.add_argument("--folder", default="/run/pdebench-podman", help="engine: where the socket goes")

    for command in commands.choices.values():  # the arguments many commands share: one help line each
        for action in command._actions:
            if not action.help and action.dest in SHARED_HELP:
                action.help = SHARED_HELP[action.dest]
    parser.description = f"{HEADING}\n\n{_synopsis(commands)}"
    return parser


HEADING = "PDEAgent-Bench: list the cases, provision tracks, read stored runs; build and calibrate the suite."
SHARED_HELP = {
    "library": "the track: dolfinx, firedrake or dealii (default %(default)s)",
    "cases": "a case file or folder (default %(default)s)",
    "oracle": "the oracle's solver folder (default %(default)s)",
    "calibrations": "the calibrations folder (default %(default)s)",
    "upstream": "the upstream case file, benchmark_v2.jsonl (read, never copied; default %(default)s)",
    "output": "where to write (default %(default)s)",
    "format": "tabulate format: github, simple, latex, ... (default %(default)s)",
    "seed": "the variants' seed (a whole number, 0 or more; the same seed draws the same variants)",
    "report": "a pytest JSON report (--json-report-file)",
    "source": "the upstream case file (benchmark_v2.jsonl of PDEAgent-Bench)",
    "case_id": "the case's id (pdebench cases lists them)",
    "guides": "the library guides' folder (default %(default)s)",
}


def _fail(command: str, message: str) -> int:
    print(f"pdebench {command}: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        _check_inputs(args)
        return args.func(args)
    except InputError as exc:
        return _fail(args.command, str(exc))
    except Exception as exc:
        # the modules that raise these were imported by the command that raised them
        from .authoring.calibration_configs import MissingUpstream
        from .cases import CaseFileError

        if isinstance(exc, CaseFileError):
            return _fail(args.command, str(exc))
        if isinstance(exc, MissingUpstream):  # build-starter, build-suite, calibration-configs draw from it
            return _fail(args.command, f"{exc}; pass --upstream FILE")
        raise


if __name__ == "__main__":
    raise SystemExit(main())
