"""Backend registry: `engine.backend` in the spec -> EngineBackend class."""

from __future__ import annotations

from .base import EngineBackend, EngineConfig
from .fake import FakeBackend
from .vllm_backend import VllmBackend

BACKENDS: dict[str, type[EngineBackend]] = {"vllm": VllmBackend, "fake": FakeBackend}


def backend_class(name: str) -> type[EngineBackend]:
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown engine backend {name!r}; known: {', '.join(sorted(BACKENDS))}") from None


def make_backend(config: EngineConfig) -> EngineBackend:
    return backend_class(config.backend)(config)
