"""``--pde-sandbox=none``: the run as a plain child process in its own session, for machines
without bubblewrap (announced with a warning: no isolation at all)."""

from __future__ import annotations

from .base import HARNESS_DIR, Backend


class UnsandboxedBackend(Backend):
    """No isolation at all: same process handling, host paths."""

    name = "none"

    def paths(self, request):
        kernels = str(request.kernels.resolve()) if request.kernels is not None else ""
        return {
            "work": str(request.workdir.resolve()),
            "cache": str(request.cache_dir.resolve()),
            "kernels": kernels,
            "harness": str(HARNESS_DIR),
        }

    def wrap(self, request, argv, env):
        return argv, env, str(request.workdir)
