"""The EAGLE-3 drafter layout vLLM loads as `LlamaForCausalLMEagle3` (vllm/model_executor/models/llama_eagle3.py):
one decoder layer ("midlayer") whose attention reads [embedding || hidden] (2 x hidden inputs), an `fc` over the
concatenated auxiliary target features, a final norm and an lm_head over an optional reduced draft vocabulary
(`d2t`: draft id -> target id offset; `t2d`: target ids kept). Token embeddings are shared with the target.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def default_aux_layers(num_layers: int) -> list[int]:
    """vLLM's default EAGLE-3 feature layers for a target of this depth: 2, L/2, L-3."""
    return [2, num_layers // 2, num_layers - 3]


def eagle3_config(target_cfg: dict[str, Any], draft_vocab_size: int | None = None,
                  aux_layers: list[int] | None = None) -> dict[str, Any]:
    hidden = target_cfg["hidden_size"]
    heads = target_cfg["num_attention_heads"]
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
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
        "draft_vocab_size": draft_vocab_size or target_cfg["vocab_size"],
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
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


def write_eagle3_drafter(out: Path, cfg: dict[str, Any], weights: dict | None = None, seed: int = 0,
                         extra_files: dict[str, str] | None = None) -> Path:
    """Write config.json + model.safetensors atomically (a crash leaves no half-written folder).
    `weights` missing entries are random (normal * 0.02; norms 1); `d2t`/`t2d` are included when given."""
    import torch
    from safetensors.torch import save_file

    shapes = eagle3_weight_shapes(cfg)
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, shape in shapes.items():
        if weights and name in weights:
            t = weights[name].detach().to(torch.float32).contiguous()
            if tuple(t.shape) != shape:
                raise ValueError(f"{name}: shape {tuple(t.shape)}, expected {shape}")
        elif name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            t = torch.ones(shape)
        else:
            t = torch.randn(shape, generator=gen) * 0.02
        tensors[name] = t
    for name in ("d2t", "t2d"):
        if weights and name in weights:
            tensors[name] = weights[name].contiguous()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        save_file(tensors, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
        for fname, text in (extra_files or {}).items():
            (tmp / fname).write_text(text, encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out
