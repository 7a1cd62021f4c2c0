#!/usr/bin/env bash
# Provision the Firedrake runtime once per machine, from PyPI sources and Debian
# packages only (there is no Firedrake wheel): PETSc from the `petsc` sdist against
# Debian's MPI/HDF5/MUMPS/..., then petsc4py and firedrake into a Python 3.12 venv.
#
# Everything lands in a cache directory outside the repository, keyed by the pinned
# versions; every finished step leaves a stamp, so a re-run skips what is done and an
# interrupted build resumes at the step that did not finish. About 20 minutes on 2 cores
# the first time, a second or two afterwards.
#
#   pdebench provision firedrake          # build (or check) the runtime
#   pdebench provision firedrake --print  # only print the runtime directory
#   pdebench provision firedrake --dry-run  # the steps, packages, disk and time, and what is done here
# (shipped inside the package, so that a wheel install can provision; scripts/provision_firedrake.sh
# in a checkout runs this file)
set -euo pipefail

FIREDRAKE_VERSION=2026.10.0
PETSC_VERSION=3.26.0
KEY="firedrake-${FIREDRAKE_VERSION}-petsc-${PETSC_VERSION}-py3.12"
CACHE_ROOT=${PDEBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-pdebench}
PREFIX="$CACHE_ROOT/$KEY"
PETSC_ARCH=pdebench-opt
JOBS=${JOBS:-$(nproc)}

if [ "${1:-}" = "--print" ]; then echo "$PREFIX"; exit 0; fi

say() { printf '[firedrake %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[firedrake] ERROR: %s\n' "$*" >&2; exit 1; }
done_step() { [ -f "$PREFIX/.stamp-$1" ]; }
mark() { touch "$PREFIX/.stamp-$1"; }
# run a long step with its output in a log file; on failure show the end of the log
logged() {
    local name=$1; shift
    local log="$PREFIX/logs/$name.log"
    if ! "$@" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        die "step '$name' failed; full log: $log"
    fi
}

APT_PACKAGES="build-essential cmake gfortran pkg-config python3-dev bison flex libopenmpi-dev openmpi-bin
libhdf5-mpi-dev libfftw3-dev libfftw3-mpi-dev libhwloc-dev libmetis-dev libptscotch-dev
libscalapack-openmpi-dev libsuitesparse-dev libsuperlu-dev libsuperlu-dist-dev libmumps-ptscotch-dev
libnetcdf-dev libpnetcdf-dev libopenblas-dev libspatialindex-dev"

# --dry-run: what a build does and costs, and which of its steps this machine has done
if [ "${1:-}" = "--dry-run" ]; then
    echo "Firedrake $FIREDRAKE_VERSION with PETSc $PETSC_VERSION, into $PREFIX (and the Debian packages)"
    step=0
    for item in "apt:Debian packages (apt-get install, root or sudo): $(echo $APT_PACKAGES)" \
                "petsc-source:PETSc $PETSC_VERSION sources (the PyPI 'petsc' sdist)" \
                "petsc-configure:PETSc configure against the Debian libraries (about 70 s)" \
                "petsc-build:PETSc build on $JOBS cores (about 8 min on 2)" \
                "petsc4py:petsc4py $PETSC_VERSION against this PETSc (about 4 min)" \
                "firedrake:firedrake $FIREDRAKE_VERSION from PyPI into a Python 3.12 venv (about 6 min)" \
                "extras:gmsh" "check:import firedrake and a small Poisson solve"; do
        step=$((step + 1))
        name=${item%%:*}
        state="to do"; [ -f "$PREFIX/.stamp-$name" ] && state="done here"
        echo "  $step. [$state] ${item#*:}"
    done
    echo "disk: about 1 GB in $PREFIX (962 MB measured), besides the Debian packages"
    echo "time: 22 to 38 min the first time on 2 cores (26.2 min beside other jobs on amd-epyc-2cpu-24gb, 2026-12-02);"
    echo "      a finished step is skipped on a re-run, so an interrupted build resumes where it stopped"
    exit 0
fi

mkdir -p "$PREFIX/logs"
started=$(date +%s)

if ! done_step apt; then
    say "1/6 Debian packages (MPI, HDF5, MUMPS, SuperLU_dist, ...)"
    command -v apt-get >/dev/null || die "apt-get not found: this recipe needs Debian 12 packages ($APT_PACKAGES)"
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    packages=$(echo $APT_PACKAGES)  # one line for bash -c
    logged apt bash -c "$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $packages"
    mark apt
fi

find_python312() {
    # the same search as scripts/setup.sh: explicit, PATH, pyenv installs
    local c
    for c in "${PYTHON312:-}" "$(command -v python3.12 || true)" \
             $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | sort -V -r); do
        if [ -n "$c" ] && [ -x "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
            echo "$c"; return 0
        fi
    done
    return 1
}

VENV="$PREFIX/venv"
if ! [ -x "$VENV/bin/python" ]; then
    PY312=$(find_python312) || die "Python 3.12 not found: install it (pyenv install 3.12) or set PYTHON312"
    say "creating $VENV with $PY312"
    "$PY312" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip setuptools wheel
fi
PIP=("$VENV/bin/python" -m pip)
# a pip cache private to this PETSc build: pip would otherwise reuse a petsc4py wheel
# compiled against another PETSc
export PIP_CACHE_DIR="$PREFIX/pip-cache"

SRC="$PREFIX/petsc-src"
if ! done_step petsc-source; then
    say "2/6 PETSc $PETSC_VERSION sources (the PyPI 'petsc' sdist)"
    rm -rf "$SRC" "$PREFIX/sdist"
    logged petsc-download "${PIP[@]}" download --no-deps --no-binary :all: "petsc==$PETSC_VERSION" -d "$PREFIX/sdist"
    mkdir -p "$SRC"
    tar -xzf "$PREFIX"/sdist/petsc-*.tar.gz -C "$SRC" --strip-components=1
    mark petsc-source
fi

export PETSC_DIR="$SRC" PETSC_ARCH
INCLUDES="-I/usr/include/hdf5/openmpi -I/usr/include/scotch -I/usr/include/superlu -I/usr/include/superlu-dist"
LIBS="-L/usr/lib/x86_64-linux-gnu/hdf5/openmpi"
if ! done_step petsc-configure; then
    say "3/6 PETSc configure (about 70 s)"
    cd "$SRC"
    logged petsc-configure ./configure PETSC_ARCH="$PETSC_ARCH" --with-debugging=0 --with-fortran-bindings=0 \
        --with-shared-libraries=1 --with-strict-petscerrorcode --with-c2html=0 --with-cuda=0 --with-bison \
        --with-fftw --with-hdf5 --with-hwloc --with-metis --with-mumps --with-netcdf --with-pnetcdf --with-ptscotch \
        --with-scalapack-lib=-lscalapack-openmpi --with-suitesparse --with-superlu_dist --with-zlib \
        "COPTFLAGS=-O2 $INCLUDES $LIBS" "CXXOPTFLAGS=-O2 $INCLUDES $LIBS" "FOPTFLAGS=-O2 $INCLUDES $LIBS"
    cd - >/dev/null
    mark petsc-configure
fi
if ! done_step petsc-build; then
    say "4/6 PETSc build (about 8 minutes on 2 cores)"
    logged petsc-build make -C "$SRC" PETSC_DIR="$SRC" PETSC_ARCH="$PETSC_ARCH" MAKE_NP="$JOBS" all
    mark petsc-build
fi

export CC=mpicc CXX=mpicxx MPICC=mpicc MPICXX=mpicxx HDF5_MPI=ON OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! done_step petsc4py; then
    say "5/6 petsc4py $PETSC_VERSION against this PETSc (about 4 minutes)"
    logged petsc4py "${PIP[@]}" install "petsc4py==$PETSC_VERSION"
    mark petsc4py
fi
if ! done_step firedrake; then
    say "6/6 firedrake $FIREDRAKE_VERSION (about 6 minutes; h5py compiled against MPI HDF5)"
    logged firedrake "${PIP[@]}" install --no-binary h5py "firedrake[check]==$FIREDRAKE_VERSION" numpy
    mark firedrake
fi
if ! done_step extras; then
    say "extras: gmsh (meshes of curved and holed domains)"
    logged extras "${PIP[@]}" install gmsh
    mark extras
fi

# the environment every Firedrake process of this project gets (the sandbox reads it)
cat >"$PREFIX/runtime.env" <<EOF
PETSC_DIR=$SRC
PETSC_ARCH=$PETSC_ARCH
OMP_NUM_THREADS=1
EOF

if ! done_step check; then
    say "checking: import firedrake and a small Poisson solve"
    logged check "$VENV/bin/python" - <<'EOF'
from firedrake import *
mesh = UnitSquareMesh(8, 8)
V = FunctionSpace(mesh, "CG", 1)
u, v = TrialFunction(V), TestFunction(V)
uh = Function(V)
solve(inner(grad(u), grad(v)) * dx == Constant(1.0) * v * dx, uh, bcs=[DirichletBC(V, 0, "on_boundary")])
assert 0.07 < uh.dat.data_ro.max() < 0.08, uh.dat.data_ro.max()
print("firedrake ok")
EOF
    mark check
fi
say "ready: $VENV ($(( $(date +%s) - started )) s this run)"
