"""Settings read from the environment: one parser, so every variable is refused in the same words."""

from __future__ import annotations

import math
import os


def env_seconds(name: str, default: float, *, allow_zero: bool, error: type[ValueError]) -> float:
    """$name as seconds (`default` when unset or empty); `error` names the variable and what is allowed."""
    raw = os.environ.get(name)
    if not raw:
        return default
    allowed = "a number >= 0" if allow_zero else "a number > 0"
    try:
        value = float(raw)
    except ValueError:
        raise error(f"{name}={raw!r}: expected seconds ({allowed})") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise error(f"{name}={raw!r}: expected seconds ({allowed})")
    return value
