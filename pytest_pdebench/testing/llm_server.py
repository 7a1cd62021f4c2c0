"""An OpenAI-compatible chat server on 127.0.0.1 for the tests: real sockets, real HTTP,
the real `openai` client on the other end. What it answers is chosen by the model id:

    scripted-correct   prose, a small snippet, then a correct solver (u = sin(pi x) sin(pi y))
    scripted-broken    a solver that fails to import
    scripted-prose     no code block at all
    scripted-429       429 (Retry-After: 0) on the first request of each prompt, then correct
    scripted-500       500 on the first request of each prompt, then correct
    scripted-hang      sleeps longer than the client's timeout
    scripted-503       503 on every request (a server that is down)
    scripted-401       401 on every request (a key the server refuses)
    scripted-repair    a solver that raises, unless the prompt is a feedback prompt: then correct
    scripted-cpp-repair  C++ that does not compile, unless the prompt is a feedback prompt: then a
                       correct C++ program (the deal.II track)

Models named ``agent-*`` play a code agent's side of a conversation: each answer is one
shell command fenced as ``mswea_bash_command`` (mini-swe-agent's text protocol, which
tests/data/agents/tiny_agent.py speaks too), the step being the number of assistant
messages so far (see AGENT_SCRIPTS).

Every request is logged (model, the user prompt, the HTTP status answered, the usage
reported).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import cast

from . import NUMPY_PRELUDE, REPO, exact_cpp_program

CORRECT = NUMPY_PRELUDE + "\ndef solve(case_spec):\n    x, y, u = grid(case_spec)\n    write(u, x, y)\n"
BROKEN = "import dolfinx.no_such_module\n\ndef solve(case_spec):\n    pass\n"
RAISES = "def solve(case_spec):\n    raise RuntimeError('singular matrix')\n"
HANG_SECONDS = 3.0
# a correct solver that leaves, in every folder it can write, links to a host folder (by the
# names the harness writes, reads or removes), a FIFO and folders it made unreadable
PLANTING = (
    CORRECT
    + """
import os
def _plant(folder):
    for name in ("solution.npz.tmp", "case_spec.json.old", "fenics", "trash", "link"):
        try:
            os.symlink("{victim}", os.path.join(folder, name))
        except OSError:
            pass
    os.mkfifo(os.path.join(folder, "fifo"))
    deep = os.path.join(folder, "locked", "inner")
    os.makedirs(deep)
    os.symlink("{victim}", os.path.join(deep, "up"))
    os.chmod(deep, 0)
    os.chmod(os.path.dirname(deep), 0)
_solve = solve
def solve(case_spec):
    _solve(case_spec)
    for folder in (".", os.environ.get("XDG_CACHE_HOME", "."), "/tmp"):
        try:
            _plant(folder)
            print("planted in", folder, flush=True)
        except OSError as exc:
            print("not planted in", folder, exc, flush=True)
"""
)
PLANTED_LINE = "def solve(case_spec):\n    raise RuntimeError('import os; os.system(\"id > /tmp/pdebench-ran\")')\n"


def fenced(code: str) -> str:
    return f"```python\n{code}```\n"


DONE = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
TRY = (
    "python3 -c \"import json, solver; solver.solve(json.load(open('case_spec.json'))['case_spec'])\""
    " && ls solution.npz"
)


def heredoc(name: str, text: str) -> str:
    return f"cat <<'PDEBENCH_EOF' > {name}\n{text}PDEBENCH_EOF"


# host paths a red-team probe names (tests/test_redteam.py sets them before the run; the
# server runs in the test's process): "victim" a host file, "plant" what to leave at the next
# task's path (link, fifo or folder), "named" a host folder the agent's command names and
# "answer" a stored solution in it
PLACES: dict[str, str] = {}

PLANT = {
    "link": "ln -s {victim} {name}",
    "fifo": "mkfifo {name}",
    "folder": "mkdir -p {name}/inside",
}


def _planted(name: str) -> str:
    return PLANT[PLACES.get("plant", "link")].format(victim=PLACES.get("victim", "/nonexistent"), name=name)


def _embed_named_answer() -> list[str]:
    """Copy a solution from a host folder the command names into a solver that writes it."""
    source = f"{PLACES.get('named', '/nonexistent')}/{PLACES.get('answer', 'solution.npz')}"
    return [
        f"cp {source} stolen.npz; echo copied=$?",
        "python3 - <<'PY'\nimport base64, os\n"
        "blob = base64.b64encode(open('stolen.npz', 'rb').read()).decode() if os.path.exists('stolen.npz') else ''\n"
        "open('solver.py', 'w').write('import base64, json\\ndef solve(case_spec):\\n'\n"
        '    f\'    open("solution.npz", "wb").write(base64.b64decode("{blob}"))\\n\'\n'
        '    \'    json.dump(dict(wall_time_sec=0.0, status="ok"), open("meta.json", "w"))\\n\')\nPY',
        DONE,
    ]


# per model: the command of each step (the last one repeats); a callable gets the conversation
# model -> the agent's commands, one per step (a function of the messages so far: chosen per attempt)
AGENT_SCRIPTS: dict[str, list[str] | Callable[[list[dict]], list[str]]] = {
    "agent-correct": [heredoc("solver.py", CORRECT), TRY, DONE],
    # a correct run leaves solution.npz in the folder; then a solver that writes nothing
    "agent-stale-output": [
        heredoc("solver.py", CORRECT),
        TRY,
        heredoc("solver.py", "def solve(case_spec):\n    pass\n"),
        DONE,
    ],
    # solve in the folder, then leave a solver that only writes the stored result
    "agent-embed": [
        heredoc("solver.py", CORRECT),
        TRY,
        "python3 - <<'PY'\nimport base64\n"
        "blob = base64.b64encode(open('solution.npz', 'rb').read()).decode()\n"
        "open('solver.py', 'w').write('import base64, json\\ndef solve(case_spec):\\n'\n"
        '    f\'    open("solution.npz", "wb").write(base64.b64decode("{blob}"))\\n\'\n'
        '    \'    json.dump(dict(wall_time_sec=0.0, status="ok"), open("meta.json", "w"))\\n\')\nPY',
        DONE,
    ],
    "agent-network": [
        "python3 -c \"import urllib.request; urllib.request.urlopen('http://93.184.215.14', timeout=3)\"; echo exit=$?",
        DONE,
    ],
    "agent-env": ["env; echo ENV-END", DONE],
    # a correct solver, and a helper that is a link to a host file (the harness reads helpers on the host)
    "agent-link": [heredoc("solver.py", CORRECT), f"ln -s {REPO}/cases/suite.jsonl _cases.py", DONE],
    # evaluator-only files: the calibrations and references of the checkout, any case file
    "agent-snoop": [
        f"ls {REPO}/calibrations {REPO}/cases/references; echo snoop=$?; "
        "find /work /root /home /tmp /sandbox /opt -name 'suite.jsonl' 2>/dev/null; echo find-done",
        DONE,
    ],
    "agent-loop": ["echo still thinking"],
    "agent-sleep": ["sleep 60; echo $((40 + 2))-awake", DONE],  # "42-awake" only if it was not stopped
    # attempt 1 leaves a solver that raises; told the verdict, it writes a correct one
    "agent-repair": lambda messages: (
        [heredoc("solver.py", CORRECT), DONE]
        if "THE EVALUATOR'S VERDICT" in _first_user(messages)
        else [heredoc("solver.py", RAISES), DONE]
    ),
    # attempt 1 leaves a link, FIFO or folder where the harness writes the next task (and the
    # next solver), and a solver that fails with a chosen line; attempt 2 does nothing
    "agent-plant": lambda messages: (
        [DONE]
        if "THE EVALUATOR'S VERDICT" in _first_user(messages)
        else [f"{_planted('TASK-2.md')}; ls -la; echo planted=$?", heredoc("solver.py", PLANTED_LINE), DONE]
    ),
    # reads a stored solution in a host folder its command named and leaves a solver that writes it
    "agent-named-folder": lambda messages: _embed_named_answer(),
}


def _first_user(messages: list[dict]) -> str:
    return next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")


def agent_answer(model: str, messages: list[dict]) -> tuple[int, str | None]:
    script = AGENT_SCRIPTS.get(model)
    if script is None:
        return 404, None
    steps = script(messages) if callable(script) else script
    step = sum(1 for m in messages if m.get("role") == "assistant")
    return 200, f"Step {step}.\n\n```mswea_bash_command\n{steps[min(step, len(steps) - 1)]}\n```\n"


def answer(model: str, prompt: str, seen_before: int) -> tuple[int, str | None]:
    """(HTTP status, answer text) for a request."""
    correct = (
        "Here is the plan. A helper first:\n\n"
        + fenced("print('not the solver')\n")
        + "\nAnd the solver:\n\n"
        + fenced(CORRECT)
    )
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
    if model in ("scripted-503", "scripted-401"):
        return int(model[-3:]), None
    if model == "scripted-hang":
        time.sleep(HANG_SECONDS)
        return 200, correct
    if model == "scripted-cpp-repair":
        repaired = "FEEDBACK ON THE PREVIOUS ATTEMPT" in prompt
        code = exact_cpp_program("llm") if repaired else "int main() { return undefined_symbol_here; }\n"
        return 200, f"```cpp\n{code}```\n"
    if model == "scripted-plant":
        return 200, fenced(PLANTING.replace("{victim}", PLACES.get("victim", "/nonexistent")))
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
                    entry = {
                        "model": model,
                        "prompt": prompt,
                        "temperature": body.get("temperature"),
                        "authorization": self.headers.get("Authorization", ""),
                    }
                    server.requests.append(entry)
                if model.startswith("agent-"):
                    status, text = agent_answer(model, body.get("messages", []))
                else:
                    status, text = answer(model, prompt, seen)
                entry["status"] = status
                if status != 200:
                    extra = {"Retry-After": "0"} if status == 429 else {}
                    return self._send(status, {"error": {"message": f"scripted {status}", "type": "scripted"}}, extra)
                asked = (
                    sum(len(m.get("content") or "") for m in body.get("messages", []))
                    if model.startswith("agent-")
                    else len(prompt)
                )
                answered = len(cast(str, text))  # a 200 comes with its text
                usage = {
                    "prompt_tokens": asked // 4,
                    "completion_tokens": answered // 4,
                    "total_tokens": (asked + answered) // 4,
                }
                entry["usage"] = usage
                self._send(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": 0,
                        "model": model,
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                        "usage": usage,
                    },
                )

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
