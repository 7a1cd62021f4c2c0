"""`make durations`: what the reports measured replaces the stored figure, the rest is kept."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "durations.py"


def _script(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("durations_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "tests").mkdir()
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / "tests" / name).write_text("")
    monkeypatch.setattr(module, "REPO", tmp_path)
    monkeypatch.setattr(module, "OUT", tmp_path / "tests" / "durations.json")
    return module


def _report(path: Path, *tests: tuple[str, float, float | None]) -> str:
    """A pytest-json-report of these (node id, set-up, call) figures; a call of None: skipped."""
    path.write_text(json.dumps({"tests": [
        {"nodeid": nodeid, "setup": {"duration": setup}, **({} if call is None else {"call": {"duration": call}})}
        for nodeid, setup, call in tests
    ]}))
    return str(path)


def test_a_check_updates_what_it_ran_and_keeps_the_rest(tmp_path, monkeypatch):
    script = _script(tmp_path, monkeypatch)
    script.OUT.write_text(json.dumps({"tests/test_a.py::slow": 40.0, "tests/test_a.py::quick": 0.5,
                                      "tests/test_gone.py::old": 9.0}))
    check = _report(tmp_path / "check.json", ("tests/test_a.py::quick", 28.0, 4.25), ("tests/test_b.py::new", 0.0, 0.1),
                    ("tests/test_a.py::slow", 0.01, None))
    assert script.main([check, str(tmp_path / "missing.json")]) == 0
    # the call is the test's own cost (a module fixture's 28 s set-up is not); a skip measured nothing
    assert json.loads(script.OUT.read_text()) == {
        "tests/test_a.py::quick": 4.25, "tests/test_a.py::slow": 40.0, "tests/test_b.py::new": 0.1}


def test_the_smaller_figure_wins_and_no_report_is_an_error(tmp_path, monkeypatch, capsys):
    script = _script(tmp_path, monkeypatch)
    assert script.main([str(tmp_path / "missing.json")]) == 2
    assert "run `make test` or `make check` first" in capsys.readouterr().err
    quiet = _report(tmp_path / "check.json", ("tests/test_a.py::t", 0.0, 1.0))
    loaded = _report(tmp_path / "test.json", ("tests/test_a.py::t", 0.0, 9.0), ("tests/test_b.py::u", 0.0, 5.0))
    assert script.main([loaded, quiet]) == 0
    assert json.loads(script.OUT.read_text()) == {"tests/test_a.py::t": 1.0, "tests/test_b.py::u": 5.0}
