"""One chat call to an OpenAI-compatible endpoint with the `openai` client, retried with
exponential backoff on rate limits, server errors, timeouts and dropped connections.

The SDK's own retries are switched off (max_retries=0) so that every attempt is counted
here and the backoff is ours: base * 2**k seconds, or the server's Retry-After when it
sends one (capped at 60 s).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from .registry import ModelSpec

SYSTEM_MESSAGE = (
    "You write complete, runnable finite element solvers. Answer with the whole program in one fenced code block."
)
MAX_RETRY_AFTER = 60.0


class ModelCallFailed(RuntimeError):
    """No usable response after the retries (or a non-retryable error)."""


class EndpointFailed(ModelCallFailed):
    """The endpoint, not the model, failed: unreachable, still failing (5xx) or limiting the
    rate (429) after the retries, or refusing the key or the model's name (401, 403, 404).
    The item is not run (left out of the pass rates), never a failure of the model; a
    timeout stays the model's (a response it did not finish)."""


# what to check, by what the endpoint did
_CHECK = {"connection": "is the server up and --pde-base-url right?",
          401: "is the key in --pde-api-key-env's variable right?", 403: "may this key use this model?",
          404: "are the model's id and --pde-base-url right?",
          "busy": "the server is failing or limiting the rate: rerun later with --pde-resume"}  # fmt: skip


@dataclass
class Completion:
    text: str
    model: str  # the id the server reports
    input_tokens: int
    output_tokens: int
    finish_reason: str | None
    request_sha256: str
    response_sha256: str
    retries: int
    seconds: float
    created: str

    def to_dict(self) -> dict:
        return asdict(self)


def request_body(spec: ModelSpec, prompt: str, max_tokens: int | None) -> dict:
    body: dict[str, Any] = {
        "model": spec.model,
        "messages": [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": prompt}],
    }
    if spec.temperature is not None:
        body["temperature"] = spec.temperature
    if max_tokens:
        body["max_completion_tokens"] = max_tokens
    return body


def sha256_json(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class ModelClient:
    def __init__(
        self,
        spec: ModelSpec,
        key: str,
        timeout: float = 600.0,
        retries: int = 5,
        backoff: float = 2.0,
        max_tokens: int | None = None,
    ):
        import openai

        self.spec, self.retries, self.backoff, self.max_tokens = spec, retries, backoff, max_tokens
        self.client = openai.OpenAI(api_key=key, base_url=spec.base_url, timeout=timeout, max_retries=0)

    def complete(self, prompt: str) -> Completion:
        import openai

        body = request_body(self.spec, prompt, self.max_tokens)
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                response = self.client.chat.completions.create(**body)
                break
            except (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APITimeoutError,
                openai.APIConnectionError,
            ) as exc:
                if attempt == self.retries:
                    tries = f"{type(exc).__name__} after {attempt + 1} tries"
                    if isinstance(exc, openai.APITimeoutError):
                        raise ModelCallFailed(f"{tries}: {exc}") from None
                    check = _CHECK["connection" if isinstance(exc, openai.APIConnectionError) else "busy"]
                    raise EndpointFailed(f"{tries} at {self.spec.base_url}: {exc} ({check})") from None
                time.sleep(self._delay(exc, attempt))
            except openai.APIStatusError as exc:  # 400, 401, 404...: retrying will not help
                failed = f"HTTP {exc.status_code} from {self.spec.base_url}: {exc.message}"
                if exc.status_code in _CHECK or exc.status_code >= 500:
                    raise EndpointFailed(f"{failed} ({_CHECK.get(exc.status_code, _CHECK['busy'])})") from None
                raise ModelCallFailed(failed) from None
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice else ""
        usage = response.usage
        return Completion(
            text=text,
            model=response.model or self.spec.model,
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
            finish_reason=choice.finish_reason if choice else None,
            request_sha256=sha256_json(body),
            response_sha256=hashlib.sha256(text.encode()).hexdigest(),
            retries=attempt,
            seconds=round(time.monotonic() - started, 3),
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )

    def _delay(self, exc, attempt: int) -> float:
        response = getattr(exc, "response", None)
        header = response.headers.get("retry-after") if response is not None else None
        try:
            # ignore: no header (None) raises the TypeError caught below, as a malformed one does
            return min(float(header), MAX_RETRY_AFTER)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return self.backoff * 2**attempt
