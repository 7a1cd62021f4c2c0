"""Responses cached by (model, endpoint, prompt hash, attempt), and the run's spend.

Rerunning a command reads finished calls from here instead of calling the API again;
``--pde-replay`` reads only from here. The spend file is shared by xdist workers (an
fcntl lock around read-modify-write), so ``--pde-budget`` holds across processes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from contextlib import contextmanager
from pathlib import Path

from .client import Completion
from .registry import ModelSpec


def prompt_sha256(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()


class ResponseCache:
    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def _path(self, spec: ModelSpec, prompt: str, attempt: int) -> Path:
        key = hashlib.sha256(f"{spec.model}\0{spec.base_url}\0{prompt_sha256(prompt)}\0{attempt}".encode()).hexdigest()
        return self.directory / spec.slug / key[:2] / f"{key}.json"

    def get(self, spec: ModelSpec, prompt: str, attempt: int) -> Completion | None:
        path = self._path(spec, prompt, attempt)
        try:
            return Completion(**json.loads(path.read_text()))
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return None

    def put(self, spec: ModelSpec, prompt: str, attempt: int, completion: Completion) -> None:
        path = self._path(spec, prompt, attempt)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        temporary.write_text(json.dumps(completion.to_dict(), indent=1))
        temporary.replace(path)  # atomic: an interrupted write leaves no half entry


class SpendLedger:
    """Money spent on new calls during this run (cache hits cost nothing)."""

    def __init__(self, path: Path, budget_usd: float | None):
        self.path, self.budget = Path(path), budget_usd

    @contextmanager
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def spent(self) -> float:
        try:
            return float(json.loads(self.path.read_text())["usd"])
        except (FileNotFoundError, KeyError, ValueError):
            return 0.0

    def reset(self) -> None:
        with self._locked():
            self.path.write_text(json.dumps({"usd": 0.0}))

    def exhausted(self) -> bool:
        return self.budget is not None and self.spent() >= self.budget

    def add(self, usd: float) -> None:
        with self._locked():
            self.path.write_text(json.dumps({"usd": self.spent() + usd}))
