"""Prompt sources, one module per dataset; `load_prompts(name, ...)` looks them up by name."""

from . import benchmarks, custom, demo_heldout, random_tokens, smoke  # noqa: F401  (registers)
from .base import DatasetError, Prompt, known_datasets, load_prompts

__all__ = ["DatasetError", "Prompt", "known_datasets", "load_prompts"]
