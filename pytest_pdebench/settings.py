"""What a session's options say about running items (``Settings``) and where an item's
audit folder goes. Kept apart from evaluation.py, which runs the items: collecting a
session's items needs these and none of the runs' modules (sandboxes, kernel stores,
the gates' arrays), so a pytest start does not import them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from .libraries import Runtime, RuntimeMissing, detect_runtime, get_track
from .thresholds import Alphas


@dataclass(frozen=True)
class Settings:
    output_dir: Path
    runs: int = 1
    timeout_sec: float | None = None  # overrides the case's timeout_sec
    memory_mb: int = 8192
    sandbox: str = "bubblewrap"
    calibrate: bool = False
    warm_up: bool = False  # the baseline pass: the oracle's kernels compiled on a coarse mesh first
    resume: bool = False
    alphas: Alphas = field(default_factory=Alphas)
    images: tuple[tuple[str, str], ...] = ()  # --pde-image: (track, image) run instead of the recipe's
    runner: str = "warm"  # --pde-runner: fork runs from a warmed zygote where the track and sandbox allow
    pictures: str = "failed"  # --pde-pictures: which items get fields.png (pictures.py)
    # --pde-cluster: each library's runtime as the workers report it, (library, version, image,
    # why it is missing); the controller itself may have none
    remote_runtimes: tuple[tuple[str, str, str | None, str | None], ...] = ()
    baseline: str = "stored"  # --pde-baseline: stored calibrations, or the oracle paired with each item
    oracle_dir: Path | None = None  # the oracle's solvers (paired baselines)
    variant_seed: int | None = None  # --pde-variants: the items run on their variants of this seed
    sibling: bool = False  # --pde-sibling: a passing solver also runs on a variant no prompt showed
    # the options that change a gate from the paper's (alphas, taus, a baseline mode other than
    # the default): every verdict records them, the header and the report say so
    gate_options: tuple[tuple[str, object], ...] = ()

    def runner_for(self, library: str) -> str:
        """The runner the library's runs get: warm (sandbox/warm.py) under bubblewrap for
        tracks with imports to share, else cold (a fresh interpreter per run)."""
        warm = self.runner == "warm" and self.sandbox == "bubblewrap" and get_track(library).warm_spec("") is not None
        return "warm" if warm else "cold"

    def runtime(self, library: str) -> Runtime:
        """The track's runtime under this sandbox (a cluster's: on its workers); raises RuntimeMissing."""
        for name, version, image, missing in self.remote_runtimes:
            if name == library:
                if missing:
                    raise RuntimeMissing(f"no worker of the cluster has the {library} runtime: {missing}")
                return Runtime(library, version, python="", read_only=(), image=image)
        return detect_runtime(library, self.sandbox, dict(self.images).get(library))

    def runtime_tag(self, library: str) -> str:
        """What, besides the machine, a baseline belongs to: the image of a container run."""
        if self.sandbox != "docker":
            return ""
        try:
            image = cast(str, self.runtime(library).image)  # a container runtime's
            return "docker-" + image.removeprefix("sha256:")[:12]
        except RuntimeMissing:  # its items skip and say why; no calibration can match meanwhile
            return "docker-unavailable"

    @property
    def times_baselines(self) -> bool:
        """--pde-baseline=local: this machine's missing baselines are timed before the items."""
        return self.baseline == "local" and not self.calibrate

    @property
    def calibrate_hint(self) -> str:
        return "" if self.sandbox == "bubblewrap" else f" -- --pde-sandbox={self.sandbox}"


def item_directory(settings: Settings, library: str, case_id: str, machine: str | None = None) -> Path:
    """The item's audit folder; ``machine``: one of several a cluster calibrates at once."""
    folder = settings.output_dir / library
    return (folder / machine if machine else folder) / case_id


# the gates' defaults (cases.EvaluationConfig's), and which way an option moves them
GATE_DEFAULTS = {"alpha_acc": 10.0, "alpha_time": 3.0, "tau_min": 1e-6, "tau_max": 8e-3}


def gate_options(alphas: Alphas, baseline: str, default_baseline: str) -> tuple[tuple[str, object], ...]:
    """The options that change a gate: each alpha or tau given, and the baseline mode if it
    is not the default for the run."""
    given = [(name, getattr(alphas, name)) for name in GATE_DEFAULTS if getattr(alphas, name) is not None]
    if baseline != default_baseline:
        given.append(("baseline", baseline))
    return tuple(given)


def gates_note(options: dict, thresholds_only: bool = False) -> str:
    """How the options moved the gates, for a header and a report ("" for none): "thresholds
    loosened: tau_max 1" (a larger alpha or tau lets more pass), "tightened", and another
    baseline unless ``thresholds_only`` (a report tells baselines apart by the calibration
    each verdict names)."""
    loosened = [f"{k} {v:g}" for k, v in options.items() if k in GATE_DEFAULTS and float(v) > GATE_DEFAULTS[k]]
    tightened = [f"{k} {v:g}" for k, v in options.items() if k in GATE_DEFAULTS and float(v) < GATE_DEFAULTS[k]]
    parts = [f"thresholds loosened: {', '.join(loosened)}"] if loosened else []
    parts += [f"thresholds tightened: {', '.join(tightened)}"] if tightened else []
    if "baseline" in options and not thresholds_only:
        parts.append(f"baseline {options['baseline']} (not the default)")
    return "; ".join(parts)
