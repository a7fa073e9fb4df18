"""`smoke`: 40 builtin offline prompts written for this project (code, math, chat, rewriting)."""

from __future__ import annotations

from pathlib import Path

from .base import Prompt, read_jsonl_prompts, register

SMOKE_FILE = Path(__file__).with_name("smoke.jsonl")


@register("smoke")
def load_smoke(path: str | None = None, **_) -> list[Prompt]:
    return read_jsonl_prompts(SMOKE_FILE, "smoke")
