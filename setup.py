"""Build step that pyproject.toml cannot express: the wheel carries the store's migrations and saved queries
(`db/`, kept at the top of the repository) inside the package as `orchestrator/_db`, so an installed
specsweep (`pip install .`, a cluster image) can create, upgrade and query a store. A checkout (and an
editable install) reads `db/` itself (orchestrator/paths.py: db_dir)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class build_py_with_db(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "orchestrator" / "_db"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(ROOT / "db", target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": build_py_with_db})
