"""The ansatz-fit attacker run offline on a record: how close a solver that fits the data's
own functions, with no mesh and no solve, lands to the record's answer.

A record is only as hard as the best shortcut that gets under its tau_acc. The attacker
(``ATTACKER``, a solver file the package ships: least squares in the span of the data's terms
and low-order polynomials, fitted to the PDE residual and the boundary and initial data)
runs in a forked child in a scratch folder, on the agent's view of the record, and its
solution is judged as the accuracy gate judges one: the contract's checks, then the
relative L2 error on the valid grid points against the record's reference. The margin of
a record is that error over the largest (loosest) tau_acc of its tracks: under 1 the attacker
PASSes; ``ATTACK_MARGIN`` is what a record must keep (``pdebench attack-audit``), so that a
somewhat better fit still fails.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import tempfile
import threading
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

from .. import gates, metrics
from ..bundled import ATTACKER
from ..cases import CaseRecord, agent_view
from ..grid import EvalGrid, valid_mask
from ..reference import reference_fields

# what a record keeps between the attacker and its tau_acc: the attacker's error at 1.5-2 x
# tau_acc on many Burgers records of the first converted suite meant that a fit with a few
# more terms would pass them
ATTACK_MARGIN = 3.0
WITHIN = "the ansatz-fit attacker comes within"  # the start of a build's reason to refuse a record
TIMEOUT_SEC = 120.0


@dataclass
class Attack:
    """The attacker on one record: its error (None where it produced no judged solution,
    ``reason`` says why), its wall and CPU seconds, and the margin (error over the record's
    largest tau_acc of its tracks; None without thresholds)."""

    case_id: str
    family: str
    error: float | None
    margin: float | None
    seconds: float | None
    cpu_seconds: float | None
    reason: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def attacker_path() -> Path:
    """The attacker's solver file (``data/attacker/solver.py`` in the package)."""
    return ATTACKER


def load_attacker(path: Path | None = None) -> ModuleType:
    """The attacker's module, imported once: each record forks from this process, so its
    imports (sympy, numpy) are paid once per audit, not per record."""
    path = path or attacker_path()
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no attacker solver there (pass its path)")
    spec = importlib.util.spec_from_file_location("ansatz_fit_attacker", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def builds_attacker(log=None) -> ModuleType | None:
    """The attacker the builds keep their margin from (``attacker_path``), or None where the
    package has none (an sdist built without it): builds then go without its rule, and
    ``log`` is told so."""
    path = attacker_path()
    if path.is_file():
        return load_attacker(path)
    if log:
        log(f"no attacker at {path}: this build goes without its margin")
    return None


def loosest_tau_acc(record: CaseRecord) -> float | None:
    """The largest tau_acc of the record's tracks: the attacker's answer is the same on every
    track, so it passes first where the threshold is loosest."""
    taus = [t.tau_acc for t in record.evaluation_metadata.thresholds.values()]
    return max(taus) if taus else None


def _solve_in_child(attacker: ModuleType, case_spec: dict, folder: str, queue) -> None:
    os.chdir(folder)
    started, cpu = time.perf_counter(), time.process_time()
    try:
        attacker.solve(case_spec)
        status = ""
    except Exception as exc:  # noqa: BLE001 - any failure of the attacker is its result
        status = f"{type(exc).__name__}: {str(exc)[:200]}"
    # CPU seconds too: on a shared machine the wall clock also counts the neighbours' work
    queue.put((status, time.perf_counter() - started, time.process_time() - cpu))


def _forked(attacker: ModuleType, case_spec: dict, folder: str, timeout: float) -> tuple | str:
    """(status, seconds, CPU seconds) of the attacker in a fork of this process, or why none."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_solve_in_child, args=(attacker, case_spec, folder, queue))
    with warnings.catch_warnings():
        # Python counts the BLAS library's threads too; they are safe to fork (it registers
        # fork handlers); the caller forks only when no other Python thread runs
        warnings.simplefilter("ignore", DeprecationWarning)
        child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return f"no answer within {timeout:.0f} s"
    if queue.empty():
        return f"the attacker's process died (exit code {child.exitcode})"
    return queue.get()


def spawned_solve(solver: Path, case_spec: dict, folder: str, timeout: float) -> tuple | str:
    """The same in a new interpreter (its imports paid again)."""
    import subprocess
    import sys

    Path(folder, "case_spec.json").write_text(json.dumps(case_spec))
    code = (
        "import json, runpy, time; started, cpu = time.perf_counter(), time.process_time(); "
        f"runpy.run_path({str(solver)!r})['solve'](json.load(open('case_spec.json'))); "
        "print(json.dumps([time.perf_counter() - started, time.process_time() - cpu]))"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout:.0f} s"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1][:300]
    seconds, cpu = json.loads(done.stdout.strip().splitlines()[-1])
    return "", seconds, cpu


def attack(
    attacker: ModuleType, record: CaseRecord, case_dir: Path, library: str = "dolfinx", timeout: float = TIMEOUT_SEC
) -> Attack:
    """The attacker on ``record``'s agent view for ``library`` (the tracks see the same
    case_spec), judged against its reference (``case_dir`` holds its files)."""
    case_spec = agent_view(record, library)["case_spec"]
    result = Attack(record.id, record.family, None, None, None, None)
    with tempfile.TemporaryDirectory(prefix="attack-") as folder:
        if threading.active_count() == 1:
            ran = _forked(attacker, case_spec, folder, timeout)
        else:  # a fork of a threaded process (pytest's timeout thread) may deadlock: a fresh one
            ran = spawned_solve(Path(str(attacker.__file__)), case_spec, folder, timeout)
        if isinstance(ran, str):
            result.reason = ran
            return result
        status, result.seconds, result.cpu_seconds = ran
        if status:
            result.reason = status
            return result
        judged = judge_folder(record, case_spec, Path(folder), case_dir)
    if isinstance(judged, str):
        result.reason = judged
        return result
    result.error = judged
    tau = loosest_tau_acc(record)
    result.margin = result.error / tau if tau else None
    return result


def judge_folder(record: CaseRecord, case_spec: dict, folder: Path, case_dir: Path) -> float | str:
    """The relative L2 error of the solution.npz in ``folder`` against the record's reference,
    as the accuracy gate judges it (the contract's checks first); or why there is none."""
    grid = EvalGrid.from_spec(case_spec["eval_grid"])
    valid = valid_mask(case_spec, grid)
    try:
        raw = Path(folder, "solution.npz").read_bytes()
        solution = gates.read_solution(raw, record.case_spec.output.arrays, grid.axis_names, grid.shape, valid)
    except (OSError, gates.GateFailure) as failure:
        return getattr(failure, "reason", None) or str(failure)
    return metrics.relative_l2_error(solution, reference_fields(record, grid, case_dir), valid)


def within_reason(margin: float) -> str:
    """Why a build refuses a record the attacker comes too close to."""
    return f"{WITHIN} {margin:.2f} x tau_acc (at least {ATTACK_MARGIN:g} kept)"
