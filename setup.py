"""The wheel carries the checkout's bundled folders (see pytest_pdebench/bundled.py) as
pytest_pdebench/_bundled/, so that an installed plugin finds its cases, calibrations,
guides, reference solvers and container recipes from any folder. Everything else about
the package is in pyproject.toml; an editable install reads the folders from the checkout."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
FOLDERS = ("cases", "calibrations", "guides", "submissions", "containers")  # as bundled.FOLDERS


class BuildWithBundledFolders(build_py):
    def run(self):
        if not getattr(self, "editable_mode", False):
            # pip builds in the checkout's build/: a file deleted since the last build would ship
            shutil.rmtree(Path(self.build_lib) / "pytest_pdebench", ignore_errors=True)
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "pytest_pdebench" / "_bundled"
        for name in FOLDERS:
            if (HERE / name).is_dir():  # an sdist built without them says so in the test that installs it
                shutil.copytree(HERE / name, target / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip


setup(cmdclass={"build_py": BuildWithBundledFolders})
