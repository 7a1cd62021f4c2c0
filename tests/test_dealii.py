"""The deal.II track through pytest: C++ programs compiled and run in the sandbox, the
binary output contract, every way a program can fail, and the deal.II oracle."""

from __future__ import annotations

import time
import uuid

import pytest

from pytest_pdebench.testing import (assert_oracle_passes, exact_cpp_program, loopback_listener, processes_with,
                                     run_track, toy_cases)

pytestmark = [pytest.mark.fem, pytest.mark.usefixtures("dealii_available")]


def run(tmp_path, cases, submissions, *extra):
    return run_track(tmp_path, "dealii", cases, submissions, *extra)


def dealii_cases(tmp_path, solvers: dict[str, str]):
    return toy_cases(tmp_path, "dealii", solvers, e_base=1e-6, nx=40, ny=30)


def test_exact_program_passes_and_a_second_build_of_the_same_source_is_cached(tmp_path):
    source = exact_cpp_program(uuid.uuid4().hex)  # a new source: the first build really compiles
    cases, solvers = dealii_cases(tmp_path, {"toy_a": source, "toy_b": source})
    done, outcomes = run(tmp_path, cases, solvers, f"--pde-calibrations={tmp_path / 'calibrations'}", "--pde-runs=1")
    first, second = outcomes["toy_a"], outcomes["toy_b"]
    for verdict in (first, second):
        assert verdict["outcome"] == "PASS", (verdict["reason"], done.stdout[-3000:])
        assert verdict["error"] < 1e-14 and verdict["runtime_version"] == "9.4.1"
    assert first["compile_cached"] is False and first["compile_pch"] is True and first["compile_sec"] > 0
    assert second["compile_cached"] is True and second["compile_sec"] == 0
    # compile time is reported apart: the timed window is the program alone
    assert first["t_agent"] < first["compile_sec"]


def failing_programs(marker: str, secret, port: int) -> dict[str, str]:
    exact = exact_cpp_program("reached")
    return {
        "toy_shape": exact_cpp_program("shape", drop_last=True),
        "toy_compile": "int main() { return undefined_symbol_here; }\n",
        "toy_crash": "#include <csignal>\nint main() { std::raise(SIGSEGV); return 0; }\n",
        "toy_hang": ("#include <unistd.h>\nint main() {\n  if (fork() == 0) { setsid(); "
                     f'execlp("sleep", "sleep", "600", "{marker}", (char *)nullptr); }}\n  for (;;) {{}}\n}}\n'),
        # each of these writes a valid exact solution only if it got through the sandbox
        "toy_network": exact.replace("int main(int argc, char **argv)\n{", (
            "#include <arpa/inet.h>\n#include <sys/socket.h>\n#include <unistd.h>\n"
            "int main(int argc, char **argv)\n{\n  sockaddr_in a{}; a.sin_family = AF_INET; "
            f"a.sin_port = htons({port}); inet_pton(AF_INET, \"127.0.0.1\", &a.sin_addr);\n"
            "  const int s = socket(AF_INET, SOCK_STREAM, 0);\n"
            "  if (connect(s, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) return 7;\n"), 1),
        "toy_hidden": exact.replace("int main(int argc, char **argv)\n{", (
            "int main(int argc, char **argv)\n{\n"
            f"  if (!std::ifstream(\"{secret}\")) return 8;\n"), 1),
    }


def test_every_failure_of_a_cpp_program_is_f_exec(tmp_path):
    marker = f"pdebench-hang-{uuid.uuid4().hex}"
    secret = tmp_path / "evaluator_only.txt"
    secret.write_text("hidden reference")
    with loopback_listener() as (port, accepted):
        cases, submissions = dealii_cases(tmp_path, failing_programs(marker, secret, port))
        done, outcomes = run(tmp_path, cases, submissions, f"--pde-calibrations={tmp_path / 'calibrations'}",
                             "--pde-timeout=10", "--pde-runs=1")  # (3 s: the network probe's start ran out beside -n 3)
    reasons = {case_id: verdict["reason"] for case_id, verdict in outcomes.items()}
    assert {verdict["outcome"] for verdict in outcomes.values()} == {"F-Exec"}, (reasons, done.stdout[-3000:])
    assert "solution_grid.bin holds 9592 bytes = 1199 float64 values" in reasons["toy_shape"]
    assert reasons["toy_compile"].startswith("compile error: solver.cpp:1:")
    assert "undefined_symbol_here" in reasons["toy_compile"]
    assert reasons["toy_crash"].startswith("SIGSEGV")
    assert reasons["toy_hang"].startswith("timed out after 10")
    assert reasons["toy_network"].startswith("exit code 7") and not accepted
    assert reasons["toy_hidden"].startswith("exit code 8")
    deadline = time.time() + 5
    while processes_with(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert processes_with(marker) == []


# one case per deal.II family (cheap ones; GridGenerator and gmsh domains, periodic ones)
ORACLE_CASES = ["poisson_unit_kappa_l_shape_008", "heat_long_periodic_square_periodic_007", "helmholtz_k20_star_001",
                "cd_low_pe_periodic_square_periodic_002", "rd_allen_cahn_periodic_square_periodic_004",
                "biharmonic_plate_dumbbell_004", "elasticity_stiff_annulus_005", "stokes_nu001_l_shape_000",
                "ns_re20_circle_007"]


def test_oracle_one_case_per_family(tmp_path):
    assert_oracle_passes(tmp_path, "dealii", ORACLE_CASES, max_error=1e-3)


def test_the_runtime_follows_the_cache_root_a_process_is_given_now(tmp_path, monkeypatch):
    # CI failed on this: a pytester run under another HOME probed the runtime first, and the
    # process kept that HOME's precompiled-header folder after the folder was gone
    from pathlib import Path

    from pytest_pdebench.libraries import detect_runtime
    from pytest_pdebench.libraries.dealii import host_toolchain

    first = detect_runtime("dealii")
    with monkeypatch.context() as moved:
        moved.setenv("PDEBENCH_CACHE", str(tmp_path / "other-cache"))
        runtime = detect_runtime("dealii")
        assert Path(runtime.read_only[0]).is_relative_to(tmp_path / "other-cache")
        assert host_toolchain().directory.is_relative_to(tmp_path / "other-cache")
    assert detect_runtime("dealii") == first
