"""Method registry: name in sweep YAML -> Method class. A new drafter method is one new module here."""

from __future__ import annotations

from .base import Method, MethodError

_REGISTRY: dict[str, type[Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    if cls.name in _REGISTRY:
        raise RuntimeError(f"method {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def get_method(name: str) -> Method:
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise MethodError("", f"unknown method {name!r}; known methods: {', '.join(known_methods())}") from None


def known_methods() -> list[str]:
    return sorted(_REGISTRY)
