#!/usr/bin/env bash
# One-time set-up, safe to re-run: bubblewrap and deal.II 9.4 (with its compiler, CMake
# and gmsh) from apt, a Python 3.12 virtual environment (.venv, or $PDEBENCH_VENV) with
# DOLFINx 0.11 from PyPI and this package, and the deal.II toolchain cache (compile
# flags and a precompiled header, ~1 minute once). PDEBENCH_SKIP_DEALII=1 leaves deal.II out.
# podman, runc and debootstrap (apt) serve --pde-sandbox=docker; PDEBENCH_SKIP_CONTAINERS=1
# leaves them out, and a machine without apt simply goes without (bubblewrap is the default).
# chromium (apt) opens the report page in a test; PDEBENCH_SKIP_BROWSER=1 leaves it out.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${PDEBENCH_VENV:-.venv}

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

is_python312() { [ -n "$1" ] && [ -x "$1" ] && "$1" -c 'import sys, venv; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; }

find_python312() {
    # explicit choice first, then PATH, then pyenv's installs (not on PATH as python3.12)
    local candidates=("${PYTHON312:-}" "$(command -v python3.12 || true)")
    local roots=()
    command -v pyenv >/dev/null 2>&1 && roots+=("$(pyenv root)")
    roots+=("${PYENV_ROOT:-}" "$HOME/.pyenv" /root/.pyenv /opt/pyenv)
    for root in "${roots[@]}"; do
        [ -n "$root" ] && [ -d "$root/versions" ] || continue
        while IFS= read -r dir; do candidates+=("$dir/bin/python3.12"); done \
            < <(ls -d "$root"/versions/3.12* 2>/dev/null | sort -V -r)
    done
    candidates+=(/usr/local/bin/python3.12 /usr/bin/python3.12)
    for candidate in "${candidates[@]}"; do
        if is_python312 "$candidate"; then echo "$candidate"; return 0; fi
    done
    return 1
}

install_bubblewrap() {
    command -v bwrap >/dev/null 2>&1 && return 0
    say "installing bubblewrap (the solver sandbox)"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    if command -v apt-get >/dev/null 2>&1; then
        $sudo apt-get update -qq && $sudo apt-get install -y -qq bubblewrap >/dev/null
    elif command -v dnf >/dev/null 2>&1; then
        $sudo dnf install -y bubblewrap
    else
        die "bubblewrap is missing and no apt-get/dnf here: install the 'bubblewrap' package"
    fi
    command -v bwrap >/dev/null 2>&1 || die "bubblewrap did not install"
}

# lld: optional, links a deal.II program in 0.6 s against gold's 1.5 s (libraries/dealii.py)
DEALII_PACKAGES="libdeal.ii-dev libblas3 liblapack3 cmake g++ make nlohmann-json3-dev gmsh lld"

install_lld() {
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    say "installing lld from apt (links deal.II programs; without it they link with gold)"
    $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends lld >/dev/null \
        || say "apt-get could not install lld: deal.II programs link with gold"
}

install_dealii() {
    [ "${PDEBENCH_SKIP_DEALII:-0}" = 1 ] && { say "skipping deal.II (PDEBENCH_SKIP_DEALII=1)"; return 0; }
    if [ -f /usr/share/cmake/deal.II/deal.IIConfig.cmake ] && command -v gmsh >/dev/null 2>&1 \
        && [ -f /usr/include/nlohmann/json.hpp ] && command -v cmake >/dev/null 2>&1 \
        && [ -e "/usr/lib/$(uname -m)-linux-gnu/blas/libblas.so.3" ] \
        && [ -e "/usr/lib/$(uname -m)-linux-gnu/lapack/liblapack.so.3" ]; then
        command -v ld.lld >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || install_lld
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 || die "deal.II 9.4 is missing and there is no apt-get: install deal.II 9.4 \
with cmake, g++, nlohmann-json and gmsh, or set PDEBENCH_SKIP_DEALII=1"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    say "installing deal.II 9.4 from apt: $DEALII_PACKAGES (about a minute, 1.9 GB)"
    $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends $DEALII_PACKAGES >/dev/null \
        || die "apt-get could not install $DEALII_PACKAGES"
}

install_container_engine() {
    [ "${PDEBENCH_SKIP_CONTAINERS:-0}" = 1 ] && return 0
    command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 \
        && command -v debootstrap >/dev/null 2>&1 && return 0
    # optional: the docker backend's tests skip where no engine is installed
    command -v apt-get >/dev/null 2>&1 || { say "no apt-get: --pde-sandbox=docker needs Docker or podman"; return 0; }
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    say "installing podman, runc and debootstrap from apt (the container backend; about a minute)"
    $sudo apt-get update -qq && $sudo apt-get install -y -qq podman runc debootstrap >/dev/null \
        || say "apt-get could not install podman runc debootstrap: --pde-sandbox=docker will be unavailable"
}

install_browser() {
    # optional: the report page's test opens it in a real headless browser, and skips without one
    [ "${PDEBENCH_SKIP_BROWSER:-0}" = 1 ] && return 0
    command -v chromium >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 || { say "no apt-get: the report page's browser test will skip"; return 0; }
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    say "installing chromium from apt (opens the report page in a test; about a minute)"
    $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null \
        || say "apt-get could not install chromium: the report page's browser test will skip"
}

install_slurm() {
    # optional: the test that runs a sample through Slurm (dask-jobqueue) skips, saying why, without it
    [ "${PDEBENCH_SKIP_SLURM:-0}" = 1 ] && return 0
    command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 || { say "no apt-get: the Slurm test will skip"; return 0; }
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    say "installing Slurm and munge from apt (a one-node cluster for the Slurm test; about 30 s)"
    $sudo apt-get update -qq && $sudo apt-get install -y -qq slurm-wlm munge >/dev/null \
        || say "apt-get could not install slurm-wlm munge: the Slurm test will skip"
}

install_bubblewrap
install_dealii
install_container_engine
install_browser
install_slurm

if ! is_python312 "$VENV/bin/python"; then
    PY312=$(find_python312) || die "Python 3.12 not found (DOLFINx 0.11 wheels need it). Install it (e.g. \
'pyenv install 3.12') or set PYTHON312=/path/to/python3.12"
    say "creating $VENV with $PY312"
    rm -rf "$VENV"
    "$PY312" -m venv "$VENV"
fi

say "installing pytest-pdebench with the DOLFINx track, mini-swe-agent, Dask, the tests' Hypothesis and MkDocs into $VENV (about two minutes the first time)"
"$VENV/bin/python" -m pip install --quiet --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -m pip install --quiet -e ".[dolfinx,agents,cluster,test,docs]" 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -c 'import pytest_pdebench.plugin' || die "pytest-pdebench did not install"
version=$("$VENV/bin/python" -c 'from mpi4py import MPI; import dolfinx; print(dolfinx.__version__)') \
    || die "DOLFINx does not import in $VENV"
if [ "${PDEBENCH_SKIP_DEALII:-0}" != 1 ]; then
    say "preparing the deal.II toolchain cache (CMake flags, precompiled header; about a minute once)"
    "$VENV/bin/python" -c 'from pytest_pdebench.libraries.cxx_toolchain import load_toolchain
t = load_toolchain(); assert t.ensure_pch(), "precompiled header failed"; print(f"[setup] deal.II {t.dealii}, g++ {t.compiler}: {t.directory}")' \
        || die "the deal.II toolchain does not work (see the message above)"
fi
say "ready: DOLFINx $version, $(bwrap --version), python $("$VENV/bin/python" -V 2>&1)"
