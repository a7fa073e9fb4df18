"""A DFlash (block diffusion) drafter in plain PyTorch, trained to fill a block of mask slots in one pass,
exported in the layout vLLM loads as `DFlashDraftModel` (vllm/model_executor/models/qwen3_dflash.py).

Inference in vLLM, which training mirrors: the target's features at the context positions 0..p-1 go
through fc and hidden_norm into each layer's K/V cache (k_norm and RoPE applied); the query block is
[x_p (the token just verified), mask x K] at positions p..p+K, attending to all context K/V and to the
whole block (non-causal); mask slot j predicts x[p+j]. The lm_head and token embeddings are the target's
(shared by vLLM when the checkpoint ships none); the mask slots' embedding is trained and shipped as
mask_embedding.pt. `sample_from_anchor` is false (vLLM's dflash refuses true).

Training draws ANCHORS_PER_SEQ // block_size anchor positions per response (seeded): many blocks per batch.
Slot k's loss is weighted exp(-(k - 1) / LOSS_DECAY) (the DFlash paper's weighting, gamma = 7 for block 16):
a draft is accepted only up to its first miss, so the early slots matter most.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..layout import dflash_config
from .eagle3 import RMSNorm, rope
from .loop import run_training, tail_means

ANCHORS_PER_SEQ = 128  # block slots per sequence and step: 128 // block_size anchors
MAX_LEN = 384
LOSS_DECAY = 7.0


class DFlashDrafter(nn.Module):
    def __init__(self, cfg: dict, embed: torch.Tensor, final_norm: torch.Tensor, mask_token_id: int):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.H, self.KV, self.d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        self.theta = float(cfg["rope_theta"])
        eps = cfg["rms_norm_eps"]
        n_feat = len(cfg["dflash_config"]["target_layer_ids"])
        self.fc = nn.Linear(n_feat * h, h, bias=False)
        self.hidden_norm, self.input_layernorm = RMSNorm(h, eps), RMSNorm(h, eps)
        self.post_attention_layernorm, self.norm = RMSNorm(h, eps), RMSNorm(h, eps)
        self.q_proj = nn.Linear(h, self.H * self.d, bias=False)
        self.k_proj = nn.Linear(h, self.KV * self.d, bias=False)
        self.v_proj = nn.Linear(h, self.KV * self.d, bias=False)
        self.o_proj = nn.Linear(self.H * self.d, h, bias=False)
        self.q_norm, self.k_norm = RMSNorm(self.d, eps), RMSNorm(self.d, eps)
        self.gate_proj, self.up_proj = nn.Linear(h, i, bias=False), nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)
        self.mask_embedding = nn.Parameter(embed.mean(0).clone())
        self.register_buffer("embed", embed, persistent=False)  # the target's (tied lm_head), frozen
        self.mask_token_id = mask_token_id
        with torch.no_grad():
            for lin in (self.q_proj, self.k_proj, self.v_proj, self.o_proj, self.gate_proj, self.up_proj,
                        self.down_proj):
                nn.init.normal_(lin.weight, std=0.02)
            self.fc.weight.zero_()
            self.fc.weight[:, -h:] = torch.eye(h)
            self.norm.weight.copy_(final_norm)

    def forward(self, tokens, feats, anchors):
        """tokens (B, L); feats (B, L, n*h); anchors (B, A) positions p (x_p known, context 0..p-1).
        Returns the normed output states (B, A, bs, h) of the block slots (slot 0 = the anchor token); logits =
        states @ embed.T (the caller applies it to labelled slots only: the vocabulary projection dominates)."""
        B, L = tokens.shape
        A = anchors.shape[1]
        bs = self.block_size
        rep = self.H // self.KV
        ctx = self.hidden_norm(self.fc(feats))
        kc = rope(self.k_norm(self.k_proj(ctx).view(B, L, self.KV, self.d)), torch.arange(L), self.theta)
        vc = self.v_proj(ctx).view(B, L, self.KV, self.d)
        kc = kc.repeat_interleave(rep, 2).transpose(1, 2)  # (B, H, L, d)
        vc = vc.repeat_interleave(rep, 2).transpose(1, 2)
        emb = self.embed[tokens.gather(1, anchors)]  # (B, A, h)
        x = self.mask_embedding.expand(B, A, bs, -1).clone()
        x[:, :, 0] = emb
        pos = anchors[:, :, None] + torch.arange(bs)[None, None]  # (B, A, bs)
        residual = x
        hq = self.input_layernorm(x)
        q = self.q_norm(self.q_proj(hq).view(B, A, bs, self.H, self.d))
        k = self.k_norm(self.k_proj(hq).view(B, A, bs, self.KV, self.d))
        v = self.v_proj(hq).view(B, A, bs, self.KV, self.d)
        q = rope(q, pos, self.theta)
        k = rope(k, pos, self.theta).repeat_interleave(rep, 3)
        v = v.repeat_interleave(rep, 3)
        scale = 1.0 / math.sqrt(self.d)
        qh = q.permute(0, 3, 1, 2, 4)  # (B, H, A, bs, d)
        s_ctx = torch.einsum("bhasd,bhld->bhasl", qh, kc) * scale
        ctx_ok = torch.arange(L)[None, None, :] < anchors[:, :, None]  # (B, A, L): context 0..p-1
        s_ctx = s_ctx.masked_fill(~ctx_ok[:, None, :, None, :], float("-inf"))
        kh, vh = k.permute(0, 3, 1, 2, 4), v.permute(0, 3, 1, 2, 4)  # (B, H, A, bs, d)
        s_blk = torch.einsum("bhasd,bhatd->bhast", qh, kh) * scale
        p = torch.softmax(torch.cat([s_ctx, s_blk], -1), -1)
        att = torch.einsum("bhasl,bhld->bhasd", p[..., :L], vc) + torch.einsum("bhast,bhatd->bhasd", p[..., L:], vh)
        att = att.permute(0, 2, 3, 1, 4).reshape(B, A, bs, self.H * self.d)
        residual = residual + self.o_proj(att)
        hm = self.post_attention_layernorm(residual)
        residual = residual + self.down_proj(F.silu(self.gate_proj(hm)) * self.up_proj(hm))
        return self.norm(residual)

    def export_weights(self) -> dict[str, torch.Tensor]:
        m = {"fc.weight": self.fc.weight, "hidden_norm.weight": self.hidden_norm.weight, "norm.weight": self.norm.weight}
        for name in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
            m[f"layers.0.self_attn.{name}.weight"] = getattr(self, name).weight
        for name in ("gate_proj", "up_proj", "down_proj"):
            m[f"layers.0.mlp.{name}.weight"] = getattr(self, name).weight
        for name in ("input_layernorm", "post_attention_layernorm"):
            m[f"layers.0.{name}.weight"] = getattr(self, name).weight
        return {k: v.detach().float().contiguous() for k, v in m.items()}


def _batch(data: dict, idx: list[int], n_anchor: int, bs: int, gen: torch.Generator):
    seqs = [data["tokens"][i][:MAX_LEN] for i in idx]
    L = max(len(x) for x in seqs)
    B = len(seqs)
    tokens = torch.zeros(B, L, dtype=torch.long)
    feats = torch.zeros(B, L, data["features"][idx[0]].shape[-1])
    anchors = torch.zeros(B, n_anchor, dtype=torch.long)
    labels = torch.full((B, n_anchor, bs), -1, dtype=torch.long)
    for b, (i, x) in enumerate(zip(idx, seqs)):
        n = len(x)
        tokens[b, :n] = x
        feats[b, :n] = data["features"][i][:n].float()
        lo, hi = max(1, data["prompt_lens"][i]), n - 2  # anchor x_p in the response, at least one label after
        if hi < lo:
            lo, hi = max(1, n - 2), max(1, n - 2)
        anchors[b] = torch.randint(lo, hi + 1, (n_anchor,), generator=gen)
        for a in range(n_anchor):
            p = int(anchors[b, a])
            for j in range(1, bs):
                if p + j < n:
                    labels[b, a, j] = x[p + j]
    return tokens, feats, anchors, labels


def train_dflash(s, target_cfg: dict, data: dict, tensors: dict, work: Path, progress):
    torch.set_num_threads(os.cpu_count() or 1)
    cfg = dflash_config(target_cfg, block_size=s.block_size)
    bs = s.block_size
    torch.manual_seed(s.seed)
    model = DFlashDrafter(cfg, tensors["embed"], tensors["final_norm"], cfg["dflash_config"]["mask_token_id"])
    model.block_size = bs

    slot = torch.arange(bs)
    slot_weight = torch.exp(-(slot - 1).clamp_min(0).float() / LOSS_DECAY)

    def step_fn(idx, g):
        tokens, feats, anchors, labels = _batch(data, idx, max(2, ANCHORS_PER_SEQ // bs), bs, g)
        states = model(tokens, feats, anchors)
        m = labels >= 0
        logits = states[m] @ model.embed.T
        target = labels[m]
        slots = slot.expand_as(labels)[m]
        w = slot_weight[slots]
        loss = (F.cross_entropy(logits.float(), target, reduction="none") * w).sum() / w.sum()
        with torch.no_grad():
            hit = logits.argmax(-1) == target
            accs = [float(hit[slots == j].float().mean()) if (slots == j).any() else float("nan")
                    for j in range(1, bs)]
        return loss, [loss.item()], accs, f"loss {loss.item():.2f} acc slot1 {accs[0]:.2f} slot{bs - 1} {accs[-1]:.2f}"

    run = run_training(s, model, work / "train_state_dflash.pt", len(data["tokens"]), step_fn, progress)
    result = {"steps_done": run["steps_done"], "stopped_early": run["stopped_early"], "seconds": run["seconds"],
              "resumed_from_step": run["resumed_from_step"],
              "final_losses": tail_means(run["history"], "losses", 1),
              "final_accuracy": tail_means(run["history"], "accuracy", bs - 1)}
    weights = model.export_weights()
    buf = io.BytesIO()
    torch.save({"mask_token_id": cfg["dflash_config"]["mask_token_id"],
                "embedding": model.mask_embedding.detach().float().clone()}, buf)
    weights["__mask_embedding_pt__"] = buf.getvalue()
    return cfg, weights, result
