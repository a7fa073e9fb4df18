"""Helpers shared by the benchmark scripts: write a spec, run it through the real controller."""

from __future__ import annotations

import os
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.controller.runner import run_sweep  # noqa: E402
from orchestrator.spec import load_spec  # noqa: E402
from orchestrator.store import Store  # noqa: E402

WORK = Path(tempfile.mkdtemp(prefix="specsweep-bench-"))
os.environ.setdefault("SPECSWEEP_HOME", str(WORK / "home"))


def run_spec(text: str, name: str, store: Store | None = None):
    path = WORK / f"{name}.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    store = store or Store(f"sqlite:///{WORK / (name + '.db')}")
    out = run_sweep(load_spec(path), store)
    return out, store
