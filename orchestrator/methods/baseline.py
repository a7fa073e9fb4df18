"""No speculation: the reference every speculative run is compared with."""

from __future__ import annotations

from .base import Method, MethodPoint
from .registry import register


@register
class Baseline(Method):
    name = "baseline"
    description = "plain decoding, no drafter"
    parameters = {}

    def speculative_config(self, point: MethodPoint) -> None:
        return None
