"""Where specsweep keeps files: one documented, persistent home (never a Ray job's temporary cwd).

SPECSWEEP_HOME (default: $XDG_DATA_HOME/specsweep, i.e. ~/.local/share/specsweep) holds:
  specsweep.db   the default SQLite store
  cache/         converted demo model, vLLM/torch compile caches, drafter overlays
"""

from __future__ import annotations

import os
from pathlib import Path


def specsweep_home() -> Path:
    env = os.environ.get("SPECSWEEP_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "specsweep"


def cache_dir() -> Path:
    env = os.environ.get("SPECSWEEP_CACHE")
    return Path(env).expanduser() if env else specsweep_home() / "cache"


def default_store_url() -> str:
    return f"sqlite:///{specsweep_home() / 'specsweep.db'}"
