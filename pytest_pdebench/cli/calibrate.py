"""``pdebench`` commands that calibrate: e_base and t_base with the oracle, a calibration
written into the records, the calibration's distributions, the strong oracle's agreement."""

from __future__ import annotations

import sys
from pathlib import Path

from ..shared_options import add_shared
from .common import (
    CASES_OPTION,
    ORACLE,
    command,
    shipped,
)

HEADING = "calibrating"


def _calibrate(args) -> int:
    import pytest

    from ..calibration import materialize_case_files

    command = [
        "-p",
        "no:cacheprovider",
        "--pde-calibrate",
        f"--pde-library={args.library}",
        f"--pde-cases={args.cases}",
        f"--pde-submissions={args.oracle}",
        f"--pde-runs={args.runs}",
        f"--pde-calibrations={args.calibrations}",
        "-q",
        "-rfE",
    ] + args.pytest_args
    if args.cluster:  # every machine class of the cluster's workers, each on its own workers
        command.append(f"--pde-cluster={args.cluster}")
    code = pytest.main(command)
    if args.update_cases:
        materialize_case_files(Path(args.cases), args.library, Path(args.calibrations))
    return int(code)


def _calibrate_command(commands) -> None:
    calibrate = command(
        commands,
        "calibrate",
        "measure e_base and t_base with the oracle on this machine (calibrations/)",
        _calibrate,
        cases=CASES_OPTION,
        oracle=ORACLE,
    )
    add_shared(calibrate.add_argument, "", "library", default="dolfinx")
    add_shared(
        calibrate.add_argument, "", "cases", default=shipped("cases"), said="cases/ here, else the bundled suite"
    )
    add_shared(
        calibrate.add_argument,
        "",
        "oracle",
        default=shipped("submissions/oracle"),
        said="submissions/oracle here, else the bundled oracle",
    )
    add_shared(calibrate.add_argument, "", "calibrations", default="calibrations")
    add_shared(calibrate.add_argument, "", "runs", default=3, more="into t_base")
    calibrate.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="calibrate on the workers of a Dask cluster "
        "(tcp://HOST:PORT or a scheduler file): one calibration file per kind of machine",
    )
    calibrate.add_argument("--update-cases", action="store_true", help="also materialize thresholds in the records")
    calibrate.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")


def _materialize(args) -> int:
    from ..calibration import materialize_case_files

    materialize_case_files(Path(args.cases), args.library, Path(args.calibrations), machine=args.machine)
    return 0


def _materialize_command(commands) -> None:
    materialize = command(
        commands,
        "materialize",
        "write this machine's calibration into the records (after calibrating in parts)",
        _materialize,
        cases=CASES_OPTION,
    )
    add_shared(materialize.add_argument, "", "library", default="dolfinx")
    add_shared(materialize.add_argument, "", "cases", default="cases")
    add_shared(materialize.add_argument, "", "calibrations", default="calibrations")
    materialize.add_argument(
        "--machine", help="the machine class whose calibration file to write (default: this machine's)"
    )


def _calibration_summary(args) -> int:
    from ..analysis.calibration_summary import calibration_summary

    summary = calibration_summary(Path(args.cases), args.library, Path(args.calibrations), args.format)
    if summary is None:
        print(f"no calibrated cases for {args.library} in {args.cases}", file=sys.stderr)
        return 1
    print(summary)
    return 0


def _calibration_summary_command(commands) -> None:
    summary = command(
        commands,
        "calibration-summary",
        "e_base, tau_acc and t_base distributions (the paper's tables 6 and 7)",
        _calibration_summary,
        cases=CASES_OPTION,
    )
    add_shared(summary.add_argument, "", "library", default="dolfinx")
    add_shared(summary.add_argument, "", "cases", default=shipped("cases"), said="cases/ here, else the bundled suite")
    add_shared(
        summary.add_argument,
        "",
        "calibrations",
        default=shipped("calibrations"),
        said="calibrations/ here, else the bundled ones",
    )
    summary.add_argument("--format", default="simple")


def _reference_agreement(args) -> int:
    import pytest

    from ..authoring.references import store_reference_agreement

    output, code = Path(args.output), 0
    if not args.no_run:  # the strong oracle's run; its verdicts under --output are what is kept
        marker = [] if args.all_records else ["-m", "reference_numerical"]
        code = pytest.main(
            [
                "-p",
                "no:cacheprovider",
                *marker,
                f"--pde-library={args.library}",
                f"--pde-cases={args.cases}",
                f"--pde-submissions={args.oracle}",
                "--pde-runs=1",
                f"--pde-output={output}",
                "--pde-resume",
                "-q",
                "-rfE",
                *args.pytest_args,
            ]
        )
    path, count = store_reference_agreement(
        Path(args.cases), args.library, output, Path(args.calibrations), args.all_records
    )
    print(
        f"{path}: the strong oracle's error (and time) on {count} records "
        f"(pdebench calibration-summary compares them with tau_acc and tau_time)"
    )
    return int(code)


def _reference_agreement_command(commands) -> None:
    agreement = command(
        commands,
        "reference-agreement",
        "the strong oracle against the references of the reference-based records (checked by calibration-summary)",
        _reference_agreement,
        cases=CASES_OPTION,
    )
    add_shared(agreement.add_argument, "", "library", default="dolfinx")
    add_shared(
        agreement.add_argument, "", "cases", default=shipped("cases"), said="cases/ here, else the bundled suite"
    )
    add_shared(
        agreement.add_argument,
        "",
        "oracle",
        default=shipped("submissions/oracle"),
        said="submissions/oracle here, else the bundled oracle",
    )
    add_shared(agreement.add_argument, "", "calibrations", default="calibrations")
    agreement.add_argument(
        "--output", default="reports/calibration/strong", help="the runs' audit folders (finished items are reused)"
    )
    agreement.add_argument(
        "--all-records",
        action="store_true",
        help="every record, not only the reference-based ones (the strong oracle as the anchor that must pass)",
    )
    agreement.add_argument(
        "--no-run",
        action="store_true",
        help="read the verdicts already in --output "
        "(a run of the oracle with the same cases, e.g. benchmarks/validity.py's)",
    )
    agreement.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")


COMMANDS = [_calibrate_command, _materialize_command, _calibration_summary_command, _reference_agreement_command]
