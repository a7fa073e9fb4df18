"""An EAGLE-3 drafter in plain PyTorch, trained with training-time test (TTT), exported in the layout vLLM
loads as `LlamaForCausalLMEagle3` (vllm/model_executor/models/llama_eagle3.py).

Inference in vLLM, which training mirrors: at position t the drafter reads the embedding of token x[t+1]
and fc(target features at t) and predicts x[t+2]; each further draft step feeds the drafter's own
pre-norm output hidden state back with the token just drafted, one position later, attending to the
first pass's keys up to its row and to its own earlier steps at that row (the "diagonal"). The layer:
  e = input_layernorm(embed(tok)); residual = hidden; h = hidden_norm(hidden)
  a = o_proj(attn(q,k,v of [e || h])); residual += a; m = mlp(post_attention_layernorm(residual))
  residual += m; logits = lm_head(norm(residual)); next hidden = residual
Labels: the target's own greedy tokens (the responses are its greedy output), on response positions only,
mapped into a reduced draft vocabulary (the most frequent response tokens; `d2t` maps back).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(v + self.eps)).to(x.dtype) * self.weight


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding, Llama's rotate-half (neox) convention. x: (..., heads, d); pos: x's leading shape
    without heads, or any shape that broadcasts to it (e.g. (T,) for x (B, T, H, d))."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = pos.float()[..., None] * inv
    cos = torch.cat([ang.cos(), ang.cos()], -1)[..., None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[..., None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Eagle3Drafter(nn.Module):
    def __init__(self, cfg: dict[str, Any], embed: torch.Tensor):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.H, self.KV, self.d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        self.theta = float(cfg["rope_theta"])
        eps = cfg["rms_norm_eps"]
        n_aux = len(cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"])
        self.fc = nn.Linear(n_aux * h, h, bias=False)
        self.input_layernorm, self.hidden_norm = RMSNorm(h, eps), RMSNorm(h, eps)
        self.post_attention_layernorm, self.norm = RMSNorm(h, eps), RMSNorm(h, eps)
        self.q_proj = nn.Linear(2 * h, self.H * self.d, bias=False)
        self.k_proj = nn.Linear(2 * h, self.KV * self.d, bias=False)
        self.v_proj = nn.Linear(2 * h, self.KV * self.d, bias=False)
        self.o_proj = nn.Linear(self.H * self.d, h, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(h, i, bias=False), nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)
        self.lm_head = nn.Linear(h, cfg["draft_vocab_size"], bias=False)
        self.register_buffer("embed", embed, persistent=False)  # the target's, frozen (vLLM shares it)

    def forward(self, tokens: torch.Tensor, feats: torch.Tensor, valid: torch.Tensor, steps: int) -> list[torch.Tensor]:
        """tokens: (B, L) ids; feats: (B, L, n_aux*h); valid: (B, L) bool. Returns per step the normed output
        states (B, T, h), T = L - 1 (logits = lm_head of them); step s at row i predicts x[i + 2 + s]."""
        B, L = tokens.shape
        T = L - 1
        hidden = self.fc(feats[:, :T])
        rows = torch.arange(T)
        key_ok = valid[:, :T]  # step-1 keys that exist
        causal = rows[None, :] <= rows[:, None]  # (T, T): key j visible from row i
        mask1 = causal[None, None] & key_ok[:, None, None, :]
        k1 = v1 = None
        diag_k, diag_v, out = [], [], []
        rep = self.H // self.KV
        for s in range(steps):
            tok = torch.zeros(B, T, dtype=torch.long)
            n = max(0, min(T, L - 1 - s))
            tok[:, :n] = tokens[:, 1 + s: 1 + s + n]
            e = self.input_layernorm(self.embed[tok])
            residual = hidden
            x = torch.cat([e, self.hidden_norm(hidden)], -1)
            pos = rows + s
            q = rope(self.q_proj(x).view(B, T, self.H, self.d), pos, self.theta)
            k = rope(self.k_proj(x).view(B, T, self.KV, self.d), pos, self.theta).repeat_interleave(rep, dim=2)
            v = self.v_proj(x).view(B, T, self.KV, self.d).repeat_interleave(rep, dim=2)
            qh = q.transpose(1, 2)  # (B, H, T, d)
            if s == 0:
                k1, v1 = k.transpose(1, 2), v.transpose(1, 2)
            else:
                diag_k.append(k.transpose(1, 2))
                diag_v.append(v.transpose(1, 2))
            scale = 1.0 / math.sqrt(self.d)
            assert k1 is not None and v1 is not None  # set at s == 0
            s1 = (qh @ k1.transpose(-1, -2)) * scale
            s1 = s1.masked_fill(~mask1, float("-inf"))
            sd = [((qh * dk).sum(-1, keepdim=True) * scale) for dk in diag_k]
            p = torch.softmax(torch.cat([s1] + sd, -1), -1)
            att = p[..., :T] @ v1
            for j, dv in enumerate(diag_v):
                att = att + p[..., T + j: T + j + 1] * dv
            a = self.o_proj(att.transpose(1, 2).reshape(B, T, self.H * self.d))
            residual = residual + a
            hm = self.post_attention_layernorm(residual)
            residual = residual + self.down_proj(F.silu(self.gate_proj(hm)) * self.up_proj(hm))
            out.append(self.norm(residual))  # the lm_head is applied by the caller, on labelled rows only
            hidden = residual
        return out

    def export_weights(self) -> dict[str, torch.Tensor]:
        """Tensors named as vLLM's loader expects (midlayer.* -> layers.0.*; no embed_tokens: shared)."""
        m = {"fc.weight": self.fc.weight, "norm.weight": self.norm.weight, "lm_head.weight": self.lm_head.weight}
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            m[f"midlayer.self_attn.{name}.weight"] = getattr(self, name).weight
        for name in ("gate_proj", "up_proj", "down_proj"):
            m[f"midlayer.mlp.{name}.weight"] = getattr(self, name).weight
        for name in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
            m[f"midlayer.{name}.weight"] = getattr(self, name).weight
        return {k: v.detach().float().contiguous() for k, v in m.items()}


def draft_vocabulary(responses: list[list[int]], size: int, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `size` most frequent response tokens (ties by id), sorted by id: (draft -> target ids, t2d mask)."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for r in responses:
        counts.index_add_(0, torch.tensor(r, dtype=torch.long), torch.ones(len(r), dtype=torch.long))
    order = sorted(range(vocab_size), key=lambda t: (-int(counts[t]), t))[:size]
    target_ids = torch.tensor(sorted(order), dtype=torch.long)
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[target_ids] = True
    return target_ids, t2d


def draft_index(draft_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Target id -> draft id (-1 for tokens outside the draft vocabulary)."""
    index = torch.full((vocab_size,), -1, dtype=torch.long)
    index[draft_ids] = torch.arange(len(draft_ids))
    return index


def init_drafter(cfg: dict[str, Any], embed: torch.Tensor, final_norm: torch.Tensor, target_ids: torch.Tensor,
                 seed: int) -> Eagle3Drafter:
    torch.manual_seed(seed)
    model = Eagle3Drafter(cfg, embed)
    h = cfg["hidden_size"]
    with torch.no_grad():
        for lin in (model.q_proj, model.k_proj, model.v_proj, model.o_proj, model.gate_proj, model.up_proj,
                    model.down_proj):
            nn.init.normal_(lin.weight, std=0.02)
        model.fc.weight.zero_()
        model.fc.weight[:, -h:] = torch.eye(h)  # start from the last feature layer's state
        model.lm_head.weight.copy_(embed[target_ids])  # tied target embeddings: its lm_head rows
        model.norm.weight.copy_(final_norm)
    return model
