"""Where the bundled folders are: the suite's cases, the stored calibrations, the library
guides, the reference solvers (submissions/) and the container recipes.

In a checkout (or an editable install) they are the checkout's top-level folders; a wheel
carries copies under ``pytest_pdebench/_bundled/`` (setup.py puts them there), so an
installed plugin runs from any folder. A project folder with its own top-level folder of
that name (its own ``cases/``, say) takes precedence where the caller passes its rootdir.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent
INSTALLED = PACKAGE / "_bundled"
FOLDERS = ("cases", "calibrations", "guides", "submissions", "containers")  # what a wheel carries


def _in_checkout() -> bool:
    # site-packages has no pyproject.toml beside the package: its folders are other packages'
    return (CHECKOUT / "pyproject.toml").is_file()


def bundled(name: str, rootdir: Path | None = None) -> Path:
    """The bundled folder ``name`` (e.g. "cases", "submissions/oracle"): the rootdir's if it
    has one, else the checkout's, else the installed copy (returned even if missing, so that
    the caller's message names where it looked)."""
    if rootdir is not None and (rootdir / name).exists():
        return rootdir / name
    if _in_checkout() and (CHECKOUT / name).exists():
        return CHECKOUT / name
    return INSTALLED / name
