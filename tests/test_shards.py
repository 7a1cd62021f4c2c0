"""--pde-shard=K/N and `pdebench merge`: a deterministic, balanced split of the selected
items, and N shard reports joined into the report of one run."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter

import pytest

from pytest_pdebench.cases import load_cases
from pytest_pdebench.shards import Shard, ShardError, assign, expected_cost, merge_reports
from pytest_pdebench.testing import NUMPY_PRELUDE, REPO, run_track, toy_cases


def suite_items(library: str = "dolfinx") -> list[tuple[str, str, float]]:
    return [(f"cases/suite.jsonl::{record.id}[{library}]", record.family, expected_cost(record, library, 3))
            for _, _, record in load_cases(REPO / "cases" / "suite.jsonl") if library in record.supported_libraries]


def test_every_item_lands_in_one_shard_and_the_split_ignores_order():
    items = suite_items()
    split = assign(items, 4)
    assert sorted(split) == sorted(nodeid for nodeid, _, _ in items)
    shuffled = items[:]
    random.Random(7).shuffle(shuffled)
    assert assign(shuffled, 4) == split


@pytest.mark.parametrize("library", ["dolfinx", "firedrake", "dealii"])
def test_shards_share_each_family_and_the_expected_time(library):
    items = suite_items(library)
    split = assign(items, 4)
    cost = Counter()
    for nodeid, family, seconds in items:
        cost[split[nodeid]] += seconds
    assert max(cost.values()) / (sum(cost.values()) / 4) < 1.02, cost
    for family in {family for _, family, _ in items}:
        shares = Counter(split[nodeid] for nodeid, f, _ in items if f == family)
        assert len(shares) == 4 and max(shares.values()) - min(shares.values()) <= 2, (family, shares)


@pytest.mark.parametrize("value", ["3", "0/4", "5/4", "a/b", "1/0"])
def test_a_bad_shard_option_says_what_is_expected(value):
    with pytest.raises(ShardError, match="K/N|between 1 and N"):
        Shard.parse(value)


EXACT = NUMPY_PRELUDE + "\ndef solve(case_spec):\n    x, y, u = grid(case_spec)\n    write(u, x, y)\n"


def test_three_shards_merge_into_the_items_of_one_run(tmp_path, dolfinx_available):
    from pytest_pdebench.analysis.runs import load_run

    names = [f"item_{index}" for index in range(7)]
    cases, submissions = toy_cases(tmp_path, "dolfinx", {name: EXACT for name in names})
    calibrations = f"--pde-calibrations={tmp_path / 'calibrations'}"
    selection = ("-k", "not item_6")  # shards of a -k selection merge into that selection
    reports = []
    for index in (1, 2, 3):
        folder = tmp_path / f"shard{index}"
        folder.mkdir()
        done, outcomes = run_track(folder, "dolfinx", cases, submissions, calibrations, *selection,
                                   f"--pde-shard={index}/3")
        assert outcomes and all(v["outcome"] == "PASS" for v in outcomes.values()), done.stdout[-2000:]
        reports.append(folder / "report-dolfinx.json")
    per_shard = [len(json.loads(path.read_text())["tests"]) for path in reports]
    assert sorted(per_shard) == [2, 2, 2]
    merged = tmp_path / "merged.json"
    done = subprocess.run([sys.executable, "-m", "pytest_pdebench.cli", "merge", *map(str, reports),
                           "--out", str(merged)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "merged 3 shards, 6 items (6 passed)" in done.stdout
    run = load_run(merged)
    assert sorted(row["case_id"] for row in run.rows) == names[:6]
    with pytest.raises(ShardError, match=r"missing \[2\]"):
        merge_reports([reports[0], reports[2]])
    with pytest.raises(ShardError, match=r"given twice \[2\]"):
        merge_reports([reports[0], reports[1], reports[1]])


def test_a_sample_takes_one_item_of_each_family_and_construction_method():
    """--pde-sample=N (the README's `make demo`): the same items in every session, N per
    track, family and way the answer is made."""
    from types import SimpleNamespace

    from pytest_pdebench.shards import sample

    records = [r for _, _, r in load_cases(REPO / "cases")]
    items = [SimpleNamespace(record=r, library=lib) for r in records for lib in r.supported_libraries]
    kept, left = sample(items, 1)
    groups = Counter((i.library, i.record.family, i.record.evaluation_metadata.construction_method) for i in items)
    assert len(kept) == len(groups) and len(kept) + len(left) == len(items)
    assert Counter((i.library, i.record.family, i.record.evaluation_metadata.construction_method)
                   for i in kept) == Counter(dict.fromkeys(groups, 1))  # fmt: skip
    assert [i.record.id for i in sample(list(reversed(items)), 1)[0]] == [i.record.id for i in reversed(kept)]
    two, _ = sample(items, 2)
    assert len(two) == sum(min(2, n) for n in groups.values())
    done = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
                           "--pde-submissions=submissions/oracle", "--pde-library=dolfinx", "--pde-sample=0"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0 and "--pde-sample: at least 1 item" in done.stderr
