"""The report page as a person sees it: opened in a real headless browser (Debian's
chromium), it must load without a console error and draw something."""

from __future__ import annotations

import os
import shutil
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
