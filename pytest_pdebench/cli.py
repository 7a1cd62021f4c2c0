"""The ``pdebench`` command: build cases, write the schema, calibrate, show tables.

    pdebench schema [--check]               write (or check) cases/schema.json
    pdebench build-starter                  write tests/cases/starter.jsonl (the smoke suite)
    pdebench calibrate --library dolfinx    run the oracle here, write calibrations/ and
                                            (with --update-cases) the records' thresholds
    pdebench materialize --library L        only the second step: calibrations/ -> records
    pdebench table REPORT.json              outcome table of a pytest JSON report
    pdebench import-upstream [FILE]         convert the public benchmark_v2.jsonl (read at
                                            run time, never committed) to this layout
    pdebench build-references CASES.jsonl   numerical references for records without an
                                            exact solution (needs DOLFINx)
    pdebench calibration-summary            e_base, tau_acc and t_base distributions
    pdebench build-suite                    the full suite from build/design_matrix.toml
    pdebench calibration-configs [CASES]    draw the records' calibration settings again
    pdebench leak-audit CASES.jsonl         per family: records whose data give the answer
                                            away, and what solvers that solve nothing pass
    pdebench prompt CASE_ID [--library L]   print the prompt a model gets for a case
    pdebench prompt-cost [--library L]      prompt tokens of every item and the cost of a
                                            run per registry model
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path.cwd()
UPSTREAM_FILE = "../shared/upstream/benchmark_v2.jsonl"


def _schema(args) -> int:
    from .schema import schema_text

    path = Path(args.path)
    if args.check:
        if not path.is_file() or path.read_text() != schema_text():
            print(f"{path} is out of date: run `pdebench schema`", file=sys.stderr)
            return 1
        print(f"{path} matches the models")
        return 0
    path.write_text(schema_text())
    print(f"wrote {path}")
    return 0


def _build_starter(args) -> int:
    from .authoring.starter import starter_records
    from .cases import rewrite_case_file

    path = Path(args.output)
    records = _with_calibration_configs(starter_records(), args.upstream)
    rewrite_case_file(path, records)
    print(f"wrote {len(records)} cases to {path}")
    return 0


def _calibrate(args) -> int:
    import pytest

    command = ["-p", "no:cacheprovider", "--pde-calibrate", f"--pde-library={args.library}",
               f"--pde-cases={args.cases}", f"--pde-submissions={args.oracle}", f"--pde-runs={args.runs}",
               f"--pde-calibrations={args.calibrations}", "-q", "-rfE"] + args.pytest_args
    if args.cluster:  # every machine class of the cluster's workers, each on its own workers
        command.append(f"--pde-cluster={args.cluster}")
    code = pytest.main(command)
    if args.update_cases:
        _materialize(Path(args.cases), args.library, Path(args.calibrations))
    return int(code)


def _materialize_command(args) -> int:
    _materialize(Path(args.cases), args.library, Path(args.calibrations))
    return 0


def _materialize(cases_path: Path, library: str, calibrations: Path) -> None:
    """Write this machine's calibration into the records' evaluation_metadata.thresholds."""
    from .calibration import Alphas, CalibrationStore, case_fingerprint, materialize
    from .cases import case_files, iter_case_file, write_case_file

    store = CalibrationStore(calibrations)
    entries = store.entries(library)
    for file in case_files(cases_path):
        records = [record for _, record in iter_case_file(file)]
        changed = 0
        for record in records:
            entry = entries.get(record.id)
            if entry and entry["fingerprint"] == case_fingerprint(record, library):
                record.evaluation_metadata.thresholds[library] = materialize(record, library, entry, store.machine_for(library),
                                                                             Alphas())
                changed += 1
        write_case_file(file, records)
        print(f"{file}: thresholds for {library} updated on {changed} of {len(records)} records")


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
    print(f"report over {len(runs)} run(s), {items} items: {out / 'report.md'}, {out / 'report.html'} "
          f"({len(summary['tables'])} tables, {len(summary['figures'])} figures)")
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
    counts = ", ".join(f"{merged['summary'][k]} {k}" for k in sorted(merged["summary"]) if k not in ("total", "collected"))
    print(f"merged {len(args.shards)} shards, {merged['summary']['total']} items ({counts}) into {out}")
    return 0


def _table(args) -> int:
    from .analysis.runs import json_report_verdicts
    from .report import stage_rates, tables_by_library

    verdicts = json_report_verdicts(json.loads(Path(args.report).read_text()))
    if not verdicts:
        print("no PDEAgent-Bench verdicts in that report (was it written with --json-report?)", file=sys.stderr)
        return 1
    for library, table in tables_by_library(verdicts, args.format):
        print(f"{library}:\n{table}\n")
    print(json.dumps(stage_rates(verdicts), indent=1))
    return 0


def _import_upstream(args) -> int:
    from collections import Counter

    from .authoring.upstream import import_file, reason_group
    from .cases import rewrite_case_file

    source = Path(args.source)
    if not source.is_file():
        print(f"no upstream file at {source}: pass its path (benchmark_v2.jsonl of PDEAgent-Bench)", file=sys.stderr)
        return 2
    def progress(line, case_id):
        if line % 25 == 0:
            print(f"line {line}: {case_id}", file=sys.stderr, flush=True)

    records, problems = import_file(source, progress)
    output = Path(args.output)
    rewrite_case_file(output, records)
    rejected = output.with_name(output.stem + ".rejected.json")
    rejected.write_text(json.dumps([{"line": line, "id": case_id, "reason": reason}
                                    for line, case_id, reason in problems], indent=1) + "\n")
    print(f"imported {len(records)} records to {output}; {len(problems)} rejected (reasons in {rejected})")
    for family, count in sorted(Counter(r.family for r in records).items()):
        print(f"  {family:22s} {count}")
    # issue 11: what the importer changed so that the data no longer give the answer away
    hidden = [r for r in records if "imported_hidden_data" in r.tags.structure]
    bumped = sum("imported_added_component" in r.tags.structure for r in hidden)
    conditions = sum(len(r.case_spec.bc.conditions(kind)) for r in hidden
                     for kind in ("dirichlet", "neumann", "robin", "laplacian"))
    print(f"data hidden in {len(hidden)} manufactured records: {conditions} boundary conditions, "
          f"{bumped} solutions with an added component")
    if problems:
        print("rejected:")
        for reason, count in Counter(reason_group(reason) for _, _, reason in problems).most_common():
            print(f"  {count:4d}  {reason[:160]}")
    return 0


def _build_references(args) -> int:
    from .authoring.references import build_reference
    from .cases import iter_case_file, write_case_file

    path = Path(args.cases)
    records = [record for _, record in iter_case_file(path)]
    todo = [r for r in records if r.evaluation_metadata.construction_method == "reference_numerical"
            and (args.rebuild or not r.evaluation_metadata.reference_path)
            and (not args.family or r.family in args.family)]
    print(f"{len(todo)} records of {path} need a numerical reference")
    kept, outcomes = 0, []
    for index, record in enumerate(todo, start=1):
        outcome = build_reference(record, path.parent, Path(args.oracle))
        outcomes.append(outcome)
        kept += outcome.kept
        figure = f"e_base~{outcome.e_base_estimate:.2e}" if outcome.e_base_estimate is not None else ""
        print(f"[{index}/{len(todo)}] {record.id}: {outcome.reason} {figure}", flush=True)
        write_case_file(path, records)  # after each one: an interrupted run keeps what it built
    print(f"kept {kept} of {len(todo)}; discarded: {len(todo) - kept}")
    return 0 if kept == len(todo) else 1


def _build_suite(args) -> int:
    from .authoring.suite import suite_records
    from .cases import rewrite_case_file

    def progress(index, total, case_id):
        if index % 25 == 0 or index == total:
            print(f"[{index}/{total}] {case_id}", flush=True)

    path = Path(args.output)
    pools = _upstream_pools(args.upstream)  # before the long build: a missing file stops here
    records = _with_calibration_configs(suite_records(progress=progress), args.upstream, pools)
    rewrite_case_file(path, records)
    print(f"wrote {len(records)} cases to {path}")
    return 0


def _upstream_pools(upstream: str):
    from .authoring.calibration_configs import MissingUpstream, read_distribution

    try:
        return read_distribution(Path(upstream))
    except MissingUpstream as exc:
        raise SystemExit(f"pdebench: {exc}; pass --upstream FILE") from None


def _with_calibration_configs(records: list, upstream: str, pools=None) -> list:
    from .authoring.calibration_configs import attach

    return attach(records, pools or _upstream_pools(upstream))


def _calibration_configs(args) -> int:
    """Draw the calibration settings of the records in place (nothing else changes), or
    with --refine LIBRARY: give a finer mesh to the cases whose baseline error on this
    machine's calibration of LIBRARY is at or above REFINE_ABOVE. Imported records keep
    their own settings, and so do settings adjusted by hand or for one library (the reason
    is in the source)."""
    from .authoring.calibration_configs import kept_on_redraw
    from .cases import case_files, iter_case_file, write_case_file

    def redrawn(record) -> bool:
        config = record.evaluation_metadata.calibration_config
        return not (config and (config.upstream_oracle is not None or kept_on_redraw(config.source)))

    pools = None if args.refine or args.coarsen else _upstream_pools(args.upstream)
    for file in case_files(Path(args.cases)):
        records = [record for _, record in iter_case_file(file)]
        chosen = [r for r in records if not args.family or r.family in args.family]
        if args.refine:
            changed = _refine_settings(chosen, args.refine, Path(args.calibrations))
        elif args.coarsen:
            changed = _coarsen_settings(chosen, args.coarsen, Path(args.calibrations), own=args.own)
        else:
            changed = len(_with_calibration_configs([r for r in chosen if redrawn(r)], args.upstream, pools))
        write_case_file(file, records)
        print(f"{file}: calibration settings {'refined' if args.refine else 'coarsened' if args.coarsen else 'drawn'} for {changed} of "
              f"{len(records)} records")
    return 0


def _refine_settings(records: list, library: str, calibrations: Path) -> int:
    from .authoring.calibration_configs import REFINE_ABOVE, refined
    from .calibration import CalibrationStore, case_fingerprint

    entries = CalibrationStore(calibrations).entries(library)
    changed = 0
    for record in records:
        entry, config = entries.get(record.id), record.evaluation_metadata.calibration_config
        if not (entry and config and entry["fingerprint"] == case_fingerprint(record, library)
                and entry["e_base"] >= REFINE_ABOVE):
            continue
        before = config.settings[library].model_dump(exclude_none=True)
        after = refined(before, entry["e_base"], 3 if record.case_spec.eval_grid.nz else 2)
        if after == before:
            continue  # as fine as a calibration setting gets
        _change_setting(config, before, after, "refined", f"e_base {entry['e_base']:.1e} on {library}")
        changed += 1
    return changed


def _change_setting(config, before: dict, after: dict, step: str, why: str, only: str | None = None) -> None:
    """Give every library whose setting is ``before`` (only ``only``'s, when given) the
    setting ``after`` (a library's own adjusted setting stays) and name the step in the
    source (tests replay the steps)."""
    from .cases import CalibrationSetting

    for name, current in config.settings.items():
        if (only is None or name == only) and current.model_dump(exclude_none=True) == before:
            config.settings[name] = CalibrationSetting.model_validate(after)
    config.source += (f"; {step}{f' for {only}' if only else ''} from P{before['element_degree']}/"
                      f"{before['cells_per_side']} to P{after['element_degree']}/{after['cells_per_side']} ({why})")


def _coarsen_settings(records: list, library: str, calibrations: Path, own: bool = False) -> int:
    """Coarser meshes where this machine's baseline of LIBRARY leaves too little room: the
    strong oracle's error (stored by `pdebench reference-agreement`) above ANCHOR_ACC_SHARE
    x tau_acc, or a reference LIBRARY's oracle built farther than REFERENCE_AGREEMENT x
    tau_acc from its level 1. ``own``: for LIBRARY only (its strong oracle is weaker than the others')."""
    from .authoring.calibration_configs import COARSEN_MARGIN, coarsened
    from .calibration import (ANCHOR_ACC_SHARE, REFERENCE_AGREEMENT, Alphas, CalibrationStore, case_fingerprint,
                              materialize)
    from .sources.folder import oracle_fingerprint

    store = CalibrationStore(calibrations)
    entries = store.entries(library)
    changed = 0
    for record in records:
        entry, config = entries.get(record.id), record.evaluation_metadata.calibration_config
        # the binding one of: the anchor's error (at most ANCHOR_ACC_SHARE x tau_acc) and the
        # reference's distance from the oracle a level below (at most REFERENCE_AGREEMENT x tau_acc)
        checks = [(figures["e_strong"], share) for figures, share in (
            (store.strong_oracle(record, library, oracle_fingerprint(record, library)), ANCHOR_ACC_SHARE),
            (_reference_build_gap(record, library), REFERENCE_AGREEMENT)) if figures]
        if not (entry and config and checks and entry["fingerprint"] == case_fingerprint(record, library)):
            continue
        e_strong, share = max(checks, key=lambda check: check[0] / check[1])
        if e_strong <= share * materialize(record, library, entry, "", Alphas()).tau_acc:
            continue  # the anchor passes with room (and agrees with the reference)
        if e_strong > share * record.evaluation_config.tau_max:
            continue  # no tau_acc under the cap leaves room: the oracle or the reference must get better
        before = config.settings[library].model_dump(exclude_none=True)
        # tau_acc grows with e_base: the e_base at which the anchor just fits, with room
        tau_acc = materialize(record, library, entry, "", Alphas()).tau_acc
        aim = COARSEN_MARGIN * entry["e_base"] * e_strong / (share * tau_acc)
        after = coarsened(before, entry["e_base"], aim, 3 if record.case_spec.eval_grid.nz else 2)
        if after is None:
            continue
        _change_setting(config, before, after, "coarsened",
                        f"e_base {entry['e_base']:.1e} under the strong oracle's {e_strong:.1e} on {library}",
                        only=library if own else None)
        changed += 1
    return changed


def _reference_build_gap(record, library: str) -> dict | None:
    """The strong oracle's error on a reference-based record as its reference build measured
    it (level 1 against level 2, which is the reference) when LIBRARY's oracle built it:
    the figure the anchor run would store, known before that run."""
    config = record.evaluation_metadata.reference_config or {}
    if config.get("oracle") == library and config.get("digest") and config.get("e_base_estimate") is not None:
        return {"e_strong": config["e_base_estimate"]}
    return None


def _leak_audit(args) -> int:
    from collections import Counter

    from tabulate import tabulate

    from .cases import load_cases
    from .leaks import LEAK_DISTANCE, RUNGS, leak_problems, manufactured, rung_errors

    counts: dict[str, Counter] = {}
    untuned = 0
    for path, _, record in load_cases(Path(args.cases)):
        row = counts.setdefault(record.family, Counter())
        row["records"] += 1
        row["manufactured"] += manufactured(record)
        thresholds = record.evaluation_metadata.thresholds.get(args.library)
        untuned += thresholds is None
        tau = thresholds.tau_acc if thresholds else LEAK_DISTANCE
        for solver, error in rung_errors(record, path.parent).items():
            row[solver] += error <= tau
        row["leaking"] += bool(leak_problems(record))
    columns = ["records", "manufactured", *RUNGS, "leaking"]
    total = sum(counts.values(), Counter())
    rows = [[family, *(row[c] for c in columns)] for family, row in sorted(counts.items())]
    print(tabulate(rows + [["all", *(total[c] for c in columns)]],
                   headers=["family", "records", "manufactured", *(f"{s} passes" for s in RUNGS), "leaking"],
                   tablefmt=args.format))
    print(f"\npasses: the evaluator's error <= the record's {args.library} tau_acc"
          + (f" ({untuned} records without one: <= {LEAK_DISTANCE})" if untuned else "")
          + "; leaking: rejected by the leak check of --pde-validate (leaks.py)")
    return 0


def _reference_agreement(args) -> int:
    """Run the strong oracle on the reference-based records (with --all-records: on every
    record) and keep its error and time: against a reference, a track's tau_acc should
    measure its own discretization, not the distance between its oracle and the library
    that made the reference; on every record, the strong oracle is the anchor that must
    pass (issue 11). --no-run reads the verdicts an earlier run left in --output."""
    import math

    import pytest

    from .calibration import CalibrationStore, case_fingerprint
    from .cases import load_cases
    from .evaluation import load_verdict

    output, code = Path(args.output), 0
    if not args.no_run:
        marker = [] if args.all_records else ["-m", "reference_numerical"]
        code = pytest.main(["-p", "no:cacheprovider", *marker, f"--pde-library={args.library}",
                            f"--pde-cases={args.cases}", f"--pde-submissions={args.oracle}", "--pde-runs=1",
                            f"--pde-output={output}", "--pde-resume", "-q", "-rfE", *args.pytest_args])
    store, measured = CalibrationStore(Path(args.calibrations)), {}
    for _, _, record in load_cases(Path(args.cases)):
        if not args.all_records and record.evaluation_metadata.construction_method != "reference_numerical":
            continue
        verdict = load_verdict(output / args.library / record.id)
        fingerprint = case_fingerprint(record, args.library)
        if verdict and verdict.case_fingerprint == fingerprint and verdict.error is not None \
                and math.isfinite(verdict.error):
            measured[record.id] = {"e_strong": verdict.error, "t_strong": verdict.t_agent,
                                   "outcome": verdict.outcome, "fingerprint": fingerprint,
                                   "oracle": verdict.submission_fingerprint}
    path = store.write_strong_oracle(args.library, measured)
    print(f"{path}: the strong oracle's error (and time) on {len(measured)} records "
          f"(pdebench calibration-summary compares them with tau_acc and tau_time)")
    return int(code)


def _strong_figures(entry: dict | None) -> dict:
    entry = entry or {}
    return {"e_strong": entry.get("e_strong"), "t_strong": entry.get("t_strong"), "outcome_strong": entry.get("outcome")}


def _calibration_summary(args) -> int:
    from .calibration import Alphas, CalibrationStore
    from .cases import load_cases
    from .report import calibration_tables
    from .speed import baselines_line
    from .sources.folder import oracle_fingerprint

    store = CalibrationStore(Path(args.calibrations))
    rows = []
    for _, _, record in load_cases(Path(args.cases)):
        thresholds = store.thresholds(record, args.library, Alphas())
        if thresholds is not None and args.library in record.supported_libraries:
            rows.append({"family": record.family, "method": record.evaluation_metadata.construction_method,
                         "e_base": thresholds.e_base, "t_base": thresholds.t_base, "tau_acc": thresholds.tau_acc,
                         "tau_time": thresholds.tau_time, "id": record.id,
                         **_strong_figures(store.strong_oracle(record, args.library,
                                                               oracle_fingerprint(record, args.library))),
                         "e_strong_build": (_reference_build_gap(record, args.library) or {}).get("e_strong")})
    if not rows:
        print(f"no calibrated cases for {args.library} in {args.cases}", file=sys.stderr)
        return 1
    family_table, distribution, targets = calibration_tables(rows, args.format)
    print(f"{args.library} on {store.machine_for(args.library)}: {len(rows)} calibrated cases\n\n{family_table}\n\n{distribution}"
          f"\n\n{baselines_line({row['id']: store.entries(args.library)[row['id']] for row in rows})}"
          f"\n\nagainst the paper (issue 11's targets, set for the DOLFINx track):\n{targets}")
    return 0


def _records(cases: str):
    from .cases import load_cases

    return [record for _, _, record in load_cases(Path(cases))]


def _prompt(args) -> int:
    from .cases import agent_view
    from .prompts import single_shot_prompt
    from .scaffolds import scaffold_for

    record = next((r for r in _records(args.cases) if r.id == args.case_id), None)
    if record is None:
        print(f"no case {args.case_id!r} in {args.cases}", file=sys.stderr)
        return 2
    view = agent_view(record, args.library)
    scaffold = scaffold_for(view) if args.template else None
    sys.stdout.write(single_shot_prompt(view, record.evaluation_config.timeout_sec, Path(args.guides), scaffold))
    return 0


def _prompt_cost(args) -> int:
    from tabulate import tabulate

    from .cases import agent_view
    from .llm.registry import load_registry, resolve_model
    from .llm.tokens import DEFAULT_OUTPUT_PER_CALL, PAPER_OUTPUT_PER_CALL, count_tokens, tokenizer_name
    from .prompts import single_shot_prompt

    tokens, calls = 0, 0
    per_library: dict[str, list[int]] = {}
    for record in _records(args.cases):
        for library in record.supported_libraries:
            if args.library and library not in args.library:
                continue
            prompt = single_shot_prompt(agent_view(record, library), record.evaluation_config.timeout_sec,
                                        Path(args.guides))
            count = count_tokens(prompt)
            per_library.setdefault(library, []).append(count)
            tokens, calls = tokens + count, calls + 1
    print(f"prompt tokens ({tokenizer_name()}):")
    print(tabulate([[library, len(c), sum(c), round(sum(c) / len(c)), min(c), max(c)] for library, c in
                    sorted(per_library.items())], headers=["library", "calls", "input tokens", "mean", "min", "max"]))
    rows = []
    for name in load_registry():
        spec = resolve_model(name)
        out_per_call = PAPER_OUTPUT_PER_CALL.get(name, DEFAULT_OUTPUT_PER_CALL)
        rows.append([name, spec.model, spec.input_usd_per_mtok, spec.output_usd_per_mtok, round(out_per_call),
                     f"{spec.cost(tokens, 0):.2f}", f"{spec.cost(tokens, round(out_per_call * calls)):.2f}"])
    print(f"\nsingle-shot run of {calls} items, output per call from the paper's Table 10:")
    print(tabulate(rows, headers=["model", "model id", "$/M in", "$/M out", "out/call", "input $", "total $"]))
    return 0


def _serve_podman(folder: Path) -> int:
    from .containers import start_podman_service

    service, host = start_podman_service(folder)
    print(f"podman's Docker API is up; in another shell:\n    export DOCKER_HOST={host}\n(Ctrl-C stops it)",
          flush=True)
    try:
        return service.wait()
    except KeyboardInterrupt:
        service.terminate()
        return 0


def _containers(args) -> int:
    from tabulate import tabulate

    from .containers import RECIPES_BY_TRACK, ContainerError, build, images, prune

    try:
        if args.action == "build":
            for track in args.tracks or ["dolfinx", "dealii"]:
                print(build(track, base_from_registry=args.base_from_registry))
        elif args.action == "engine":
            return _serve_podman(Path(args.folder))
        elif args.action == "list":
            rows = [[r["tag"], r["id"], r["size_mb"], "" if r["current"] else "old recipe"] for r in images()]
            print(tabulate(rows, headers=["image", "id", "MB", ""]) if rows else "no pdebench images")
            print("\nrecipes: " + ", ".join(recipe.tag for recipe in RECIPES_BY_TRACK.values()))
        else:
            removed = prune()
            print("\n".join(f"removed {tag}" for tag in removed) or "nothing to remove")
    except ContainerError as exc:
        print(f"pdebench containers: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pdebench", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    schema = commands.add_parser("schema", help="write or check cases/schema.json")
    schema.add_argument("--path", default="cases/schema.json")
    schema.add_argument("--check", action="store_true")
    schema.set_defaults(func=_schema)

    starter = commands.add_parser("build-starter", help="derive the starter cases with sympy")
    starter.add_argument("--output", default="tests/cases/starter.jsonl")
    starter.add_argument("--upstream", default=UPSTREAM_FILE)
    starter.set_defaults(func=_build_starter)

    calibrate = commands.add_parser("calibrate", help="measure e_base and t_base with the oracle on this machine")
    calibrate.add_argument("--library", default="dolfinx")
    calibrate.add_argument("--cases", default="cases")
    calibrate.add_argument("--oracle", default="submissions/oracle")
    calibrate.add_argument("--calibrations", default="calibrations")
    calibrate.add_argument("--runs", type=int, default=3, help="timed runs averaged into t_base (default 3)")
    calibrate.add_argument("--cluster", metavar="ADDRESS", help="calibrate on the workers of a Dask cluster "
                           "(tcp://HOST:PORT or a scheduler file): one calibration file per kind of machine")
    calibrate.add_argument("--update-cases", action="store_true", help="also materialize thresholds in the records")
    calibrate.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    calibrate.set_defaults(func=_calibrate)

    materialize = commands.add_parser("materialize", help="write this machine's calibration into the records "
                                      "(after calibrating in parts)")
    materialize.add_argument("--library", default="dolfinx")
    materialize.add_argument("--cases", default="cases")
    materialize.add_argument("--calibrations", default="calibrations")
    materialize.set_defaults(func=_materialize_command)

    table = commands.add_parser("table", help="outcome table from a pytest JSON report")
    table.add_argument("report")
    table.add_argument("--format", default="github", help="tabulate format (github, latex, simple, ...)")
    table.set_defaults(func=_table)

    merge = commands.add_parser("merge", help="join the JSON reports of the N shards of a run (--pde-shard) into one")
    merge.add_argument("shards", nargs="+", metavar="SHARD_REPORT", help="the N shards' --json-report files")
    merge.add_argument("--out", required=True, help="the merged report (then `pdebench report` reads it as one run)")
    merge.set_defaults(func=_merge)

    report = commands.add_parser("report", help="the paper's tables and figures from stored runs (never re-runs)")
    report.add_argument("runs", nargs="+", metavar="[NAME=]RUN",
                        help="pytest JSON reports (--json-report) or verdict files (JSON lines); NAME= names the system")
    report.add_argument("--out", default="reports/report", help="the report folder (default reports/report)")
    report.add_argument("--no-figures", action="store_true", help="tables only (no matplotlib)")
    report.set_defaults(func=_report)

    upstream = commands.add_parser("import-upstream", help="convert the public PDEAgent-Bench case file")
    upstream.add_argument("source", nargs="?", default=UPSTREAM_FILE)
    upstream.add_argument("--output", default="reports/upstream/cases.jsonl",
                          help="where to write (keep it out of git: derived from CC BY data)")
    upstream.set_defaults(func=_import_upstream)

    suite = commands.add_parser("build-suite", help="the full suite from build/design_matrix.toml")
    suite.add_argument("--output", default="cases/suite.jsonl",
                       help="where to write (built fields of existing records are kept)")
    suite.add_argument("--upstream", default=UPSTREAM_FILE, help="the upstream records the calibration "
                       "settings are drawn from (read, never committed)")
    suite.set_defaults(func=_build_suite)

    configs = commands.add_parser("calibration-configs", help="draw the records' calibration settings again "
                                  "(in place; after a change of RESOLUTION_SCALE)")
    configs.add_argument("cases", nargs="?", default="cases")
    configs.add_argument("--upstream", default=UPSTREAM_FILE)
    configs.add_argument("--refine", metavar="LIBRARY", help="instead: finer meshes where this machine's "
                         "calibration of LIBRARY has e_base >= 1e-3")
    configs.add_argument("--coarsen", metavar="LIBRARY", help="instead: coarser meshes where this machine's "
                         "calibration of LIBRARY is more accurate than its strong oracle (reference-agreement "
                         "--all-records)")
    configs.add_argument("--own", action="store_true", help="with --coarsen: change that library's setting "
                         "only (its strong oracle is weaker than the others'; the source says 'for LIBRARY')")
    configs.add_argument("--calibrations", default="calibrations")
    configs.add_argument("--family", action="append", help="only the records of this family (repeatable)")
    configs.set_defaults(func=_calibration_configs)

    summary = commands.add_parser("calibration-summary", help="e_base / tau_acc / t_base tables (paper's 6 and 7)")
    summary.add_argument("--library", default="dolfinx")
    summary.add_argument("--cases", default="cases")
    summary.add_argument("--calibrations", default="calibrations")
    summary.add_argument("--format", default="simple")
    summary.set_defaults(func=_calibration_summary)

    agreement = commands.add_parser("reference-agreement", help="the strong oracle against the references of "
                                    "the reference-based records (checked by calibration-summary)")
    agreement.add_argument("--library", default="dolfinx")
    agreement.add_argument("--cases", default="cases")
    agreement.add_argument("--oracle", default="submissions/oracle")
    agreement.add_argument("--calibrations", default="calibrations")
    agreement.add_argument("--output", default="reports/calibration/strong", help="the runs' audit folders "
                           "(finished items are reused)")
    agreement.add_argument("--all-records", action="store_true", help="every record, not only the "
                           "reference-based ones (the strong oracle as the anchor that must pass)")
    agreement.add_argument("--no-run", action="store_true", help="read the verdicts already in --output "
                           "(a run of the oracle with the same cases, e.g. benchmarks/validity.py's)")
    agreement.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    agreement.set_defaults(func=_reference_agreement)

    audit = commands.add_parser("leak-audit", help="records whose agent-visible data give the answer away")
    audit.add_argument("cases")
    audit.add_argument("--library", default="dolfinx", help="whose tau_acc decides a pass")
    audit.add_argument("--format", default="simple")
    audit.set_defaults(func=_leak_audit)

    references = commands.add_parser("build-references", help="numerical references (needs DOLFINx)")
    references.add_argument("cases")
    references.add_argument("--oracle", default="submissions/oracle/dolfinx")
    references.add_argument("--family", action="append", help="only these families (repeatable)")
    references.add_argument("--rebuild", action="store_true", help="also records that have a reference")
    references.set_defaults(func=_build_references)

    prompt = commands.add_parser("prompt", help="print the prompt of a case")
    prompt.add_argument("case_id")
    prompt.add_argument("--library", default="dolfinx")
    prompt.add_argument("--cases", default="cases")
    prompt.add_argument("--guides", default="guides")
    prompt.add_argument("--template", action="store_true", help="the template-guided prompt (with a scaffold)")
    prompt.set_defaults(func=_prompt)

    cost = commands.add_parser("prompt-cost", help="prompt tokens per item and a run's cost per model")
    cost.add_argument("--library", action="append", help="only these tracks (repeatable)")
    cost.add_argument("--cases", default="cases")
    cost.add_argument("--guides", default="guides")
    cost.set_defaults(func=_prompt_cost)

    containers = commands.add_parser("containers", help="the tracks' container images (--pde-sandbox=docker)")
    containers.add_argument("action", choices=("build", "list", "prune", "engine"),
                            help="engine: serve podman's Docker API here (podman and runc from apt)")
    containers.add_argument("tracks", nargs="*", help="build: these tracks (default dolfinx and dealii; "
                            "firedrake builds PETSc, about 25 min)")
    containers.add_argument("--base-from-registry", action="store_true", help="build FROM debian:<release> "
                            "instead of a local debootstrap base")
    containers.add_argument("--folder", default="/run/pdebench-podman", help="engine: where the socket goes")
    containers.set_defaults(func=_containers)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
