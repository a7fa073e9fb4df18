"""Prompt-lookup (n-gram) speculation: drafts copied from the prompt, no drafter weights."""

from __future__ import annotations

from typing import Any

from .base import Method, MethodError, MethodPoint, Param
from .registry import register
from .schedule import SCHEDULE_PARAM, check_schedule, schedule_entry


@register
class Ngram(Method):
    name = "ngram"
    description = "prompt lookup decoding (vLLM method 'ngram')"
    parameters = {
        "num_speculative_tokens": Param(int, "draft tokens proposed per step (K)", required=True, ge=1, le=32, sweepable=True),
        "prompt_lookup_max": Param(int, "longest n-gram matched in the prompt", default=3, ge=1, le=16, sweepable=True),
        "prompt_lookup_min": Param(int, "shortest n-gram matched in the prompt", default=1, ge=1, le=16, sweepable=True),
        "num_speculative_tokens_per_batch_size": SCHEDULE_PARAM,
    }

    def validate_point(self, params: dict[str, Any]) -> None:  # noqa: D102
        check_schedule(params)
        if params["prompt_lookup_min"] > params["prompt_lookup_max"]:
            raise MethodError(
                "prompt_lookup_min",
                f"prompt_lookup_min={params['prompt_lookup_min']} exceeds prompt_lookup_max={params['prompt_lookup_max']}",
            )

    def speculative_config(self, point: MethodPoint) -> dict[str, Any]:
        p = point.params
        return {
            "method": "ngram",
            "num_speculative_tokens": p["num_speculative_tokens"],
            "prompt_lookup_max": p["prompt_lookup_max"],
            "prompt_lookup_min": p["prompt_lookup_min"],
            **schedule_entry(p),
        }
