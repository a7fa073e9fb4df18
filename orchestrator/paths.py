"""Where specsweep keeps files: one documented, persistent home (never a Ray job's temporary cwd).

SPECSWEEP_HOME (default: $XDG_DATA_HOME/specsweep, i.e. ~/.local/share/specsweep) holds:
  specsweep.db   the default SQLite store
  cache/         converted demo model, vLLM/torch compile caches, drafter overlays
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


def specsweep_home() -> Path:
    env = os.environ.get("SPECSWEEP_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "specsweep"


def cache_dir() -> Path:
    env = os.environ.get("SPECSWEEP_CACHE")
    return Path(env).expanduser() if env else specsweep_home() / "cache"


def db_dir() -> Path:
    """The store's migrations and saved queries: `db/` of the checkout this code runs from, else the copy a
    wheel carries inside the package (`orchestrator/_db`, put there at build time by setup.py)."""
    checkout = Path(__file__).resolve().parents[1] / "db"
    if (checkout / "migrations" / "env.py").is_file():
        return checkout
    return Path(__file__).resolve().parent / "_db"


def default_store_url() -> str:
    return f"sqlite:///{specsweep_home() / 'specsweep.db'}"


@contextlib.contextmanager
def atomic_folder(out: Path, replace: bool = True) -> Iterator[Path]:
    """Yield a temporary sibling folder to fill; on success it replaces `out` in one rename, on any error it
    is removed: a crash or a full disk never leaves a half-written model or drafter folder behind.
    `replace=False`: when another process finished `out` meanwhile, keep its folder (it may be in use, e.g.
    loaded by an engine) and drop ours — the first writer wins."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            if not replace:
                return
            shutil.rmtree(out)
        try:
            os.replace(tmp, out)
        except OSError:
            if replace or not out.exists():  # another writer's rename won the race: theirs stays
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
