"""Classic draft-model speculation: a smaller LM of the same tokenizer proposes K tokens."""

from __future__ import annotations

from typing import Any

from .base import Method, MethodPoint, Param
from .registry import register


@register
class DraftModel(Method):
    name = "draft_model"
    description = "a small LM with the target's vocabulary drafts K tokens autoregressively"
    parameters = {
        "model": Param(str, "drafter folder or hub id (same tokenizer as the target)", required=True),
        "num_speculative_tokens": Param(int, "draft tokens proposed per step (K)", required=True, ge=1, le=32, sweepable=True),
    }

    def speculative_config(self, point: MethodPoint) -> dict[str, Any]:
        from ..models import resolve_model

        p = point.params
        return {
            "method": "draft_model",
            "model": resolve_model(p["model"]),
            "num_speculative_tokens": p["num_speculative_tokens"],
        }
