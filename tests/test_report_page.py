"""The report page as a person sees it: opened in a real headless browser (Debian's
chromium), it must load without a console error and draw something."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
import subprocess
from html.parser import HTMLParser

import pytest

from pytest_pdebench.analysis.render import write_report
from pytest_pdebench.analysis.runs import load_run
from pytest_pdebench.testing import json_report, verdict
from pytest_pdebench.testing import REQUIRE_RUNTIMES, missing


@pytest.fixture(scope="module")
def chromium():
    browser = shutil.which("chromium")
    if browser is None:
        missing("chromium is not installed (apt-get install chromium; `make setup` does it)",
                REQUIRE_RUNTIMES and os.environ.get("PDEBENCH_SKIP_BROWSER") != "1")
    return browser


def open_page(browser: str, page, shot) -> list[str]:
    """Load the page headless, screenshot it; the console messages it logged."""
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                           f"--screenshot={shot}", "--window-size=1280,1800", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.is_file(), done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def drawn_share(shot) -> float:
    """The share of pixels that are not the page's white."""
    from PIL import Image

    import numpy as np

    with Image.open(shot) as image:
        pixels = np.asarray(image.convert("L"))
    return float((pixels < 245).mean())


def test_the_report_page_loads_cleanly_and_is_not_blank(chromium, tmp_path):
    runs = [load_run(json_report(tmp_path / "a.json", [verdict("p1", "PASS"), verdict("h1", "F-Time", family="heat",
                                                                                       t_agent=4.0)])),
            load_run(json_report(tmp_path / "b.json", [verdict("p1", "F-Acc", error=5e-3, t_agent=None,
                                                               source="submissions/other"),
                                                       verdict("h1", "PASS", family="heat", source="submissions/other")]))]
    write_report(runs, tmp_path / "report")
    messages = open_page(chromium, tmp_path / "report" / "report.html", tmp_path / "page.png")
    assert messages == []
    assert drawn_share(tmp_path / "page.png") > 0.02


class Captions(HTMLParser):
    """The text of each figure's caption, and of each table cell, as the browser built them."""

    def __init__(self):
        super().__init__()
        self.figures, self.captions, self.cells, self._in = 0, [], [], None

    def handle_starttag(self, tag, attrs):
        self.figures += tag == "figure"
        if tag in ("figcaption", "td"):
            self._in = tag
            (self.captions if tag == "figcaption" else self.cells).append("")

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in:
            (self.captions if self._in == "figcaption" else self.cells)[-1] += data


def test_the_page_captions_figures_in_words_and_claims_no_difference_on_two_cases(chromium, tmp_path):
    """Issue 40: each figure has a sentence under it (not its file name), and two systems
    that differ on one case each are not ranked (McNemar p = 1)."""
    runs = [load_run(json_report(tmp_path / "a.json", [verdict("p1", "PASS"), verdict("h1", "F-Time", family="heat",
                                                                                       t_agent=4.0)])),
            load_run(json_report(tmp_path / "b.json", [verdict("p1", "F-Acc", error=5e-3, t_agent=None,
                                                               source="submissions/other"),
                                                       verdict("h1", "PASS", family="heat", source="submissions/other")]))]
    summary = write_report(runs, tmp_path / "report")
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                           (tmp_path / "report" / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    page = Captions()
    page.feed(done.stdout)
    assert page.figures == len(summary["figures"]) == len(page.captions) >= 4, done.stderr[-2000:]
    for stem, words in zip(summary["figures"], page.captions):
        assert words != stem and len(words.split()) >= 10 and words.endswith("."), words
    assert not any(cell.endswith(" ahead") for cell in page.cells)
    assert "no difference shown (2 discordant cases: at least 6 are needed for any difference to be significant " \
           "at 0.05)" in page.cells


def test_the_check_sees_a_broken_page(chromium, tmp_path):
    """The same check on a page with a script error and nothing drawn must fail."""
    page = tmp_path / "broken.html"
    page.write_text("<!doctype html><html><body><script>notDefined();</script></body></html>")
    messages = open_page(chromium, page, tmp_path / "broken.png")
    assert any("Uncaught ReferenceError" in line for line in messages)
    assert drawn_share(tmp_path / "broken.png") < 0.001


def test_a_failed_item_is_debugged_from_its_page_in_a_copied_report(chromium, dolfinx_available, tmp_path):
    """A real run (toy solvers through the sandbox) with --pde-report: the report folder,
    copied elsewhere, shows every item open with error / tau_acc and the failed item's error
    picture; its item page shows the picture (drawn by the browser from the copied folder:
    the screenshot loses ink when the file is taken away), where the error is and the solver."""
    import json
    import sys
    import textwrap

    from pytest_pdebench.testing import NUMPY_PRELUDE, record_dict, write_calibration, write_jsonl

    bodies = {"exact": "x, y, u = grid(case_spec); write(u, x, y)",
              "noisy": "x, y, u = grid(case_spec)\n"
                       "write(u * (1 + 0.01 * np.random.default_rng(1).standard_normal(u.shape)), x, y)",
              "raises": "raise RuntimeError('singular matrix')"}  # fmt: skip
    records = [record_dict(new_id=name, nx=20, ny=20) for name in bodies]
    write_jsonl(tmp_path / "cases.jsonl", records)
    write_calibration(tmp_path / "calibrations", "dolfinx", records, 1e-4, 5.0)
    solvers = tmp_path / "solvers" / "dolfinx"
    solvers.mkdir(parents=True)
    for name, body in bodies.items():
        (solvers / f"{name}.py").write_text(NUMPY_PRELUDE + "\ndef solve(case_spec):\n" + textwrap.indent(body, "    "))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pde-library=dolfinx",
                           f"--pde-cases={tmp_path / 'cases.jsonl'}", f"--pde-submissions={tmp_path / 'solvers'}",
                           f"--pde-calibrations={tmp_path / 'calibrations'}", "--pde-baseline=stored",
                           f"--pde-output={tmp_path / 'out'}", f"--pde-report={tmp_path / 'report'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 1 and "report:" in done.stdout, done.stdout[-2000:]
    copied = tmp_path / "elsewhere" / "report"
    shutil.copytree(tmp_path / "report", copied)
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          (copied / "report.html").as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert '<details id="items" open="">' in dom, dom[-3000:]
    assert dom.count('<tr><td data-v="') == 3  # every item, each with its number to sort by
    thumbs = [part.split('"')[0] for part in dom.split('<img class="thumb" src="')[1:]]
    assert thumbs == ["items/0002-noisy-dolfinx/fields.png"], thumbs  # the failed item that left a solution
    noisy = json.loads((tmp_path / "out" / "dolfinx" / "noisy" / "verdict.json").read_text())
    assert f'data-v="{noisy["error"] / noisy["tau_acc"]!r}"' in dom
    page = copied / "items" / "0002-noisy-dolfinx" / "index.html"
    shown = page.read_text()
    assert "Where the error is" in shown and "the y_max (Dirichlet) edge" in shown and "def solve" in shown
    assert open_page(chromium, page, tmp_path / "with.png") == []
    (page.parent / "fields.png").unlink()
    open_page(chromium, page, tmp_path / "without.png")
    assert drawn_share(tmp_path / "with.png") > drawn_share(tmp_path / "without.png") + 0.05


def test_the_page_says_when_a_run_was_cut_short_or_left_items_not_run(chromium, tmp_path):
    import json

    report = json_report(tmp_path / "a.json", [verdict("p1", "PASS")])
    document = json.loads(report.read_text())
    document["pde"]["interrupted"] = {"judged": 1, "selected": 4}
    document["pde"]["not_run"] = [{"case_id": "h1", "library": "firedrake", "reason": "no firedrake runtime here"}]
    report.write_text(json.dumps(document))
    write_report([load_run(report)], tmp_path / "report")
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          (tmp_path / "report" / "report.html").as_uri()], capture_output=True, text=True,
                         timeout=120).stdout  # fmt: skip
    banners = [part.split("</p>")[0] for part in dom.split('<p class="banner">')[1:]]
    assert banners == ["a was interrupted: 1 of 4 items judged; its rates cover those only (finish it with the same "
                       "command and --pde-resume)", "a: 1 item(s) not run (no firedrake runtime here)"], banners


class Browser:
    """Headless chromium driven over the DevTools protocol on a pipe (fds 3 and 4 of the
    browser: no port, no client library): open a page, evaluate JavaScript in it."""

    def __init__(self, chromium: str, profile):
        import json
        import shlex

        self.json, self.next_id, self._buffer = json, 0, b""
        commands_read, self._commands = os.pipe()
        self._events, replies_write = os.pipe()
        browser = shlex.join([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                              f"--user-data-dir={profile}", "about:blank"])  # fmt: skip
        # the protocol's fds are 3 (commands in) and 4 (replies out): bash puts the pipes there (dash takes one digit)
        self.process = subprocess.Popen(["bash", "-c", f"exec {browser} 3<&{commands_read} 4>&{replies_write}"],
                                        pass_fds=(commands_read, replies_write), stdout=subprocess.DEVNULL,
                                        stderr=(Path(profile).parent / "browser.log").open("w"))  # fmt: skip
        os.close(commands_read)
        os.close(replies_write)

    def send(self, method: str, session: str | None = None, **params) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self._commands, self.json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._events, 1 << 16)
                assert chunk, "the browser closed its pipe"
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = self.json.loads(raw)
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    def open(self, uri: str) -> str:
        import time

        target = self.send("Target.createTarget", url=uri)["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        deadline = time.time() + 60
        loaded = f"location.href === {self.json.dumps(uri)} && document.readyState === 'complete'"
        while not self.evaluate(session, loaded) and time.time() < deadline:  # not the about:blank before it
            time.sleep(0.1)
        return session

    def evaluate(self, session: str, expression: str):
        return self.send("Runtime.evaluate", session, expression=expression, returnByValue=True)["result"].get("value")

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def test_a_click_on_a_header_sorts_the_item_table(chromium, tmp_path):
    """The item table sorts by error / tau_acc on a click (numbers as numbers, an item without
    an error last), the other way on a second click (still last): clicked in a real browser."""
    verdicts = [verdict("a", "F-Acc", error=5e-2, t_agent=None), verdict("b", "PASS", error=2e-4),
                verdict("c", "F-Acc", error=9e-3, t_agent=None), verdict("d", "F-Exec", error=None, t_agent=None)]
    write_report([load_run(json_report(tmp_path / "a.json", verdicts))], tmp_path / "report")
    browser = Browser(chromium, tmp_path / "profile")
    try:
        page = browser.open((tmp_path / "report" / "report.html").as_uri())
        order = "[...document.querySelectorAll('table.items tbody tr')].map(r => r.cells[3].textContent).join(' ')"
        assert browser.evaluate(page, order) == "a b c d"
        header = "[...document.querySelectorAll('table.items th')].find(h => h.textContent === 'error / tau_acc')"
        browser.evaluate(page, f"{header}.click()")
        assert browser.evaluate(page, order) == "b c a d"  # d has no error: last
        browser.evaluate(page, f"{header}.click()")
        assert browser.evaluate(page, order) == "a c b d"
    finally:
        browser.close()
