"""What lifting the manufactured u out of a case's text gains, measured on one record: the
lifting rung (``submissions/lifting/dolfinx``: the textbook solve of only w = u - S, S the
closed form found in the text) run plain and lifted on the same mesh and element, each in a
fresh interpreter in a scratch folder, and judged as the attacker is (``attack.judge_folder``).

The setting is the build's own: of the pricing settings the part's build stored
(``build.lifting_gain``: the calibration's, and the coarsest P1 and P2 the gate admits), the
P1 or P2 one whose estimate is the largest; the measured gain (plain error over lifted error)
stands beside that estimate (``pdebench attack-audit --lifting-sample``). The rung's fixed
mesh takes the setting's cells per side along the largest extent, in 2-D and 3-D alike.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ..bundled import bundled
from ..cases import CaseRecord, agent_view
from .attack import judge_folder, loosest_tau_acc, spawned_solve
from .pricing import SETTING

RUNG = "submissions/lifting/dolfinx"
TIMEOUT_SEC = 600.0  # a 3-D or nonlinear textbook solve at a fine setting takes minutes here


@dataclass
class Lifted:
    """One record's measurement: both errors over the loosest tau_acc, or why there is none."""

    case_id: str
    family: str
    setting: str | None
    estimate: float | None  # the build's estimate at that setting
    plain: float | None = None
    lifted: float | None = None
    reason: str | None = None

    @property
    def gain(self) -> float | None:
        return self.plain / self.lifted if self.plain and self.lifted else None

    def as_dict(self) -> dict:
        return dict(asdict(self), gain=self.gain)


def worst_setting(record: CaseRecord) -> tuple[str, float] | None:
    """The P1/P2 pricing setting with the build's largest estimate, and that estimate."""
    part = record.evaluation_metadata.solve_only
    gains = (part.build.get("lifting_gain") or {}) if part is not None else {}
    settings = [(gain, name) for name, gain in gains.items() if SETTING.match(name)]
    if not settings:
        return None
    gain, name = max(settings)
    return name, gain


def rung_folder(where: Path, cells_2d: int, cells_3d: int, degree: int, lift: bool, rung: Path | None = None) -> Path:
    """``where`` as a copy of the rung to run: its files linked (links already there replaced),
    its ``_setting.py`` written with this mesh, element and LIFT. Returns ``where``."""
    where.mkdir(parents=True, exist_ok=True)
    for source in Path(rung or bundled(RUNG)).glob("*.py"):
        if source.name != "_setting.py":
            link = where / source.name
            link.unlink(missing_ok=True)
            link.symlink_to(source.resolve())
    (where / "_setting.py").write_text(f"CELLS_2D, CELLS_3D, DEGREE, LIFT = {cells_2d}, {cells_3d}, {degree}, {lift}\n")
    return where


def measure(record: CaseRecord, case_dir: Path, rung: Path | None = None) -> Lifted:
    """The rung on ``record`` plain and lifted at its worst pricing setting."""
    found = worst_setting(record)
    result = Lifted(record.id, record.family, *(found or (None, None)))
    if found is None:
        result.reason = "no pricing setting stored (a part built before the rule, or none)"
        return result
    degree, cells = (int(n) for n in SETTING.match(found[0]).groups())  # type: ignore[union-attr]
    tau = loosest_tau_acc(record)
    case_spec = agent_view(record, record.supported_libraries[0])["case_spec"]
    for lift in (False, True):
        with tempfile.TemporaryDirectory(prefix="lifting-") as folder:
            rung_folder(Path(folder), cells, cells, degree, lift, rung)  # the pricing's count, 2-D or 3-D
            ran = spawned_solve(Path(folder, "solver.py"), case_spec, folder, TIMEOUT_SEC)
            judged = ran if isinstance(ran, str) else ran[0] or judge_folder(record, case_spec, Path(folder), case_dir)
        if isinstance(judged, str):
            result.reason = f"{'lifted' if lift else 'plain'}: {judged}"
            return result
        setattr(result, "lifted" if lift else "plain", judged / tau if tau else judged)
    return result
