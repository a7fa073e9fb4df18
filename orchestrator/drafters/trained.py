"""`trained:<method>` in a spec's drafter `model`: the drafter `specsweep drafters train --method <method>`
last produced for the demo target with default settings (cached under SPECSWEEP_CACHE/drafters).

The trainer records each such drafter in an index file (drafters/index.json) when it finishes or finds it
cached; resolving an alias reads only that file, so specs, planning and engines never import the training
pipeline. Running `specsweep drafters train --method M` again (as `make demo-drafters` does) refreshes the
entry when the training code or its prompts changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..paths import cache_dir

PREFIX = "trained:"
METHODS = ("eagle3", "dflash", "xpress")


def is_trained_alias(model: str) -> bool:
    return isinstance(model, str) and model.startswith(PREFIX)


def index_file() -> Path:
    return cache_dir() / "drafters" / "index.json"


def _read_index() -> dict[str, str]:
    try:
        return json.loads(index_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def record_trained(method: str, folder: Path) -> None:
    """The trainer's side: `folder` is now what `trained:<method>` means (written atomically)."""
    index = _read_index()
    index[method] = str(folder)
    f = index_file()
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_name(f".{f.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(index, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, f)


def resolve_trained(model: str) -> Path:
    """The drafter folder for `trained:eagle3` / `trained:dflash` / `trained:xpress`; FileNotFoundError says how to make it."""
    method = model[len(PREFIX):]
    if method not in METHODS:
        raise FileNotFoundError(f"{model}: unknown trained drafter; known: " + ", ".join(PREFIX + m for m in METHODS))
    entry = _read_index().get(method)
    folder = Path(entry) if entry else None
    if folder is None or not (folder / "manifest.json").is_file():
        where = f"looked in {index_file()}" + (f" -> {folder}" if folder else "")
        raise FileNotFoundError(f"{model}: no trained drafter yet ({where}); train it first with "
                                f"`specsweep drafters train --method {method}` (cached afterwards)")
    return folder
