"""The DOLFINx track: DOLFINx 0.11 from PyPI (``dolfinx-solver-real``) in Python 3.12."""

from __future__ import annotations

from pathlib import Path

from ..kernel_cache import KernelRule
from .base import PythonTrack

# FFCx (XDG_CACHE_HOME/fenics): per form module a shared library, its C source and a
# build log whose presence says "compiled"; only the library's content is needed
_FFCX_MODULE = r"(?P<module>fenics/libffcx_(forms|expressions|elements)_[0-9a-f]{40})"


class DolfinxTrack(PythonTrack):
    name = "dolfinx"
    python_env_var = "PDEBENCH_DOLFINX_PYTHON"
    # mpi4py first: the wheel's libmpi is only found once mpi4py has loaded it
    probe_modules = "mpi4py.MPI, dolfinx"
    version_expr = "dolfinx.__version__"
    preload = "mpi4py.MPI,numpy,dolfinx,dolfinx.fem.petsc,ufl,basix"
    track_modules = ("dolfinx", "petsc4py", "mpi4py", "ufl", "basix", "ffcx")
    # what imports without initialising MPI (petsc4py, so dolfinx, initialises it at import)
    # (cffi's C parser: dolfinx.fem.petsc parses its declarations at import, 10-20 ms a run)
    zygote_preload = "mpi4py.MPI,numpy,ufl,basix,basix.ufl,ffcx,ffcx.codegeneration.jit,cffi,cffi.cparser"
    zygote_libraries = ("petsc4py/lib/PETSc*.so", "dolfinx/cpp*.so")
    defer_mpi = True
    kernel_rules = (
        KernelRule(_FFCX_MODULE + r"\.cpython-[0-9a-z_-]+\.so", "elf"),
        KernelRule(_FFCX_MODULE + r"\.c(\.cached)?", "empty"),
    )
    # measured: a gated run of the oracle adds at most N files, M MB (docs/threat-model.md)
    kernel_files_per_run, kernel_bytes_per_run = 64, 32 << 20
    install_hint = (
        "Install DOLFINx 0.11 into a Python 3.12 environment with "
        "`pip install dolfinx-solver-real gmsh` (or run `make setup`), and run pytest from that "
        "environment or point PDEBENCH_DOLFINX_PYTHON at its python."
    )

    def extra_env(self, info: dict) -> dict[str, str]:
        # lets solvers that import dolfinx before mpi4py still find the wheel's libmpi
        return {"LD_LIBRARY_PATH": str(Path(info["prefix"]) / "lib")}
