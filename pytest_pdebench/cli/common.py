"""What the ``pdebench`` commands share: how a command is declared, what its inputs should
name (checked before it starts), where the shipped defaults are."""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path

from ..bundled import bundled, named_cases

say = functools.partial(print, flush=True)  # progress of long commands, seen as it happens in a log

# what an input argument should name, said when it does not
CASES_OPTION = "a case file (JSONL) or a folder of them with --cases"
CASES_ARGUMENT = "the path of a case file (JSONL) or of a folder of them"
CASE_FILE = "the path of one case file (JSONL), not a folder (the builds rewrite it: cases/suite.jsonl)"
JSON_REPORT = "the JSON report of a benchmark run (pytest --json-report --json-report-file=FILE writes it)"
ORACLE = "the oracle's solver folder with --oracle"
GUIDES = "the folder of library guides with --guides (guides/ in a checkout)"


class InputError(Exception):
    """An input the command cannot use; the message names it and says what to pass."""


def check_input(path: Path, what: str) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file or folder; pass {what}")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: not readable (permissions); pass {what}")
    if what == CASE_FILE and path.is_dir():
        raise InputError(f"{path}: a folder; pass {what}")


def check_inputs(args: argparse.Namespace) -> None:
    """Every input the subcommand declared (``inputs``: argument -> what it names) exists
    and can be read, before the command starts any work."""
    for dest, what in args.inputs.items():
        if getattr(args, dest) is not None:  # None: an optional input left out (its default is found later)
            if what == CASES_OPTION:  # --cases smoke: the bundled smoke suite, as for pytest
                setattr(args, dest, named_cases(getattr(args, dest)))
            check_input(Path(getattr(args, dest)), what)


def command(commands, name: str, what: str, func, **inputs: str) -> argparse.ArgumentParser:
    """A subcommand: ``what`` is its line in ``pdebench --help`` and the head of its own
    help; ``inputs`` maps its arguments that name files or folders to read (by dest) to
    what they should name, checked before ``func`` runs."""
    command = commands.add_parser(name, description=what)
    command.set_defaults(func=func, inputs=inputs)
    return command


def shipped(name: str) -> str:
    """The default of an input the package ships: the folder of that name here (a checkout,
    or a project with its own), else the bundled one, so an installed tool runs anywhere."""
    return name if Path(name).exists() else str(bundled(name))
