"""`custom`: a local JSONL file (workload.path), one object per line with a `prompt` field."""

from __future__ import annotations

from pathlib import Path

from .base import DatasetError, Prompt, read_jsonl_prompts, register


@register("custom")
def load_custom(path: str | None = None, **_) -> list[Prompt]:
    if not path:
        raise DatasetError("dataset 'custom' needs workload.path: a JSONL file with a 'prompt' field per line")
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"dataset 'custom': file not found: {p}")
    return read_jsonl_prompts(p, p.stem)
