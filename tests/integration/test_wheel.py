"""specsweep as a cluster image installs it: a built wheel in a fresh virtual environment (no editable
install, no checkout on the path) creates a store, reports its schema revision and runs a saved query."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.install
def test_wheel_installs_and_opens_a_store(tmp_path):
    # build from a copy of the tree's files (tracked and new, not ignored): no stale build/ folder can feed it
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split("\0")
    for f in filter(None, files):
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(src)], check=True, capture_output=True, text=True, timeout=600)
    (wheel,) = dist.glob("specsweep-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "orchestrator/_db/migrations/env.py" in names and "orchestrator/_db/queries/best-by-method.sql" in names
    assert any(n.startswith("orchestrator/_db/migrations/versions/0001") for n in names)

    # a fresh venv; the project's dependencies come from this environment's site-packages through a .pth
    # line (which does not run this environment's editable-install hook), specsweep itself only from the wheel
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "-q", str(wheel)], check=True,
                   capture_output=True, text=True, timeout=300)

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPECSWEEP_DB", "SPECSWEEP_DB_FILE")}
    env["SPECSWEEP_HOME"] = str(tmp_path / "home")
    where = subprocess.run([str(py), "-c", "import orchestrator, sys; print(orchestrator.__file__)"], cwd=tmp_path,
                           env=env, check=True, capture_output=True, text=True).stdout.strip()
    assert where.startswith(site), where  # the installed copy, not the checkout

    store = f"sqlite:///{tmp_path / 'store.db'}"
    specsweep = str(venv / "bin" / "specsweep")
    up = subprocess.run([specsweep, "db", "upgrade", "--store", store], cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    cur = subprocess.run([specsweep, "db", "current", "--store", store], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    from orchestrator.store.migrate import head_revision

    head = head_revision()  # the checkout's newest migration: the wheel must carry all of them
    assert cur.returncode == 0 and f"revision {head}" in cur.stdout and f"newest {head}" in cur.stdout, cur.stdout + cur.stderr
    q = subprocess.run([specsweep, "query", "--saved", "best-by-method", "-p", "sweep=none", "--store", store],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert q.returncode == 0 and "0 rows" in q.stdout, q.stdout + q.stderr
