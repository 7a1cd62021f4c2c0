"""``pdebench`` commands that build the suite: the schema, the starter and upstream cases,
the suite from its design, references, solve-only parts, calibration settings, variants."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..bundled import UPSTREAM_FILE, case_source
from ..shared_options import add_shared
from ..vocabulary import FAMILIES
from .common import (
    CASE_FILE,
    CASES_ARGUMENT,
    ORACLE,
    InputError,
    command,
    say,
    shipped,
)

HEADING = "building the suite"


def _schema(args) -> int:
    from ..cases import schema_text

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


def _schema_command(commands) -> None:
    schema = command(commands, "schema", "write (or check) cases/schema.json", _schema)
    schema.add_argument(
        "--path",
        help="the schema file (default: cases/schema.json here; with --check, the schema of the cases a run "
        "here takes: this folder's cases/ if it holds records, else the bundled suite's)",
    )
    schema.add_argument("--check", action="store_true", help="only check that the file matches the record models")


def _build_starter(args) -> int:
    from ..authoring.calibration_configs import attach, read_distribution
    from ..authoring.rebuilds import rewrite_case_file
    from ..making.starter import starter_records

    path = Path(args.output)
    pools = read_distribution(Path(args.upstream))  # before the build (half a minute): a missing file stops here
    records = attach(starter_records(), pools)
    rewrite_case_file(path, records)
    print(f"wrote {len(records)} cases to {path}")
    return 0


def _build_starter_command(commands) -> None:
    starter = command(
        commands,
        "build-starter",
        "derive the starter cases (the smoke suite, pytest_pdebench/data/smoke/starter.jsonl) with sympy",
        _build_starter,
    )
    starter.add_argument("--output", default="pytest_pdebench/data/smoke/starter.jsonl")
    starter.add_argument("--upstream", default=str(UPSTREAM_FILE))


def _import_upstream(args) -> int:
    from ..authoring.upstream import import_to

    source = Path(args.source)
    if not source.is_file():
        raise InputError(f"{source}: no such file; pass the upstream case file (benchmark_v2.jsonl of PDEAgent-Bench)")

    def progress(line, case_id):
        if line % 25 == 0:
            print(f"line {line}: {case_id}", file=sys.stderr, flush=True)

    print(import_to(source, Path(args.output), progress))
    return 0


def _import_upstream_command(commands) -> None:
    upstream = command(
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


def _build_suite(args) -> int:
    from ..authoring.calibration_configs import attach, read_distribution
    from ..authoring.rebuilds import rewrite_case_file
    from ..making.suite import suite_records

    def progress(index, total, case_id):
        if index % 25 == 0 or index == total:
            say(f"[{index}/{total}] {case_id}")

    path = Path(args.output)
    pools = read_distribution(Path(args.upstream))  # before the long build: a missing file stops here
    records = attach(suite_records(progress=progress), pools)
    rewrite_case_file(path, records)
    print(f"wrote {len(records)} cases to {path}")
    return 0


def _build_suite_command(commands) -> None:
    suite = command(commands, "build-suite", "the full suite from making/design_matrix.toml", _build_suite)
    suite.add_argument(
        "--output", default="cases/suite.jsonl", help="where to write (built fields of existing records are kept)"
    )
    suite.add_argument(
        "--upstream",
        default=str(UPSTREAM_FILE),
        help="the upstream records the calibration settings are drawn from (read, never committed)",
    )


def _build_references(args) -> int:
    from ..authoring.references import build_references

    kept, tried = build_references(Path(args.cases), Path(args.oracle), args.family, args.rebuild, log=say)
    print(f"kept {kept} of {tried}; discarded: {tried - kept}")
    return 0 if kept == tried else 1


def _build_references_command(commands) -> None:
    references = command(
        commands,
        "build-references",
        "numerical references for records without an exact solution (needs DOLFINx)",
        _build_references,
        cases=CASE_FILE,
        oracle=ORACLE,
    )
    references.add_argument("cases", help="one case file (the references are written beside it): cases/suite.jsonl")
    references.add_argument("--oracle", default=shipped("submissions/oracle/dolfinx"))
    references.add_argument("--family", action="append", help="only these families (repeatable)")
    references.add_argument("--rebuild", action="store_true", help="also records that have a reference")


def _build_solve_only(args) -> int:
    from ..authoring.parts import assemble, build_parts, discard_without_part, reprice_with_tracks

    out = Path(args.out)
    if args.track_gains and not args.assemble:
        index, count = (int(n) for n in args.shard.split("/"))
        kept, rebuilt = reprice_with_tracks(out, Path(args.oracle), [Path(f) for f in args.track_gains],
                                            (index - 1, count), log=say)  # fmt: skip
        print(f"kept {kept}; built again {rebuilt}")
    elif not args.assemble:
        index, count = (int(n) for n in args.shard.split("/"))
        kept, tried = build_parts(
            Path(args.cases),
            out,
            Path(args.oracle),
            args.family,
            (index - 1, count),
            log=say,
            retry=args.retry,
            again=(_under_margin(args.again) if args.again else set())
            | (_not_priced(Path(args.cases)) if args.reprice else set()),
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
    from ..authoring.attack_audit import read_attacks
    from ..making.attack import ATTACK_MARGIN

    rows = read_attacks(Path(audit))
    if not rows:
        raise SystemExit(f"{audit}: no attack-audit rows there (pdebench attack-audit --out FILE writes them)")
    return {case_id for case_id, row in rows.items() if row["margin"] is not None and row["margin"] < ATTACK_MARGIN}


def _not_priced(cases: Path) -> set[str]:
    """The records whose part was not priced by what lifting gains (built under an earlier
    rule), or whose build's estimate is over the ceiling (every tier was tried under 2 x)."""
    from ..cases import iter_case_file
    from ..validation import LIFTING_GAIN_CEILING, lifting_gain

    return {
        record.id
        for _, record in iter_case_file(cases)
        if record.evaluation_metadata.solve_only is not None
        and ((gain := lifting_gain(record)) is None or gain > LIFTING_GAIN_CEILING)
    }


def _build_solve_only_command(commands) -> None:
    solve_only = command(
        commands,
        "build-solve-only",
        "give manufactured records a part of their solution only a solve recovers (needs DOLFINx)",
        _build_solve_only,
        cases=CASE_FILE,
        oracle=ORACLE,
    )
    solve_only.add_argument("cases", help="one case file (rewritten from it into --out): cases/suite.jsonl")
    solve_only.add_argument("--out", required=True, help="folder for the parts, the references and suite.jsonl")
    solve_only.add_argument("--oracle", default=shipped("submissions/oracle/dolfinx"))
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
        "--reprice",
        action="store_true",
        help="build again the parts not priced by what lifting u_m out of the text gains, or priced over 2 x",
    )
    solve_only.add_argument(
        "--track-gains",
        action="append",
        metavar="FILE",
        help="write down another track's measured lifting gains (benchmarks/lifting_tracks.py's JSON) in OUT's "
        "parts, building again those over 1.8 x with the measurement as a pricing row (repeatable)",
    )
    solve_only.add_argument(
        "--discard",
        action="store_true",
        help="list the records that kept no part in discarded.toml (build-suite then deals others)",
    )


def _calibration_configs(args) -> int:
    from ..authoring.calibration_configs import update_case_files

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


def _calibration_configs_command(commands) -> None:
    configs = command(
        commands,
        "calibration-configs",
        "draw the records' calibration settings again (in place; after a change of RESOLUTION_SCALE)",
        _calibration_configs,
        cases=CASES_ARGUMENT,
    )
    configs.add_argument("cases", nargs="?", default=shipped("cases"))
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
    add_shared(configs.add_argument, "", "calibrations", default="calibrations")
    configs.add_argument("--family", action="append", help="only the records of this family (repeatable)")


def _variants(args) -> int:
    import fnmatch

    from ..authoring.variants import write_variants

    families = set(args.family or [])
    output = Path(args.output or f"reports/variants/seed-{args.seed}.jsonl")

    def selected(record) -> bool:
        return (not families or record.family in families) and (
            not args.match or fnmatch.fnmatch(record.id, args.match)
        )

    return write_variants(Path(args.cases), args.seed, output, selected)


def _seed(text: str) -> int:
    """A variant's seed: a whole number, 0 or more (numpy's generators take no other)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: a seed is 0 or more")
    return value


def _variants_command(commands) -> None:
    varied = command(
        commands,
        "variants",
        "live variants: each record's sibling drawn afresh from its design, as one JSONL file",
        _variants,
        cases=CASES_ARGUMENT,
    )
    varied.add_argument("cases", nargs="?", default=shipped("cases"), help="a case file or folder (default: cases/)")
    varied.add_argument("--seed", type=_seed, required=True)
    varied.add_argument("--family", action="append", choices=FAMILIES, help="only these families (repeatable)")
    varied.add_argument(
        "--match", metavar="PATTERN", help="only ids matching this shell pattern (biharmonic_*_00[0-4])"
    )
    varied.add_argument("--output", help="the JSONL file to write (default: reports/variants/seed-S.jsonl)")


COMMANDS = [
    _schema_command,
    _build_starter_command,
    _import_upstream_command,
    _build_suite_command,
    _build_references_command,
    _build_solve_only_command,
    _calibration_configs_command,
    _variants_command,
]
