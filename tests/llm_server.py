"""An OpenAI-compatible chat server on 127.0.0.1 for the tests: real sockets, real HTTP,
the real `openai` client on the other end. What it answers is chosen by the model id:

    scripted-correct   prose, a small snippet, then a correct solver (u = sin(pi x) sin(pi y))
    scripted-broken    a solver that fails to import
    scripted-prose     no code block at all
    scripted-429       429 (Retry-After: 0) on the first request of each prompt, then correct
    scripted-500       500 on the first request of each prompt, then correct
    scripted-hang      sleeps longer than the client's timeout
    scripted-repair    a solver that raises, unless the prompt is a feedback prompt: then correct
    scripted-cpp-repair  C++ that does not compile, unless the prompt is a feedback prompt: then a
                       correct C++ program (the deal.II track)

Every request is logged (model, the user prompt, the HTTP status answered).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import NUMPY_PRELUDE, exact_cpp_program

CORRECT = NUMPY_PRELUDE + "\ndef solve(case_spec):\n    x, y, u = grid(case_spec)\n    write(u, x, y)\n"
BROKEN = "import dolfinx.no_such_module\n\ndef solve(case_spec):\n    pass\n"
RAISES = "def solve(case_spec):\n    raise RuntimeError('singular matrix')\n"
HANG_SECONDS = 3.0


def fenced(code: str) -> str:
    return f"```python\n{code}```\n"


def answer(model: str, prompt: str, seen_before: int) -> tuple[int, str | None]:
    """(HTTP status, answer text) for a request."""
    correct = ("Here is the plan. A helper first:\n\n" + fenced("print('not the solver')\n")
               + "\nAnd the solver:\n\n" + fenced(CORRECT))
    if model == "scripted-correct":
        return 200, correct
    if model == "scripted-broken":
        return 200, fenced(BROKEN)
    if model == "scripted-prose":
        return 200, "I would use P2 elements and a direct solver."
    if model == "scripted-429":
        return (429, None) if seen_before == 0 else (200, correct)
    if model == "scripted-500":
        return (500, None) if seen_before == 0 else (200, correct)
    if model == "scripted-hang":
        time.sleep(HANG_SECONDS)
        return 200, correct
    if model == "scripted-cpp-repair":
        repaired = "FEEDBACK ON THE PREVIOUS ATTEMPT" in prompt
        code = exact_cpp_program("llm") if repaired else "int main() { return undefined_symbol_here; }\n"
        return 200, f"```cpp\n{code}```\n"
    if model == "scripted-repair":
        return 200, fenced(CORRECT if "FEEDBACK ON THE PREVIOUS ATTEMPT" in prompt else RAISES)
    return 404, None


class ScriptedServer:
    def __init__(self):
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                model = body.get("model", "")
                prompt = next((m["content"] for m in body.get("messages", []) if m["role"] == "user"), "")
                with server._lock:
                    seen = sum(1 for r in server.requests if r["model"] == model and r["prompt"] == prompt)
                    entry = {"model": model, "prompt": prompt, "temperature": body.get("temperature"),
                             "authorization": self.headers.get("Authorization", "")}
                    server.requests.append(entry)
                status, text = answer(model, prompt, seen)
                entry["status"] = status
                if status != 200:
                    extra = {"Retry-After": "0"} if status == 429 else {}
                    return self._send(status, {"error": {"message": f"scripted {status}", "type": "scripted"}},
                                      extra)
                self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4,
                              "total_tokens": (len(prompt) + len(text)) // 4},
                })

            def _send(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def for_model(self, model: str) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if r["model"] == model]
