"""``pdebench`` commands that audit the suite: what the agent-visible data give away, how
close the ansatz-fit attacker comes."""

from __future__ import annotations

from pathlib import Path

from ..shared_options import add_shared
from ..vocabulary import FAMILIES
from .common import (
    CASES_ARGUMENT,
    InputError,
    command,
)

HEADING = "auditing the suite"


def _leak_audit(args) -> int:
    from ..leaks import leak_audit

    print(leak_audit(Path(args.cases), args.library, args.format))
    return 0


def _leak_audit_command(commands) -> None:
    audit = command(
        commands,
        "leak-audit",
        "per family: records whose agent-visible data give the answer away, and what solvers that solve nothing pass",
        _leak_audit,
        cases=CASES_ARGUMENT,
    )
    audit.add_argument("cases")
    add_shared(audit.add_argument, "", "library", default="dolfinx", more="whose tau_acc decides a pass")
    audit.add_argument("--format", default="simple")


def _attack_audit(args) -> int:
    from ..authoring.attack_audit import attack_audit
    from ..making.attack import ATTACK_MARGIN, attacker_path

    solver = Path(args.solver) if args.solver else attacker_path()
    if not solver.is_file():
        raise InputError(f"{solver}: no attacker solver there (pass --solver FILE)")
    return attack_audit(
        Path(args.cases),
        solver,
        ATTACK_MARGIN if args.margin is None else args.margin,
        Path(args.out) if args.out else None,
        args.family,
        lifting_sample=args.lifting_sample,
        rung=Path(args.rung) if args.rung else None,
    )


def _attack_audit_command(commands) -> None:
    attack = command(
        commands,
        "attack-audit",
        "per family: how close the ansatz-fit attacker (no mesh, no solve) comes to each record's answer",
        _attack_audit,
        cases=CASES_ARGUMENT,
        solver="the attacker's solver file (a Python file with solve(case_spec))",
    )
    attack.add_argument("cases", nargs="?", default="cases", help="a case file or folder (default: cases/)")
    attack.add_argument("--solver", help="the attacker's solver file (default: the bundled ansatz-fit attacker)")
    attack.add_argument("--margin", type=float, help="the attacker's error over tau_acc a record must keep (default 3)")
    attack.add_argument("--out", help="a JSONL file of one result per record; a rerun skips those already in it")
    attack.add_argument("--family", action="append", choices=FAMILIES, help="only these families (repeatable)")
    attack.add_argument(
        "--lifting-sample",
        type=int,
        default=0,
        metavar="N",
        help="also measure what lifting u_m out of the text gains on N priced records a family (the lifting rung, "
        "plain and lifted at the build's worst setting; needs DOLFINx)",
    )
    attack.add_argument("--rung", help="the lifting rung's folder (default: submissions/lifting/dolfinx)")


COMMANDS = [_leak_audit_command, _attack_audit_command]
