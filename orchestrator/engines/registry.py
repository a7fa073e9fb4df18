"""Backend registry: `engine.backend` in the spec -> EngineBackend class."""

from __future__ import annotations

from .base import EngineBackend, EngineConfig
from .fake import FakeBackend
from .vllm_backend import VllmBackend

BACKENDS: dict[str, type[EngineBackend]] = {"vllm": VllmBackend, "fake": FakeBackend}


def make_backend(config: EngineConfig) -> EngineBackend:
    try:
        return BACKENDS[config.backend](config)
    except KeyError:
        raise ValueError(f"unknown engine backend {config.backend!r}; known: {', '.join(sorted(BACKENDS))}") from None
