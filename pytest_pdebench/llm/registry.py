"""The model registry: names a user types (``--pde-model=opus-4.7``) -> endpoint, model
id, key variable and prices. The bundled ``models.toml`` holds the paper's five models;
``--pde-models=FILE`` (or ``$PDEBENCH_MODELS``) adds or overrides entries."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

BUNDLED = Path(__file__).with_name("models.toml")
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


class RegistryError(ValueError):
    """An unknown model, a bad registry file or a missing key: stops the run at start."""


@dataclass(frozen=True)
class ModelSpec:
    name: str  # what the user typed
    model: str  # provider-side identifier
    base_url: str
    api_key_env: str = DEFAULT_KEY_ENV
    temperature: float | None = 0.0
    input_usd_per_mtok: float = 0.0
    output_usd_per_mtok: float = 0.0
    needs_key: bool = True  # False: a local server that takes any key (vLLM, llama.cpp, Ollama)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok) / 1e6

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() or c in "._-" else "-" for c in self.name)


FIELDS = {"model", "base_url", "api_key_env", "temperature", "input_usd_per_mtok", "output_usd_per_mtok", "needs_key"}
NO_KEY = "no-key-needed"  # what is sent where an entry needs none: the client insists on one


def load_registry(extra: str | Path | None = None) -> dict[str, dict]:
    files = [BUNDLED] + [Path(p) for p in (extra, os.environ.get("PDEBENCH_MODELS")) if p]
    entries: dict[str, dict] = {}
    for path in files:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RegistryError(f"model registry {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise RegistryError(f"model registry {path}: {exc}") from None
        for name, entry in data.get("models", {}).items():
            unknown = set(entry) - FIELDS
            if unknown:
                raise RegistryError(
                    f"model registry {path}: [models.{name!r}] has unknown keys {sorted(unknown)}; "
                    f"allowed: {sorted(FIELDS)}"
                )
            if not isinstance(entry.get("needs_key", True), bool):
                raise RegistryError(f"model registry {path}: [models.{name!r}] needs_key must be true or false")
            entries[name] = {**entries.get(name, {}), **entry}
    return entries


def resolve_model(
    name: str, base_url: str | None = None, api_key_env: str | None = None, extra: str | Path | None = None
) -> ModelSpec:
    """The registry entry for ``name``; with ``base_url``, an unknown name is the raw
    model id at that endpoint. ``base_url``/``api_key_env`` override a registry entry."""
    entries = load_registry(extra)
    entry = dict(entries.get(name, {}))
    if not entry:
        if base_url is None:
            known = ", ".join(sorted(entries))
            raise RegistryError(
                f"--pde-model: unknown model {name!r}. Known: {known}. For another endpoint pass "
                f"--pde-base-url (the name is then the model id there) or add it with --pde-models"
            )
        entry = {"model": name}
    if base_url:
        entry["base_url"] = base_url
    if api_key_env:
        entry["api_key_env"] = api_key_env
    missing = {"model", "base_url"} - set(entry)
    if missing:
        raise RegistryError(f"model {name!r} lacks {sorted(missing)} in the registry")
    return ModelSpec(name=name, **entry)


def api_key(spec: ModelSpec) -> str:
    value = os.environ.get(spec.api_key_env, "")
    if not value and not spec.needs_key:
        return NO_KEY
    if not value:
        raise RegistryError(
            f"--pde-model={spec.name}: set the API key in ${spec.api_key_env} "
            f"(or name another variable with --pde-api-key-env; a local server that takes any key: "
            f"needs_key = false in its --pde-models entry)"
        )
    return value
