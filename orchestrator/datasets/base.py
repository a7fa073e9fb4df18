"""Prompt sources. A dataset yields `Prompt`s: chat messages the engine renders with the target's template."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


class DatasetError(ValueError):
    """A dataset cannot be loaded (unknown name, missing or empty file, bad record)."""


@dataclass(frozen=True)
class Prompt:
    id: str
    messages: tuple[dict, ...]  # chat messages [{role, content}], rendered with the target's chat template
    category: str = ""
    input_len: int | None = None  # `random` prompts: this many random token ids, no chat template


Loader = Callable[..., list[Prompt]]
_REGISTRY: dict[str, Loader] = {}


def register(name: str):
    def deco(fn: Loader) -> Loader:
        _REGISTRY[name] = fn
        return fn

    return deco


def known_datasets() -> list[str]:
    return sorted(_REGISTRY)


def load_prompts(name: str, *, num_prompts: int, path: str | None = None, shuffle_seed: int | None = None,
                 **options) -> list[Prompt]:
    """Load `num_prompts` prompts. If the source has fewer, prompts are NOT cycled: fewer are returned
    (cycling repeats prompts, which inflates throughput under prefix caching)."""
    if name not in _REGISTRY:
        raise DatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(known_datasets())}")
    prompts = _REGISTRY[name](path=path, **options)
    if not prompts:
        raise DatasetError(f"dataset {name!r} has no prompts" + (f" ({path})" if path else ""))
    if shuffle_seed is not None:
        prompts = list(prompts)
        random.Random(shuffle_seed).shuffle(prompts)
    return prompts[:num_prompts]


def read_jsonl_prompts(path: Path, id_prefix: str) -> list[Prompt]:
    """Records with a `prompt` string (one user turn) or `messages` list; optional `id`, `category`."""
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise DatasetError(f"cannot read prompt file {path}: {e}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}:{n}: not valid JSON: {e.msg}") from None
        if not isinstance(rec, dict):
            raise DatasetError(f"{path}:{n}: each line must be a JSON object with a 'prompt' field")
        if isinstance(rec.get("messages"), list):
            messages = tuple(rec["messages"])
        elif isinstance(rec.get("prompt"), str) and rec["prompt"].strip():
            messages = ({"role": "user", "content": rec["prompt"]},)
        else:
            raise DatasetError(f"{path}:{n}: needs a non-empty string field 'prompt' (or a 'messages' list)")
        out.append(Prompt(id=str(rec.get("id", f"{id_prefix}-{n}")), messages=messages, category=str(rec.get("category", ""))))
    return out
