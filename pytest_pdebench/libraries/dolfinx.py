"""The DOLFINx track: DOLFINx 0.11 from PyPI (``dolfinx-solver-real``) in Python 3.12."""

from __future__ import annotations

from pathlib import Path

from . import PythonTrack


class DolfinxTrack(PythonTrack):
    name = "dolfinx"
    python_env_var = "PDEBENCH_DOLFINX_PYTHON"
    # mpi4py first: the wheel's libmpi is only found once mpi4py has loaded it
    probe_modules = "mpi4py.MPI, dolfinx"
    version_expr = "dolfinx.__version__"
    preload = "mpi4py.MPI,numpy,dolfinx,dolfinx.fem.petsc,ufl,basix"
    install_hint = (
        "Install DOLFINx 0.11 into a Python 3.12 environment with "
        "`pip install dolfinx-solver-real gmsh` (or run `make setup`), and run pytest from that "
        "environment or point PDEBENCH_DOLFINX_PYTHON at its python."
    )

    def extra_env(self, info: dict) -> dict[str, str]:
        # lets solvers that import dolfinx before mpi4py still find the wheel's libmpi
        return {"LD_LIBRARY_PATH": str(Path(info["prefix"]) / "lib")}
