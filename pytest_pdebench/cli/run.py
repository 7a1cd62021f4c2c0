"""``pdebench`` commands that run and inspect: the cases a run takes, a track's runtime,
the tables and the report of stored runs, shards joined, prompts and their cost, the
container images."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..bundled import case_source
from ..shared_options import add_shared
from ..vocabulary import DOMAIN_TYPES, FAMILIES, LIBRARIES
from .common import (
    CASES_OPTION,
    GUIDES,
    JSON_REPORT,
    InputError,
    command,
    say,
    shipped,
)

HEADING = "running and reading results"


def _cases(args) -> int:
    """``pdebench cases``: the records of the suite a run here takes (or --cases), filtered."""
    import fnmatch

    from tabulate import tabulate

    from ..cases import case_files, iter_case_file

    for name, known in (("family", FAMILIES), ("domain", DOMAIN_TYPES), ("library", LIBRARIES)):
        unknown = sorted(set(getattr(args, name) or []) - set(known))
        if unknown:  # a typo would list nothing and look like an empty suite
            raise InputError(f"--{name} {', '.join(unknown)}: no such {name}; one of {', '.join(known)}")
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


def _cases_command(commands) -> None:
    listing = command(
        commands,
        "cases",
        "list the cases a run here takes (the bundled suite, or this folder's cases/)",
        _cases,
        cases=CASES_OPTION,
    )
    add_shared(listing.add_argument, "", "cases", more="instead of the run's default")
    for name, what in (("family", "FAMILY"), ("domain", "DOMAIN"), ("library", "LIBRARY")):
        listing.add_argument(f"--{name}", action="append", metavar=what, help=f"only this {name} (repeatable)")
    listing.add_argument(
        "--match", metavar="PATTERN", help="only ids matching this shell pattern (poisson_*_l_shape_*)"
    )
    listing.add_argument("--format", default="simple", help="tabulate format (simple, github, ...)")


def _provision(args) -> int:
    """``pdebench provision LIBRARY``: Firedrake's runtime built by the recipe the package
    ships (its steps print as they go; resumable), deal.II's Debian packages named."""
    import subprocess
    import time

    if args.library == "dealii":
        from ..libraries.dealii import DealiiTrack

        print(DealiiTrack.install_hint)
        return 0
    from ..libraries.firedrake import PROVISION_SCRIPT

    command = ["bash", str(PROVISION_SCRIPT), *(["--print"] if args.print else [])]
    if args.dry_run:  # the recipe says its steps, packages, disk and time, and which are done here
        print(" ".join(command), flush=True)  # before the recipe's own lines
        return subprocess.run(["bash", str(PROVISION_SCRIPT), "--dry-run"]).returncode
    started = time.monotonic()
    code = subprocess.run(command).returncode
    if not args.print:
        minutes = (time.monotonic() - started) / 60
        print(f"pdebench provision firedrake: {'done' if code == 0 else 'failed'} in {minutes:.1f} min")
    return code


def _provision_command(commands) -> None:
    provision = command(
        commands,
        "provision",
        "set up a track's runtime: firedrake (built from PyPI sources, 22-38 min once), dealii (the apt line)",
        _provision,
    )
    provision.add_argument("library", choices=("firedrake", "dealii"), help="the track")
    provision.add_argument("--print", action="store_true", help="firedrake: only print where the runtime lives")
    provision.add_argument(
        "--dry-run", action="store_true", help="only say what it would do: the command, steps, packages, disk, time"
    )


def _table(args) -> int:
    from ..analysis.runs import json_report_verdicts
    from ..report import stage_rates, tables_by_library

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
    from ..report import Stages

    stages = Stages.of(verdicts)
    steps = (
        ("executed", stages.executed, stages.items, "items"),
        ("accurate", stages.accurate, stages.executed, "executed"),
        ("fast", stages.passed, stages.accurate, "accurate"),
    )
    return "gates passed: " + "; ".join(
        f"{gate} {part} of {whole} {of}" + (f" ({100 * part / whole:.1f}%)" if whole else "")
        for gate, part, whole, of in steps
    )


def _table_command(commands) -> None:
    table = command(commands, "table", "outcome table of a pytest JSON report, per library", _table, report=JSON_REPORT)
    table.add_argument("report", metavar="REPORT.json")
    table.add_argument("--format", default="github", help="tabulate format (github, latex, simple, ...)")
    table.add_argument(
        "--json",
        action="store_true",
        help="instead of the tables, print the gates' pass rates per library as JSON (for scripts)",
    )


def _report(args) -> int:
    from ..analysis.render import write_report
    from ..analysis.runs import ReportError, load_run, parse_run_argument

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


def _report_command(commands) -> None:
    report = command(commands, "report", "the paper's tables and figures from stored runs (never re-runs)", _report)
    report.add_argument(
        "runs",
        nargs="+",
        metavar="[NAME=]RUN",
        help="pytest JSON reports (--json-report) or verdict files (JSON lines); NAME= names the system",
    )
    report.add_argument("--out", default="reports/report", help="the report folder (default reports/report)")
    report.add_argument("--no-figures", action="store_true", help="tables only (no matplotlib)")


def _merge(args) -> int:
    from ..shards import ShardError, merge_reports

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


def _merge_command(commands) -> None:
    merge = command(commands, "merge", "join the JSON reports of the N shards of a run (--pde-shard) into one", _merge)
    merge.add_argument("shards", nargs="+", metavar="SHARD_REPORT", help="the N shards' --json-report files")
    merge.add_argument("--out", required=True, help="the merged report (then `pdebench report` reads it as one run)")


def _prompt(args) -> int:
    from ..cases import agent_view, load_cases
    from ..prompts import single_shot_prompt
    from ..scaffolds import scaffold_for

    record = next((r for _, _, r in load_cases(Path(args.cases)) if r.id == args.case_id), None)
    if record is None:
        print(f"no case {args.case_id!r} in {args.cases}", file=sys.stderr)
        return 2
    view = agent_view(record, args.library)
    scaffold = scaffold_for(view) if args.template else None
    sys.stdout.write(single_shot_prompt(view, record.evaluation_config.timeout_sec, Path(args.guides), scaffold))
    return 0


def _prompt_command(commands) -> None:
    prompt = command(
        commands, "prompt", "print the prompt a model gets for a case", _prompt, cases=CASES_OPTION, guides=GUIDES
    )
    prompt.add_argument("case_id")
    add_shared(prompt.add_argument, "", "library", default="dolfinx")
    add_shared(prompt.add_argument, "", "cases", default=shipped("cases"), said="cases/ here, else the bundled suite")
    prompt.add_argument("--guides", default=shipped("guides"))
    prompt.add_argument("--template", action="store_true", help="the template-guided prompt (with a scaffold)")


def _prompt_cost(args) -> int:
    from ..cases import load_cases
    from ..llm.tokens import run_cost
    from ..prompts import item_prompts

    records = [record for _, _, record in load_cases(Path(args.cases))]
    print(run_cost(item_prompts(records, Path(args.guides), args.library)))
    return 0


def _prompt_cost_command(commands) -> None:
    cost = command(
        commands,
        "prompt-cost",
        "prompt tokens of every item and the cost of a run per registry model",
        _prompt_cost,
        cases=CASES_OPTION,
        guides=GUIDES,
    )
    add_shared(cost.add_argument, "", "library", action="append", more="only these tracks (repeatable)")
    add_shared(cost.add_argument, "", "cases", default=shipped("cases"), said="cases/ here, else the bundled suite")
    cost.add_argument("--guides", default=shipped("guides"))


def _containers(args) -> int:
    from ..containers import DEFAULT_BUILDS, ContainerError, build, images_listing, prune, serve_podman

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


def _containers_command(commands) -> None:
    containers = command(
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


COMMANDS = [
    _cases_command,
    _provision_command,
    _table_command,
    _report_command,
    _merge_command,
    _prompt_command,
    _prompt_cost_command,
    _containers_command,
]
