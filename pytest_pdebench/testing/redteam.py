"""The red-team probes as checks any sandbox backend can be run through: submissions that try
to pass without solving, through the real plugin, each of which must get the honest verdict
(``tests/test_redteam.py`` runs them on bubblewrap, the warm and the cold runner, containers
and a Dask cluster; a backend another plugin adds should pass them too):

    from pytest_pdebench.testing.redteam import python_probe_problems
    problems = python_probe_problems(folder, "dolfinx", ["--pde-sandbox=mine", "-n", "2"])
    assert not problems, problems   # probe: what it got instead of its honest verdict

* ``python_probe_problems``: outputs that are not regular files of the run's own folder
  (links to a stored answer, a FIFO, a device, a folder, an oversize file, a decompression
  bomb): F-Exec; a correct but slow solver that memoises its answer in every place a run can
  write (caches, HOME, TMPDIR, the run folder, /dev/shm, files named like compiled kernels):
  F-Time, in this session and the next; writes aimed at the audit folder and a child that
  rewrites the output after the solver exits: the verdict of what the solver itself left.
* ``cpp_probe_problems``: the deal.II track's compiled programs: a linked output, a memo, a
  program that tells the gated run from the timed ones by its mount table.
* ``exploit_problems``: runs that tell which run they are, carry data between runs (kernel
  stores, a session keyring), break a reader, or widen their CPU affinity, from a harness that
  holds a session keyring.

Each runs pytest in a subprocess (``testing.run_track``) over toy copies of poisson_basic
calibrated at E_BASE and T_BASE (``testing.toy_cases``), in ``folder``; the probes are
``testing.probes``'s.
"""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np

from . import run_track, toy_cases
from .probes import (
    E_BASE,
    EXPLOIT_PRELUDE,
    KEYRING_LAUNCHER,
    NX,
    NY,
    PROBE_PRELUDE,
    T_BASE,
    TWO_CORES,
    cpp_probes,
    exploit_probes,
    in_words,
    python_probes,
    stored_answer,
)


def probe_solvers(probes: dict[str, tuple[str, str, str]], prelude: str = PROBE_PRELUDE) -> dict[str, str]:
    """Solver files: the prelude, then ``solve(case_spec)`` with each probe's body."""
    return {
        case_id: prelude + "\ndef solve(case_spec):\n" + textwrap.indent(body, "    ") + "\n"
        for case_id, (_, _, body) in probes.items()
    }


def wrong_verdicts(
    probes: dict[str, tuple[str, str, str]], outcomes: dict[str, dict], copies_out: bool
) -> dict[str, str]:
    """Each probe whose verdict is not its honest one (outcome and words of the reason): what it got."""
    problems = {}
    for case_id, (outcome, words, _) in probes.items():
        verdict = outcomes.get(case_id)
        if verdict is None:
            problems[case_id] = "no verdict"
        elif verdict["outcome"] != outcome or in_words(words, copies_out) not in (verdict["reason"] or ""):
            problems[case_id] = f"{verdict['outcome']} ({verdict['reason']}), not {outcome} ({words!r})"
    return problems


def _session_failed(done, outcomes: dict) -> dict[str, str]:
    return {} if outcomes else {"session": f"no verdicts: {done.stdout[-3000:]} {done.stderr[-1000:]}"}


def python_probe_problems(
    folder: Path, library: str, backend: list[str], machine: str | None = None, copies_out: bool = False
) -> dict[str, str]:
    """The Python probes on ``library`` (dolfinx or firedrake) with ``backend``'s pytest
    options, twice (the memo probes again in a second session: nothing survives in a kept
    store). ``machine``: the calibration key the runs see (a container's); ``copies_out``: the
    backend copies only regular files out. Returns probe: what went wrong (empty: all honest)."""
    probes = python_probes(library, stored_answer(folder / "stored"))
    stored_answer(folder / "oracle" / library / "link_relative")  # another source's audit folder
    cases, submissions = toy_cases(folder, library, probe_solvers(probes), E_BASE, T_BASE, NX, NY, machine)
    calibrations = f"--pde-calibrations={folder / 'calibrations'}"
    done, outcomes = run_track(folder, library, cases, submissions, calibrations, *backend)
    problems = _session_failed(done, outcomes) or wrong_verdicts(probes, outcomes, copies_out)
    if not outcomes:
        return problems
    # what the audit folders hold is what the harness judged, not what was planted or rewritten
    audit = folder / "out" / library
    with np.load(audit / "lingering_child" / "solution.npz") as data:
        if data["u"].any():
            problems["lingering_child: audit"] = "the audit folder holds the output the child rewrote"
    if json.loads((audit / "audit_write" / "verdict.json").read_text())["outcome"] != "F-Time":
        problems["audit_write: audit"] = "the audit folder's verdict.json is not the harness's"
    if (audit / "audit_write" / "solution.npz").read_bytes().startswith(b"{"):
        problems["audit_write: audit"] = "the audit folder's solution.npz is the one the solver wrote there"
    done, again = run_track(folder, library, cases, submissions, calibrations, "-k", "memo", *backend)
    for case_id in (case_id for case_id in probes if case_id.startswith("memo")):
        verdict = again.get(case_id)
        if verdict is None or verdict["outcome"] != "F-Time":
            said = f"{verdict['outcome']} ({verdict['reason']})" if verdict else "no verdict"
            problems[f"{case_id}: second session"] = said
    return problems


def cpp_probe_problems(
    folder: Path, backend: list[str], machine: str | None = None, copies_out: bool = False
) -> dict[str, str]:
    """The compiled probes on the deal.II track, in two sessions (the first builds them, the
    second finds them in the compile cache), against a baseline that compiled in 0.2 s (so a
    build not from a cache is flagged: work done at compile time is not timed)."""
    probes = cpp_probes(stored_answer(folder / "stored"))
    fresh = f"// {uuid.uuid4().hex}\n"  # not in the compile cache: session 1 builds them
    cases, submissions = toy_cases(
        folder, "dealii", {k: fresh + v[2] for k, v in probes.items()}, E_BASE, T_BASE, NX, NY, machine
    )
    calibrations = f"--pde-calibrations={folder / 'calibrations'}"
    calibration_file = next((folder / "calibrations" / "dealii").glob("*.json"))
    stored = json.loads(calibration_file.read_text())
    for entry in stored["cases"].values():
        entry["compile_sec"] = 0.2
    calibration_file.write_text(json.dumps(stored))
    problems: dict[str, str] = {}
    for session in (1, 2):
        done, outcomes = run_track(folder, "dealii", cases, submissions, calibrations, *backend)
        found = _session_failed(done, outcomes) or wrong_verdicts(probes, outcomes, copies_out)
        problems.update({f"{case_id}: session {session}": said for case_id, said in found.items()})
        for case_id, verdict in outcomes.items():
            built = verdict["compile_sec"] is not None and not verdict["compile_cached"]
            flagged = any("work done at compile time is not timed" in flag for flag in verdict["flags"])
            if flagged != (built and verdict["outcome"] != "F-Exec"):
                problems[f"{case_id}: session {session} flags"] = str(verdict["flags"])
            if built != (session == 1 and verdict["compile_sec"] is not None):
                problems[f"{case_id}: session {session} compile"] = "built" if built else "not built"
    return problems


def exploit_problems(
    folder: Path,
    library: str,
    backend: list[str],
    machine: str | None = None,
    copies_out: bool = False,
    cores: bool = True,
) -> dict[str, str]:
    """The exploit probes (three timed runs, each judged) from a harness that holds a session
    keyring; ``backend`` should pin its workers (``-n 2``). ``cores``: also that no verdict
    is flagged, and that one unpinned process whose solver works on both cores is (a
    measurement of the sandbox's CPU accounting; bubblewrap's)."""
    probes = exploit_probes()
    solvers = probe_solvers(probes, _fresh(EXPLOIT_PRELUDE))
    solvers["two_cores"] = probe_solvers({"two_cores": ("", "", TWO_CORES)}, _fresh(EXPLOIT_PRELUDE))["two_cores"]
    cases, submissions = toy_cases(folder, library, solvers, E_BASE, T_BASE, NX, NY, machine, t_first=T_BASE)
    calibrations = f"--pde-calibrations={folder / 'calibrations'}"
    launcher = (sys.executable, "-c", KEYRING_LAUNCHER)
    done, outcomes = run_track(folder, library, cases, submissions, calibrations, "--pde-runs=3", "-k",
                               "not two_cores", *backend, launcher=launcher)  # fmt: skip
    problems = _session_failed(done, outcomes) or wrong_verdicts(probes, outcomes, copies_out)
    if not outcomes:
        return problems
    info = outcomes["affinity_widen"]["solver_info"]
    if info != {"widen": "PermissionError", "cores": 1}:
        problems["affinity_widen: solver_info"] = str(info)
    if not outcomes["skip_by_store_library"]["timed_errors"][0] > 0.5:  # the timed run's zeros
        problems["skip_by_store_library: timed run"] = str(outcomes["skip_by_store_library"]["timed_errors"])
    if not any("libffcx_forms_" in name for name in outcomes["answer_in_kernel_names"]["cache_dropped"]):
        problems["answer_in_kernel_names: cache"] = "the planted kernel names were not dropped"
    if cores:
        flagged = {case_id: v["flags"] for case_id, v in outcomes.items() if v["flags"]}
        if flagged:  # one core each: none flagged
            problems["flags"] = str(flagged)
        unpinned = backend[2:] if backend[:1] == ["-n"] else backend  # one process, not pinned
        done, outcomes = run_track(folder, library, cases, submissions, calibrations, "-k", "two_cores", *unpinned)
        verdict = outcomes.get("two_cores")
        if verdict is None:
            problems["two_cores"] = "no verdict"
        else:
            window = verdict["timed_runs"][0]
            if not verdict["cores_used"] * window > 1.1:  # both processes' 0.6 s counted
                problems["two_cores: cores_used"] = str(verdict["cores_used"])
            elif window < 0.9 and not (verdict["flags"] and "cores over its window" in verdict["flags"][0]):
                problems["two_cores: flags"] = str(verdict["flags"])  # they ran side by side, unflagged
    return problems


def _fresh(prelude: str) -> str:
    """A prelude of this call's own (a fresh kernel store: what an earlier call stored would
    make a gated run the one that finds a planted file)."""
    return f"# {uuid.uuid4().hex}\n" + prelude
