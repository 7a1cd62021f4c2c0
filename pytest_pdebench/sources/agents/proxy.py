"""The metering proxy: the one model endpoint an agent gets, so that the agent never holds
the real key.

An OpenAI-compatible ``/v1/chat/completions`` that forwards to the provider of the
registry entry with the real key, which the agent never sees: it authenticates with a
per-item token instead. Every request is priced with the registry (so tokens and cost
mean the same for every agent, whatever the agent itself reports), logged to the item's
audit folder, and refused once the item's cost limit or the run's ``--pde-budget`` is
reached (403: the openai client does not retry it). The model asked for is replaced by
the registry's: an agent cannot switch to another model on the harness's key.

It listens on a unix socket (bound into a sandbox, where ``forwarder.py`` serves it on the
sandbox's own loopback) or on a loopback TCP port (an agent loop on the host).
"""

from __future__ import annotations

import json
import os
import secrets
import socketserver
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ...llm.cache import SpendLedger
from ...llm.registry import ModelSpec

REFUSED = 403  # not retried by the openai client, unlike 429


@dataclass
class Meter:
    """What the agent's requests cost so far."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    refused: int = 0
    failed: int = 0  # the provider answered an error
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def to_dict(self) -> dict:
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "refused": self.refused,
            "failed": self.failed,
        }


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class MeteringProxy:
    def __init__(
        self,
        spec: ModelSpec,
        real_key: str,
        log_path: Path,
        *,
        ledger: SpendLedger | None = None,
        cost_limit_usd: float | None = None,
        unix_path: Path | None = None,
        timeout_sec: float = 600,
    ):
        self.spec, self._real_key, self.log_path = spec, real_key, Path(log_path)
        self.ledger, self.cost_limit, self.timeout = ledger, cost_limit_usd, timeout_sec
        self.token = "pdebench-item-" + secrets.token_hex(16)
        self.meter = Meter()
        handler = _handler_for(self, tcp=unix_path is None)
        self._server: socketserver.BaseServer
        if unix_path is not None:
            unix_path = Path(unix_path)
            unix_path.unlink(missing_ok=True)
            self._server = _UnixHTTPServer(str(unix_path), handler)
            os.chmod(unix_path, 0o666)  # the sandbox's user is another uid
            self.address = str(unix_path)
        else:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            self._server.daemon_threads = True
            self.address = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> MeteringProxy:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        if isinstance(self._server, _UnixHTTPServer):
            Path(self.address).unlink(missing_ok=True)

    def refusal(self) -> str | None:
        """Why no further request may go out, if so."""
        if self.cost_limit is not None and self.meter.cost_usd >= self.cost_limit:
            return f"the item's cost limit of ${self.cost_limit:.2f} is reached (${self.meter.cost_usd:.4f} spent)"
        if self.ledger is not None and self.ledger.exhausted():
            return (
                f"the run's budget is reached (${self.ledger.spent():.2f} of ${self.ledger.budget:.2f}, --pde-budget)"
            )
        return None

    def forward(self, body: dict) -> tuple[int, bytes, dict]:
        """Send one chat request upstream: (status, answer body, usage line for the log)."""
        body = {**body, "model": self.spec.model}
        if body.get("stream"):  # the usage arrives in the last chunk only if asked for
            body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        request = urllib.request.Request(
            self.spec.base_url.rstrip("/") + "/chat/completions",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._real_key}"},
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                status, answer = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, answer = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            status, answer = 502, json.dumps({"error": {"message": f"provider unreachable: {exc}"}}).encode()
        usage = _usage_of(answer, bool(body.get("stream"))) if status == 200 else {}
        tokens_in, tokens_out = usage.get("prompt_tokens", 0) or 0, usage.get("completion_tokens", 0) or 0
        cost = self.spec.cost(tokens_in, tokens_out)
        with self.meter.lock:
            self.meter.calls += 1
            self.meter.failed += status != 200
            self.meter.input_tokens += tokens_in
            self.meter.output_tokens += tokens_out
            self.meter.cost_usd += cost
        if self.ledger is not None and cost:
            self.ledger.add(cost)
        line = {
            "time": time.time(),
            "status": status,
            "model": self.spec.model,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cost_usd": cost,
            "seconds": round(time.monotonic() - started, 3),
            "stream": bool(body.get("stream")),
        }
        return status, answer, line

    def log(self, line: dict) -> None:
        with self.meter.lock, open(self.log_path, "a") as log:
            log.write(json.dumps(line) + "\n")


def _usage_of(answer: bytes, stream: bool) -> dict:
    """The usage block of a chat answer (JSON, or server-sent events when streamed)."""
    if not stream:
        try:
            return json.loads(answer).get("usage") or {}
        except (ValueError, AttributeError):
            return {}
    usage: dict = {}
    for raw in answer.splitlines():
        if raw.startswith(b"data:") and raw[5:].strip() not in (b"", b"[DONE]"):
            try:
                usage = json.loads(raw[5:]).get("usage") or usage
            except (ValueError, AttributeError):
                continue
    return usage


def _handler_for(proxy: MeteringProxy, tcp: bool):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = tcp  # headers and body go out in two writes: no 40 ms wait for an ACK

        def log_message(self, *args) -> None:  # the proxy's own log is the JSONL file
            pass

        def _reply(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _error(self, status: int, message: str) -> None:
            self._reply(status, json.dumps({"error": {"message": message, "type": "pdebench_proxy"}}).encode())

        def _authorised(self) -> bool:
            given = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            return secrets.compare_digest(given or self.headers.get("api-key", ""), proxy.token)

        def do_GET(self) -> None:
            if not self._authorised():
                return self._error(401, "unknown key: use the key in OPENAI_API_KEY")
            if self.path.rstrip("/").endswith("/models"):
                return self._reply(
                    200,
                    json.dumps(
                        {"object": "list", "data": [{"id": proxy.spec.name, "object": "model", "owned_by": "pdebench"}]}
                    ).encode(),
                )
            self._error(404, f"{self.path}: this endpoint serves /v1/chat/completions and /v1/models only")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self._authorised():
                return self._error(401, "unknown key: use the key in OPENAI_API_KEY")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                return self._error(404, f"{self.path}: this endpoint serves /v1/chat/completions and /v1/models only")
            try:
                body = json.loads(raw)
                assert isinstance(body, dict)
            except (ValueError, AssertionError):
                return self._error(400, "the request body is not a JSON object")
            refusal = proxy.refusal()
            if refusal:
                with proxy.meter.lock:
                    proxy.meter.refused += 1
                proxy.log({"time": time.time(), "status": REFUSED, "refused": refusal})
                return self._error(REFUSED, f"no further model calls: {refusal}")
            status, answer, line = proxy.forward(body)
            proxy.log(line)
            self._reply(
                status, answer, "text/event-stream" if body.get("stream") and status == 200 else "application/json"
            )

    return Handler
