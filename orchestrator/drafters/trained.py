"""`trained:<method>` in a spec's drafter `model`: the drafter `specsweep drafters train --method <method>`
produced for the demo target with default settings (cached under SPECSWEEP_CACHE/drafters)."""

from __future__ import annotations

from pathlib import Path

PREFIX = "trained:"


def is_trained_alias(model: str) -> bool:
    return isinstance(model, str) and model.startswith(PREFIX)


def resolve_trained(model: str) -> Path:
    """The drafter folder for `trained:eagle3` / `trained:dflash`; FileNotFoundError says how to make it."""
    from .train.run import METHODS, TrainSettings, drafter_folder

    method = model[len(PREFIX):]
    if method not in METHODS:
        raise FileNotFoundError(f"{model}: unknown trained drafter; known: "
                                + ", ".join(PREFIX + m for m in METHODS))
    folder = drafter_folder(TrainSettings(method=method))
    if not (folder / "manifest.json").is_file():
        raise FileNotFoundError(f"{model}: no trained drafter yet (looked in {folder}); train it first with "
                                f"`specsweep drafters train --method {method}` (cached afterwards)")
    return folder
