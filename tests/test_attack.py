"""`pdebench attack-audit` (issue 46): the ansatz-fit attacker on every record, offline, and
the records whose answer it comes within the margin of."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from pytest_pdebench.testing import REPO, STARTER, record_dict, starter_records, write_jsonl


def audit(cases, out, *extra):
    return subprocess.run(
        [sys.executable, "-m", "pytest_pdebench.cli", "attack-audit", str(cases), "--out", str(out), *extra],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )  # fmt: skip


def test_the_audit_names_the_records_whose_answer_the_attacker_reaches(tmp_path):
    hidden = copy.deepcopy(starter_records()["poisson_basic"])  # its answer has a solve-only part
    part = hidden["evaluation_metadata"]["solve_only"]["path"]
    (tmp_path / part).parent.mkdir(parents=True)
    (tmp_path / part).write_bytes((STARTER / part).read_bytes())
    # the same record without its part: the exact solution is in the span of its data
    in_reach = record_dict("poisson_basic", new_id="poisson_in_reach")
    in_reach["evaluation_metadata"]["thresholds"] = hidden["evaluation_metadata"]["thresholds"]
    cases, out = write_jsonl(tmp_path / "cases.jsonl", [hidden, in_reach]), tmp_path / "attacks.jsonl"

    done = audit(cases, out)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {row["case_id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert rows["poisson_in_reach"]["margin"] < 1e-3 and rows["poisson_basic"]["margin"] >= 3, rows
    listed = done.stdout.split("under 3\n")[1]
    assert "poisson_in_reach: 0.00" in listed and "poisson_basic" not in listed
    assert "[1/2] poisson_basic: margin" in done.stdout

    again = audit(cases, out)  # read back from --out: nothing runs again, the same verdict
    assert again.returncode == 1 and "[1/2]" not in again.stdout
    assert "1 under 3\n  poisson_in_reach: 0.00" in again.stdout
    alone = write_jsonl(tmp_path / "alone.jsonl", [hidden])  # nothing within reach: the gate passes
    passed = audit(alone, tmp_path / "alone-attacks.jsonl")
    assert passed.returncode == 0 and "1 records' parts were built before the lifting gain was priced" in passed.stdout
    # a part whose build priced lifting u_m out of the text over the bound fails the gate, named
    hidden["evaluation_metadata"]["solve_only"]["build"]["lifting_gain"] = {"calibration": 1.4, "P1/9": 2.3}
    gaining = audit(write_jsonl(tmp_path / "gaining.jsonl", [hidden]), tmp_path / "alone-attacks.jsonl")
    assert gaining.returncode == 1 and "gains over 2 x on 1 records:\n  poisson_basic: 2.30 x" in gaining.stdout


def test_from_any_folder_the_default_attacker_is_the_bundled_one_and_a_missing_one_is_named(
    tmp_path, capsys, monkeypatch
):
    """The builds keep their margin wherever they run (a wheel carries the attacker as
    package data, data/attacker); a --solver that is not there is named."""
    from pytest_pdebench import cli
    from pytest_pdebench.making.attack import attacker_path, builds_attacker

    monkeypatch.chdir(tmp_path)
    assert attacker_path() == REPO / "pytest_pdebench" / "data" / "attacker" / "solver.py"
    assert builds_attacker() is not None
    cases = write_jsonl(tmp_path / "cases.jsonl", [record_dict()])
    assert cli.main(["attack-audit", str(cases), "--solver", "nowhere/solver.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pdebench attack-audit: nowhere/solver.py: no such file or folder; pass the attacker's")


def test_beside_another_thread_the_attacker_runs_in_a_fresh_interpreter(tmp_path):
    """A fork of a threaded process may deadlock: the same result from a new interpreter."""
    import threading

    from pytest_pdebench.making.attack import attack, load_attacker
    from pytest_pdebench.cases import CaseRecord

    record = CaseRecord.model_validate(record_dict())  # no part: the attacker reaches the answer
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        result = attack(load_attacker(), record, tmp_path)
    finally:
        release.set()
        other.join()
    assert result.reason == "" and result.error < 1e-8 and result.seconds > 0, result


def test_reprice_takes_the_parts_not_priced_by_what_lifting_gains_or_priced_over_the_bound(tmp_path):
    """``build-solve-only --reprice``: the parts built under an earlier rule (no estimate), and
    those whose estimate is over the 3 x ceiling, are built again; a part priced within it stays
    (one over 2 x too: every tier was tried for it)."""
    from pytest_pdebench.cli.suite import _not_priced

    records = []
    for name, gains in (("unpriced", None), ("within", {"calibration": 1.6, "P1/9": 2.4}), ("over", {"P2/7": 3.4})):
        data = copy.deepcopy(starter_records()["poisson_basic"])
        data["id"] = f"poisson_{name}"
        if gains:
            data["evaluation_metadata"]["solve_only"]["build"]["lifting_gain"] = gains
        records.append(data)
    bare = record_dict("poisson_basic", new_id="poisson_no_part")  # no part: nothing to build again
    cases = write_jsonl(tmp_path / "cases.jsonl", [*records, bare])
    assert _not_priced(cases) == {"poisson_unpriced", "poisson_over"}


def test_the_audit_measures_what_lifting_gains_on_a_sample(tmp_path, dolfinx_available):
    """``--lifting-sample 1``: the lifting rung plain and lifted at the build's worst P1/P2
    setting, both errors over tau_acc and their ratio beside the build's estimate; a measured
    gain over 3 x fails the gate."""
    import re

    hidden = copy.deepcopy(starter_records()["poisson_basic"])
    part = hidden["evaluation_metadata"]["solve_only"]["path"]
    (tmp_path / part).parent.mkdir(parents=True)
    (tmp_path / part).write_bytes((STARTER / part).read_bytes())
    hidden["evaluation_metadata"]["solve_only"]["build"]["lifting_gain"] = {"calibration": 1.2, "P1/16": 1.8,
                                                                            "P2/6": 1.1}
    cases = write_jsonl(tmp_path / "cases.jsonl", [hidden])
    done = audit(cases, tmp_path / "attacks.jsonl", "--lifting-sample", "1")
    row = re.search(r"poisson_basic\s+P1/16\s+1\.80\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", done.stdout)
    assert row, done.stdout + done.stderr
    plain, lifted, gain = map(float, row.groups())
    assert lifted < plain and gain == pytest.approx(plain / lifted, rel=0.02)
    assert (done.returncode == 1) == (gain > 3), done.stdout
