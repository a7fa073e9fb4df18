"""xPress: a DFlash-style block drafter refined by Jacobi passes. NOT in any vLLM release: it needs vllm
PR #54448 or the xPress repository's `vllm_xpress/` patch on a pinned vLLM commit.

K is fixed to block_size - 1 (xPress rejects K below the block). The refinement passes are
`xpress_num_passes` in the drafter's config.json, read at engine start, so sweeping them uses a drafter
overlay per value: a cache folder with an edited config.json beside links to the original weights.
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

XPRESS_HOWTO = ("xPress is not in any vLLM release: install vLLM with PR #54448 applied, or the xPress "
                "repository's vllm_xpress patch on its pinned vLLM commit")


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


@register
class XPress(Method):
    name = "xpress"
    description = "xPress drafter (needs a patched vLLM, see module doc); K = block_size - 1"
    parameters = {
        "model": Param(str, "xPress drafter folder or hub id", required=True),
        "xpress_num_passes": Param(int, "Jacobi refinement passes (0 = bare DFlash backbone); default: the drafter's",
                                   ge=0, le=32, sweepable=True),
        "block_size": Param(int, "the drafter's block (needed only when the drafter is not local)", ge=2, le=65),
    }

    needs_check = True

    def check(self, point: MethodPoint, ctx: CheckContext) -> dict[str, Any]:
        ctx.require_vllm_method("xpress", XPRESS_HOWTO)
        cfg = read_model_config(point.params["model"])
        if cfg is None:
            if "block_size" not in point.params:
                raise MethodError("block_size", f"drafter {point.params['model']} is not local, so its block size "
                                                f"cannot be read: give block_size")
            if "xpress_num_passes" in point.params:
                raise MethodError("xpress_num_passes", "sweeping passes needs the drafter folder locally (an "
                                                       "overlay of its config.json is written)")
            return {"num_speculative_tokens": point.params["block_size"] - 1}
        block = block_size_of(cfg)
        if block is None:
            raise MethodError("model", f"{point.params['model']}: config.json has no block_size: not an xPress drafter")
        if "block_size" in point.params and point.params["block_size"] != block:
            raise MethodError("block_size", f"block_size={point.params['block_size']} but the drafter's is {block}")
        check_drafter_matches_target(ctx, cfg, nested(cfg, "dflash_config", "target_layer_ids"), "target_layer_ids")
        return {"num_speculative_tokens": block - 1, "block_size": block,
                "xpress_num_passes": point.params.get("xpress_num_passes", cfg.get("xpress_num_passes", 6))}

    def speculative_config(self, point: MethodPoint) -> dict[str, Any]:
        from ..models import resolve_model
        from ..paths import cache_dir

        model = resolve_model(point.params["model"])
        if "xpress_num_passes" in point.params:
            model = str(drafter_overlay(Path(model), {"xpress_num_passes": point.params["xpress_num_passes"]},
                                        cache_dir() / "overlays"))
        k = point.num_speculative_tokens
        if k is None:
            raise MethodError("model", "K unknown: the drafter was not checked (run the method checks first)")
        return {"method": "xpress", "model": model, "num_speculative_tokens": k}
