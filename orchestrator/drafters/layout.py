"""The EAGLE-3 drafter layout vLLM loads as `LlamaForCausalLMEagle3` (vllm/model_executor/models/llama_eagle3.py):
one decoder layer ("midlayer") whose attention reads [embedding || hidden] (2 x hidden inputs), an `fc` over the
concatenated auxiliary target features, a final norm and an lm_head over an optional reduced draft vocabulary
(`d2t`: draft id -> target id offset; `t2d`: target ids kept). Token embeddings are shared with the target.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..paths import atomic_folder


def default_aux_layers(num_layers: int) -> list[int]:
    """vLLM's default EAGLE-3 feature layers for a target of this depth: 2, L/2, L-3."""
    return [2, num_layers // 2, num_layers - 3]


def _one_layer_like(target_cfg: dict[str, Any]) -> dict[str, Any]:
    """Config fields of a one-decoder-layer drafter shaped like the target's layers."""
    hidden = target_cfg["hidden_size"]
    heads = target_cfg["num_attention_heads"]
    return {
        "hidden_size": hidden,
        "target_hidden_size": hidden,
        "intermediate_size": target_cfg.get("intermediate_size", 4 * hidden),
        "num_attention_heads": heads,
        "num_key_value_heads": target_cfg.get("num_key_value_heads", heads),
        "head_dim": target_cfg.get("head_dim", hidden // heads),
        "num_hidden_layers": 1,
        "rms_norm_eps": target_cfg.get("rms_norm_eps", 1e-5),
        # the drafter's positions use the target's rotary settings (transformers 5 nests them)
        "rope_theta": target_cfg.get("rope_theta") or (target_cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0),
        "max_position_embeddings": target_cfg.get("max_position_embeddings", 8192),
        "vocab_size": target_cfg["vocab_size"],
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }


def eagle3_config(target_cfg: dict[str, Any], draft_vocab_size: int | None = None,
                  aux_layers: list[int] | None = None) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        **_one_layer_like(target_cfg),
        "draft_vocab_size": draft_vocab_size or target_cfg["vocab_size"],
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": aux_layers or default_aux_layers(
            target_cfg["num_hidden_layers"])},
    }


def eagle3_weight_shapes(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    d = cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    n_aux = len(cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"])
    return {
        "midlayer.self_attn.q_proj.weight": (q, 2 * h),
        "midlayer.self_attn.k_proj.weight": (kv, 2 * h),
        "midlayer.self_attn.v_proj.weight": (kv, 2 * h),
        "midlayer.self_attn.o_proj.weight": (h, q),
        "midlayer.mlp.gate_proj.weight": (i, h),
        "midlayer.mlp.up_proj.weight": (i, h),
        "midlayer.mlp.down_proj.weight": (h, i),
        "midlayer.input_layernorm.weight": (h,),
        "midlayer.hidden_norm.weight": (h,),
        "midlayer.post_attention_layernorm.weight": (h,),
        "fc.weight": (h, n_aux * h),
        "norm.weight": (h,),
        "lm_head.weight": (cfg["draft_vocab_size"], h),
    }


def dflash_config(target_cfg: dict[str, Any], block_size: int = 8, mask_token_id: int | None = None,
                  layer_ids: list[int] | None = None) -> dict[str, Any]:
    """A one-layer DFlash drafter (vllm/model_executor/models/qwen3_dflash.py, Qwen3 decoder layer) for a target.
    `target_layer_ids` follow vLLM's convention (it adds 1): [1, L/2 - 1, L - 4] selects the EAGLE-3 features."""
    n = target_cfg["num_hidden_layers"]
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        **_one_layer_like(target_cfg),
        "attention_bias": False,
        "block_size": block_size,
        "dflash_config": {
            "target_layer_ids": layer_ids or [x - 1 for x in default_aux_layers(n)],
            "mask_token_id": mask_token_id if mask_token_id is not None else target_cfg["vocab_size"] - 1,
            "sample_from_anchor": False,
        },
    }


def dflash_weight_shapes(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Tensors of a DFlash drafter of cfg["num_hidden_layers"] layers; an lm_head only with a reduced
    `draft_vocab_size` (otherwise vLLM shares the target's)."""
    h, i, d = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    n_feat = len(cfg["dflash_config"]["target_layer_ids"])
    shapes: dict[str, tuple[int, ...]] = {}
    for n in range(cfg.get("num_hidden_layers", 1)):
        shapes.update({
            f"layers.{n}.self_attn.q_proj.weight": (q, h),
            f"layers.{n}.self_attn.k_proj.weight": (kv, h),
            f"layers.{n}.self_attn.v_proj.weight": (kv, h),
            f"layers.{n}.self_attn.o_proj.weight": (h, q),
            f"layers.{n}.self_attn.q_norm.weight": (d,),
            f"layers.{n}.self_attn.k_norm.weight": (d,),
            f"layers.{n}.mlp.gate_proj.weight": (i, h),
            f"layers.{n}.mlp.up_proj.weight": (i, h),
            f"layers.{n}.mlp.down_proj.weight": (h, i),
            f"layers.{n}.input_layernorm.weight": (h,),
            f"layers.{n}.post_attention_layernorm.weight": (h,),
        })
    shapes.update({"fc.weight": (h, n_feat * h), "hidden_norm.weight": (h,), "norm.weight": (h,)})
    if cfg.get("draft_vocab_size") not in (None, cfg["vocab_size"]):
        shapes["lm_head.weight"] = (cfg["draft_vocab_size"], h)
    return shapes


def write_checkpoint(out: Path, cfg: dict[str, Any], shapes: dict[str, tuple[int, ...]], weights: dict | None = None,
                     seed: int = 0, extra_files: dict[str, str | bytes] | None = None) -> Path:
    """Write config.json + model.safetensors atomically (a crash leaves no half-written folder). Entries of
    `shapes` missing from `weights` are random (normal * 0.02; norms 1); other given tensors (d2t, t2d) are
    written as they are."""
    import torch
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed)
    weights = dict(weights or {})
    tensors = {}
    for name, shape in shapes.items():
        if name in weights:
            t = weights.pop(name).detach().to(torch.float32).contiguous()
            if tuple(t.shape) != shape:
                raise ValueError(f"{name}: shape {tuple(t.shape)}, expected {shape}")
        elif name.endswith("norm.weight"):
            t = torch.ones(shape)
        else:
            t = torch.randn(shape, generator=gen) * 0.02
        tensors[name] = t
    tensors.update({k: v.contiguous() for k, v in weights.items()})
    with atomic_folder(Path(out)) as tmp:
        save_file(tensors, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
        for fname, content in (extra_files or {}).items():
            if isinstance(content, bytes):
                (tmp / fname).write_bytes(content)
            else:
                (tmp / fname).write_text(content, encoding="utf-8")
    return Path(out)


def write_eagle3_drafter(out: Path, cfg: dict[str, Any], weights: dict | None = None, seed: int = 0) -> Path:
    return write_checkpoint(out, cfg, eagle3_weight_shapes(cfg), weights, seed)


def write_dflash_drafter(out: Path, cfg: dict[str, Any], weights: dict | None = None, seed: int = 0) -> Path:
    return write_checkpoint(out, cfg, dflash_weight_shapes(cfg), weights, seed)


# The xPress project's published architecture name, and the name vLLM's DFlash config handling gives it
# (transformers_utils/configs/eagle.py prefixes "DFlash" to an architecture that neither starts nor ends with it).
XPRESS_ARCH = "Qwen3XPressModel"
XPRESS_ARCHS = (XPRESS_ARCH, "DFlash" + XPRESS_ARCH)


def xpress_config(dflash_cfg: dict[str, Any], rank: int, block_size: int, num_passes: int,
                  mlp_hidden: int | None = None, head_vocab: str = "target") -> dict[str, Any]:
    """An xPress drafter's config.json (the published layout): the DFlash drafter's config with the published
    architecture name and the head's keys. `head_vocab` "draft": the head reads and writes the drafter's reduced
    draft vocabulary (specsweep's key; absent in the published layout, which uses the target's)."""
    cfg = json.loads(json.dumps(dflash_cfg))
    cfg["architectures"] = [XPRESS_ARCH]
    cfg["model_type"] = "qwen3"
    cfg.update({"xpress_rank": rank, "xpress_mlp_hidden": mlp_hidden or 2 * rank, "xpress_block_size": block_size,
                "xpress_num_passes": num_passes, "sample_from_anchor": False})
    if head_vocab != "target":
        cfg["xpress_head_vocab"] = head_vocab
    return cfg


def xpress_weight_shapes(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The DFlash backbone's tensors plus the head's (`xpress_head.*`)."""
    from .xpress_config import HeadConfig

    return {**dflash_weight_shapes(cfg), **HeadConfig.from_config(cfg).shapes()}


def write_xpress_drafter(out: Path, cfg: dict[str, Any], weights: dict | None = None, seed: int = 0,
                         extra_files: dict[str, str | bytes] | None = None) -> Path:
    """Random tensors for anything not given, except the mixer `mix.L`, which starts at zero (the reference
    initialisation); norms 1."""
    import torch

    weights = dict(weights or {})
    shapes = xpress_weight_shapes(cfg)
    weights.setdefault("xpress_head.mix.L", torch.zeros(shapes["xpress_head.mix.L"]))
    return write_checkpoint(out, cfg, shapes, weights, seed, extra_files)
