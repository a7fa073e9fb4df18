"""Helpers shared by the benchmark scripts: write a spec, run it through the real controller.

Each script's specs and SQLite stores go to a temporary folder; the cache (converted demo model, trained
drafters, compile caches) is the user's own (`SPECSWEEP_CACHE`, default `$SPECSWEEP_HOME/cache`), so a
benchmark reuses what `specsweep prepare-model` / `drafters train` made. `fresh_cache()` switches this process
to an empty temporary cache instead, to time a first run from nothing."""

from __future__ import annotations

import os
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402

from orchestrator.controller.runner import run_sweep  # noqa: E402
from orchestrator.render import SweepConsole  # noqa: E402
from orchestrator.spec import load_spec  # noqa: E402
from orchestrator.store import Store  # noqa: E402

WORK = Path(tempfile.mkdtemp(prefix="specsweep-bench-"))


def fresh_cache() -> Path:
    """Use an empty cache under WORK for the rest of this process (and the engines it starts)."""
    path = WORK / "cache"
    os.environ["SPECSWEEP_CACHE"] = str(path)
    return path


def run_spec(text: str, name: str, store: Store | None = None, progress: bool = True):
    """Run the spec `text` as sweep `name`. `progress`: the sweep's progress on stderr, worded as `specsweep run`
    words it (engine starts, one line per trial with the time left), so a benchmark of many minutes is never
    silent; the benchmark's own figures stay on stdout. False where the rendering itself would be measured."""
    path = WORK / f"{name}.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    store = store or Store(f"sqlite:///{WORK / (name + '.db')}")
    if not progress:
        return run_sweep(load_spec(path), store), store
    err = Console(stderr=True)
    with SweepConsole(err, err) as show:
        out = run_sweep(load_spec(path), store, emit=show)
    return out, store
