"""The name of this kind of machine, which a runtime baseline is only like for like on."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path


def machine_key() -> str:
    """A stable name for this kind of machine: CPU model, cores, memory."""
    if os.environ.get("PDEBENCH_MACHINE"):
        return os.environ["PDEBENCH_MACHINE"]
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1]
                break
    except OSError:
        pass
    try:
        memory_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError):
        memory_gb = 0
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") or "unknown-cpu"
    return f"{slug}-{os.cpu_count()}cpu-{memory_gb}gb"
