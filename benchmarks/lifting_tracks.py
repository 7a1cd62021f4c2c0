"""Issue 66 on every track: what lifting u_m out of the text gains with each library's oracle.

    .venv/bin/python benchmarks/lifting_tracks.py --library dealii [--per-family 2] [--family F]
        [--id CASE ...] [--parts benchmarks/results/rebuild-issue-66] [--name NAME]

For a sample of priced records (``--per-family`` a family, spread over its ids, from the kept
parts of a part rebuild; 0: every one), the track's own oracle runs through the plugin in
calibration mode (its sandbox, one run) at the build's worst P1/P2 pricing setting
(``making.lifting.worst_setting``), twice: on the record as it is (plain), and on the problem
w = u - S solves, S the closed form the lifting rung finds in the text
(``submissions/lifting/dolfinx/_closed_form.py``): the forcing less L(S), the boundary and
initial data less S's (``lifted_spec``); the record's reference less S judges it. S is exact,
so the lifted solve errs by w's error alone. The gain is the plain error over the lifted one,
both absolute on the output arrays (each verdict's relative error times its
``reference_norm``: u's and w's over the grid's valid points).

The rewrite is exact for the linear families; Burgers and Navier-Stokes (L(S + w) is not
L(S) + L(w)) are left out here: the DOLFINx rung writes their forms in S + w
(``benchmarks/lifting_gain.py``); so is a nonlinear reaction on deal.II and Firedrake, whose
oracles read the reaction as a function of x, y and u, not of t (deal.II's parser holds u in
its time slot; Firedrake's converts it with no time): w's, R(w + S) - R(S), has t in every
transient record (tried on Firedrake: F-Exec). The pairs go to
benchmarks/results/lifting-tracks-<library>-<name>.json, which ``pdebench build-solve-only
--track-gains`` prices parts again with. Asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import sympy as sp
from tabulate import tabulate

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_pdebench.cases import CaseRecord  # noqa: E402
from pytest_pdebench.making.lifting import worst_setting  # noqa: E402
from pytest_pdebench.making.part_field import nonlinear  # noqa: E402
from pytest_pdebench.making.pricing import SETTING  # noqa: E402
from pytest_pdebench.testing import ORACLE, run_track  # noqa: E402

PARTS = REPO / "benchmarks" / "results" / "rebuild-issue-66"
OUT = REPO / "reports" / "lifting" / "tracks"
RESULTS = REPO / "benchmarks" / "results"
NONLINEAR = ("burgers", "navier_stokes")


def closed_form_module():
    """The rung's search for S (sympy and numpy only: no FEM library)."""
    path = REPO / "submissions" / "lifting" / "dolfinx" / "_closed_form.py"
    spec = importlib.util.spec_from_file_location("_closed_form", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def measurable(record: CaseRecord, library: str) -> bool:
    """Whether the rewrite for w is exact and the library's oracle reads it."""
    if record.family in NONLINEAR:
        return False
    return not (library in ("dealii", "firedrake") and nonlinear(record))


def sample(
    parts: Path, library: str, per_family: int, families: list[str] | None = None, ids: list[str] | None = None
) -> list[CaseRecord]:
    """``per_family`` kept, priced, linear records of each family the library runs (0: all),
    spread evenly over the family's records in id order (a family's ids run through its
    parameter sets and domains); only ``families`` and ``ids`` where given."""
    eligible = defaultdict(list)
    for path in sorted((parts / "parts").glob("*.json")):
        entry = json.loads(path.read_text())
        if not entry["kept"]:
            continue
        record = CaseRecord.model_validate(entry["record"])
        if (families and record.family not in families) or (ids and record.id not in ids):
            continue
        if measurable(record, library) and library in record.supported_libraries and worst_setting(record):
            eligible[record.family].append(record)
    chosen = []
    for found in eligible.values():
        count = min(per_family or len(found), len(found))
        chosen += [found[round(i * (len(found) - 1) / max(count - 1, 1))] for i in range(count)]
    return chosen


def at_setting(data: dict, library: str, label: str) -> dict:
    """The record with the library's calibration setting at the pricing's ``label`` (P1/n, P2/n)."""
    degree, cells = (int(n) for n in SETTING.match(label).groups())  # type: ignore[union-attr]
    settings = data["evaluation_metadata"]["calibration_config"]["settings"]
    settings[library] = {**settings[library], "element_degree": degree, "cells_per_side": cells}
    data["evaluation_metadata"].pop("thresholds", None)  # a calibration run measures them
    return data


def lifted_record(record: CaseRecord, cf) -> tuple[dict | None, str]:
    """The record of the problem w solves (its text rewritten, its manufactured u less S), or
    None where the rung finds no S, with the number of S's terms or why."""
    spec = record.case_spec_dict()
    s, rest = cf.closed_form(spec)
    parts = s if isinstance(s, list) else [s]
    if all(part == 0 for part in parts):
        return None, "no closed form found in the text"
    data = json.loads(record.model_dump_json(exclude_none=True))
    data["case_spec"] = cf.lifted_spec(spec, s, rest)
    manufactured = data["evaluation_metadata"]["manufactured_solution"]
    u = manufactured["u"]
    manufactured["u"] = ([cf.text(cf.parse(c) - p) for c, p in zip(u, s)] if isinstance(s, list)
                         else cf.text(cf.parse(u) - s))  # fmt: skip
    return data, f"{sum(len(sp.Add.make_args(p)) for p in parts if p != 0)} terms"


def run(library: str, records: list[tuple[CaseRecord, dict, dict]], parts: Path, name: str) -> dict:
    """The oracle in calibration mode on the plain and the lifted case files: case id -> verdicts."""
    found = {}
    for kind in ("plain", "lifted"):
        folder = OUT / f"{library}-{name}" / kind
        folder.mkdir(parents=True, exist_ok=True)
        references = folder / "references"
        if not references.exists():
            references.symlink_to((parts / "references").resolve())
        cases = folder / "cases.jsonl"
        cases.write_text("".join(json.dumps(pair[0 if kind == "plain" else 1]) + "\n" for _, *pair in records))
        done, outcomes = run_track(folder, library, cases, ORACLE, "--pde-calibrate", "--pde-runs=1",
                                   f"--pde-calibrations={folder / 'calibrations'}",
                                   timeout=7200 + 120 * len(records))  # fmt: skip
        if not outcomes:
            raise SystemExit(f"{library} {kind}: no verdicts\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
        found[kind] = outcomes
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--library", required=True, choices=("dolfinx", "firedrake", "dealii"))
    parser.add_argument("--per-family", type=int, default=2, help="records a family (0: every one)")
    parser.add_argument("--family", action="append", help="only these families (repeatable)")
    parser.add_argument("--id", action="append", help="only these records (repeatable): parts built again, say")
    parser.add_argument("--parts", type=Path, default=PARTS)
    parser.add_argument("--name", default="sample")
    args = parser.parse_args()
    cf = closed_form_module()
    chosen, skipped = [], []
    for record in sample(args.parts, args.library, args.per_family, args.family, args.id):
        label, estimate = worst_setting(record)  # type: ignore[misc]
        lifted, said = lifted_record(record, cf)
        if lifted is None:
            skipped.append(f"{record.id}: {said}")
            continue
        plain = at_setting(json.loads(record.model_dump_json(exclude_none=True)), args.library, label)
        chosen.append((record, plain, at_setting(lifted, args.library, label)))
        print(f"{record.id}: {label}, estimate {estimate:.2f}, S of {said}", flush=True)
    verdicts = run(args.library, chosen, args.parts, args.name)
    rows, pairs = [], []
    for record, _, _ in chosen:
        a, b = verdicts["plain"].get(record.id), verdicts["lifted"].get(record.id)
        if not a or not b or a.get("error") is None or b.get("error") is None:
            why = (a or {}).get("reason") or (b or {}).get("reason") or "no verdict"
            rows.append([record.family, record.id, worst_setting(record)[0], "-", "-", "-", str(why)[:60]])
            continue
        u_norm, w_norm = a["reference_norm"], b["reference_norm"]  # the relative errors' denominators
        gain = (a["error"] * u_norm) / max(b["error"] * w_norm, 1e-300)
        label, estimate = worst_setting(record)  # type: ignore[misc]
        part = record.evaluation_metadata.solve_only  # which build of the part was measured
        pairs.append({"case_id": record.id, "family": record.family, "digest": part.digest if part else None,
                      "setting": label, "estimate": estimate,
                      "plain_error": a["error"], "lifted_error_of_w": b["error"], "norm_u": u_norm,
                      "norm_w": w_norm, "gain": gain})  # fmt: skip
        rows.append([record.family, record.id, label, f"{estimate:.2f}", f"{a['error']:.3g}",
                     f"{b['error'] * w_norm / u_norm:.3g}", f"{gain:.2f}"])  # fmt: skip
    print(tabulate(rows, ["family", "record", "setting", "estimate", "plain error", "lifted error", "gain"],
                   tablefmt="github", disable_numparse=True))  # fmt: skip
    gains = [p["gain"] for p in pairs]
    if gains:
        over = f"over 2 x {sum(g > 2 for g in gains)}, over 3 x {sum(g > 3 for g in gains)}"
        print(f"\n{args.library}: {len(gains)} records, gain median {statistics.median(gains):.2f}, "
              f"largest {max(gains):.2f}; {over}")  # fmt: skip
    for line in skipped:
        print(f"  left out: {line}")
    out = RESULTS / f"lifting-tracks-{args.library}-{args.name}.json"
    out.write_text(json.dumps({"library": args.library, "pairs": pairs, "left_out": skipped}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
