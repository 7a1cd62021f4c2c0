"""The ``pdebench`` command: list the cases, provision tracks, read stored runs; build,
calibrate and audit the suite.

``pdebench --help`` lists every subcommand (the list is made from the parser itself), in
the groups of the modules that hold them: ``run.py`` (running and reading results),
``suite.py`` (building the suite), ``calibrate.py``, ``audit.py``; each command's parser
sits beside its handler. ``pdebench COMMAND --help`` gives one's options. An input that
is missing or cannot be read ends the command with one line naming it and what to pass
instead (exit code 2).
"""

from __future__ import annotations

import argparse
import sys
import textwrap

# each command imports what it runs: `pdebench --help` and a quick command stay quick
from . import audit, calibrate, run, suite
from .common import InputError, check_inputs

# in the order of the help: what a user of the benchmark runs first, then what builds,
# calibrates and audits the suite (its maintainers)
GROUPS = (run, suite, calibrate, audit)


def _usage_word(action: argparse.Action) -> str:
    """How an argument is written in the synopsis (its metavar, choices or name)."""
    if action.metavar:
        word = str(action.metavar)
    elif action.choices:
        word = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        word = action.dest.upper()
    if action.option_strings:
        return f"{action.option_strings[0]} {word}"
    forms = {"?": f"[{word}]", "*": f"[{word} ...]", "+": f"{word} [{word} ...]"}
    return forms.get(str(action.nargs), word)


def _synopsis(commands, groups: list[tuple[str, list[str]]], column: int = 40, width: int = 100) -> str:
    """One entry per subcommand of the parser, by group (a user's first, then the suite
    maintainer's): its positional and required arguments, and what it does."""
    lines: list[str] = []
    for heading, names in groups:
        lines += ([""] if lines else []) + [f"{heading}:", *_entries(commands, names, column, width)]
    return "\n".join(lines)


def _entries(commands, names: list[str], column: int, width: int) -> list[str]:
    lines = []
    for name in names:
        command = commands.choices[name]
        needed = [a for a in command._actions if a.required or not a.option_strings]
        left = " ".join(["pdebench", name, *map(_usage_word, needed)])
        what = textwrap.wrap(command.description or "", width - column, break_on_hyphens=False) or [""]
        if len(left) < column - 1:
            lines.append(left.ljust(column) + what[0])
        else:
            lines += [left, " " * column + what[0]]
        lines += [" " * column + line for line in what[1:]]
    return lines


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-pdebench")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _add(commands, group) -> list[str]:
    """The group's commands added to the parser; their names."""
    before = set(commands.choices)
    for add in group.COMMANDS:
        add(commands)
    return [name for name in commands.choices if name not in before]


def command_groups() -> list[tuple[str, list[str]]]:
    """(heading, command names) of each group, as ``pdebench --help`` lists them."""
    commands = argparse.ArgumentParser().add_subparsers()
    return [(group.HEADING, _add(commands, group)) for group in GROUPS]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pdebench", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"pdebench (pytest-pdebench) {_version()}")
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="one of those above; pdebench COMMAND --help for its options",
    )
    groups = [(group.HEADING, _add(commands, group)) for group in GROUPS]
    for command in commands.choices.values():  # the arguments many commands share: one help line each
        for action in command._actions:
            if not action.help and action.dest in SHARED_HELP:
                action.help = SHARED_HELP[action.dest]
    parser.description = f"{HEADING}\n\n{_synopsis(commands, groups)}"
    return parser


HEADING = "PDEAgent-Bench: list the cases, provision tracks, read stored runs; build, calibrate and audit the suite."
SHARED_HELP = {
    "library": "the track: dolfinx, firedrake or dealii (default %(default)s)",
    "cases": "a case file or folder (default %(default)s)",
    "oracle": "the oracle's solver folder (default %(default)s)",
    "calibrations": "the calibrations folder (default %(default)s)",
    "upstream": "the upstream case file, benchmark_v2.jsonl (read, never copied; default %(default)s)",
    "output": "where to write (default %(default)s)",
    "format": "tabulate format: github, simple, latex, ... (default %(default)s)",
    "seed": "the variants' seed (a whole number, 0 or more; the same seed draws the same variants)",
    "report": "a pytest JSON report (--json-report-file)",
    "source": "the upstream case file (benchmark_v2.jsonl of PDEAgent-Bench)",
    "case_id": "the case's id (pdebench cases lists them)",
    "guides": "the library guides' folder (default %(default)s)",
}


def _fail(command: str, message: str) -> int:
    print(f"pdebench {command}: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        check_inputs(args)
        return args.func(args)
    except InputError as exc:
        return _fail(args.command, str(exc))
    except Exception as exc:
        # the modules that raise these were imported by the command that raised them
        from ..authoring.calibration_configs import MissingUpstream
        from ..cases import CaseFileError

        if isinstance(exc, CaseFileError):
            return _fail(args.command, str(exc))
        if isinstance(exc, MissingUpstream):  # build-starter, build-suite, calibration-configs draw from it
            return _fail(args.command, f"{exc}; pass --upstream FILE")
        raise
