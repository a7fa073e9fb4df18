"""The DFlash (block diffusion) drafter in plain PyTorch: the same computation as vLLM's `DFlashDraftModel`
(vllm/model_executor/models/qwen3_dflash.py + vllm/v1/spec_decode/dflash.py), batched over many anchored
blocks for training and teacher-forced evaluation.

Inference in vLLM, which this mirrors:
- context: the target's feature states at the verified positions 0..p-1 go through `fc`, then `hidden_norm`,
  then each layer's k_proj / v_proj (k_norm, RoPE at their own positions) into that layer's K/V cache;
- query block: [x_p (the token just verified), mask x K] at positions p..p+K, embedded by the target's
  embeddings (the mask slots by the shipped `mask_embedding.pt`), through the decoder layers (pre-norm Qwen3
  layers: q/k norm, RoPE, attention over all context K/V and the whole block, non-causal), the final norm
  and the lm_head (the target's, or an own one over a reduced draft vocabulary with vLLM's d2t map);
- mask slot j predicts x[p + j]; the block is K + 1 long, so a drafter trained on 16-slot blocks sees a
  different attention pattern at K = 3 (4 slots): training therefore draws the block length per anchor.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .eagle3 import RMSNorm, rope


class DFlashLayer(nn.Module):
    def __init__(self, h: int, i: int, H: int, KV: int, d: int, eps: float):
        super().__init__()
        self.H, self.KV, self.d = H, KV, d
        self.q_proj = nn.Linear(h, H * d, bias=False)
        self.k_proj = nn.Linear(h, KV * d, bias=False)
        self.v_proj = nn.Linear(h, KV * d, bias=False)
        self.o_proj = nn.Linear(H * d, h, bias=False)
        self.q_norm, self.k_norm = RMSNorm(d, eps), RMSNorm(d, eps)
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(h, eps), RMSNorm(h, eps)
        self.gate_proj, self.up_proj = nn.Linear(h, i, bias=False), nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def context_kv(self, ctx: torch.Tensor, theta: float):
        """ctx (B, L, h) = hidden_norm(fc(features)) -> K, V (B, H, L, d) (K normed and rotated at 0..L-1)."""
        B, L, _ = ctx.shape
        rep = self.H // self.KV
        k = rope(self.k_norm(self.k_proj(ctx).view(B, L, self.KV, self.d)), torch.arange(L), theta)
        v = self.v_proj(ctx).view(B, L, self.KV, self.d)
        return k.repeat_interleave(rep, 2).transpose(1, 2), v.repeat_interleave(rep, 2).transpose(1, 2)

    def forward(self, x, pos, kc, vc, ctx_ok, blk_ok, theta: float, probe_keys=None, n_query: int | None = None):
        """x (B, A, bs, h) residual stream of the blocks; pos (B, A, bs); kc/vc (B, H, L, d); ctx_ok (B, A, L)
        context keys visible to each block; blk_ok (B, A, bs) block keys that exist (the block's length).
        probe_keys (B, A) context position per block: also return each head's attention weight on it and on
        the block's slot 0, (B, H, A, bs) each (training's attention guidance). n_query: compute the output of
        the first n_query slots only (every slot still serves as a key and value): exact for those slots, and
        all a last layer needs when later slots get no logits."""
        B, A, bs, _ = x.shape
        nq = bs if n_query is None else min(n_query, bs)
        rep = self.H // self.KV
        hq = self.input_layernorm(x)
        q = rope(self.q_norm(self.q_proj(hq[:, :, :nq]).view(B, A, nq, self.H, self.d)), pos[:, :, :nq], theta)
        k = rope(self.k_norm(self.k_proj(hq).view(B, A, bs, self.KV, self.d)), pos, theta).repeat_interleave(rep, 3)
        v = self.v_proj(hq).view(B, A, bs, self.KV, self.d).repeat_interleave(rep, 3)
        scale = 1.0 / math.sqrt(self.d)
        qh = q.permute(0, 3, 1, 2, 4)  # (B, H, A, bs, d)
        s_ctx = torch.einsum("bhasd,bhld->bhasl", qh, kc) * scale
        s_ctx = s_ctx.masked_fill(~ctx_ok[:, None, :, None, :], float("-inf"))
        kh, vh = k.permute(0, 3, 1, 2, 4), v.permute(0, 3, 1, 2, 4)
        s_blk = torch.einsum("bhasd,bhatd->bhast", qh, kh) * scale
        s_blk = s_blk.masked_fill(~blk_ok[:, None, :, None, :], float("-inf"))
        L = kc.shape[2]
        p = torch.softmax(torch.cat([s_ctx, s_blk], -1), -1)
        att = torch.einsum("bhasl,bhld->bhasd", p[..., :L], vc) + torch.einsum("bhast,bhatd->bhasd", p[..., L:], vh)
        x = x[:, :, :nq] + self.o_proj(att.permute(0, 2, 3, 1, 4).reshape(B, A, nq, self.H * self.d))
        hm = self.post_attention_layernorm(x)
        out = x + self.down_proj(F.silu(self.gate_proj(hm)) * self.up_proj(hm))
        if probe_keys is None:
            return out
        idx = probe_keys[:, None, :, None, None].expand(B, self.H, A, nq, 1)
        return out, p[..., :L].gather(-1, idx)[..., 0], p[..., L]

    def weights(self, prefix: str) -> dict[str, torch.Tensor]:
        m = {f"{prefix}.self_attn.{n}.weight": getattr(self, n).weight
             for n in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm")}
        m.update({f"{prefix}.mlp.{n}.weight": getattr(self, n).weight for n in ("gate_proj", "up_proj", "down_proj")})
        m.update({f"{prefix}.{n}.weight": getattr(self, n).weight for n in ("input_layernorm", "post_attention_layernorm")})
        return m


class DFlashDrafter(nn.Module):
    def __init__(self, cfg: dict, embed: torch.Tensor, final_norm: torch.Tensor,
                 draft_ids: torch.Tensor | None = None):
        """cfg: the drafter's config.json (layout.dflash_config); embed: the target's embeddings (frozen; its
        tied lm_head); draft_ids: target ids of an own reduced-vocabulary lm_head (None: the target's)."""
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        H, KV, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        eps = cfg["rms_norm_eps"]
        self.theta = float(cfg["rope_theta"])
        n_feat = len(cfg["dflash_config"]["target_layer_ids"])
        self.fc = nn.Linear(n_feat * h, h, bias=False)
        self.hidden_norm, self.norm = RMSNorm(h, eps), RMSNorm(h, eps)
        self.ctx_dropout = nn.Dropout(0.0)  # training only (no weights; vLLM has none)
        self.layers = nn.ModuleList(DFlashLayer(h, i, H, KV, d, eps) for _ in range(cfg["num_hidden_layers"]))
        self.mask_embedding = nn.Parameter(embed.mean(0).clone())
        self.register_buffer("embed", embed, persistent=False)
        self.mask_token_id = cfg["dflash_config"]["mask_token_id"]
        self.draft_ids = draft_ids
        self.lm_head = nn.Linear(h, len(draft_ids), bias=False) if draft_ids is not None else None
        with torch.no_grad():
            for layer in self.layers:
                for lin in (layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj, layer.gate_proj, layer.up_proj,
                            layer.down_proj):
                    nn.init.normal_(lin.weight, std=0.02)
            self.fc.weight.zero_()
            self.fc.weight[:, -h:] = torch.eye(h)  # start from the last feature layer's state
            self.norm.weight.copy_(final_norm)
            if self.lm_head is not None:
                self.lm_head.weight.copy_(embed[draft_ids])

    def forward(self, tokens, feats, anchors, block_lens=None, block_size: int = 16, ctx_extra: int = 0,
                guide: bool = False):
        """tokens (B, L); feats (B, L, n*h); anchors (B, A) positions p (x_p known, context 0..p-1); block_lens
        (B, A) slots per block (K + 1; None: block_size). Returns the normed states (B, A, block_size, h); slot
        0 is the anchor token, slot j predicts x[p + j]. `ctx_extra` = 1 lets a block see the feature at p too:
        a diagnostic only (vLLM cannot: the target has not run on x_p yet). `guide`: also return layer 0's
        attention weights on context position p - 1 and on the block's slot 0 (B, H, A, bs) each."""
        ctx, kvs = self._context(feats)
        if block_lens is None:
            blk_ok = torch.ones(*anchors.shape, block_size, dtype=torch.bool)
        else:
            blk_ok = torch.arange(block_size)[None, None, :] < block_lens[:, :, None]
        return self._blocks(tokens, ctx, kvs, anchors, blk_ok, block_size, ctx_extra, guide)

    def forward_by_length(self, tokens, feats, anchors, block_lens, block_size: int = 16, ctx_extra: int = 0,
                          max_slot: int | None = None):
        """The states `forward(tokens, feats, anchors, block_lens, block_size)` gives at every slot a block has
        (slots past a block's length are zeros here), computed with each block only as long as it is: the
        blocks of each length run as one batch of that length (padded per row to the row with the most of
        them), over the context K/V computed once. Same result to rounding (masked keys weigh exactly 0 in
        `forward`), for about (mean block length / block_size) of the slot work: training draws blocks of 4, 8
        and 16 slots, so `forward` spent ~40 % of a step on slots that do not exist. `max_slot`: states of slots
        0..max_slot only (later ones are zeros too; they still act as keys and values in every layer): the last
        layer then computes no query, attention output or MLP for slots that get no logits."""
        B, A = anchors.shape
        ctx, kvs = self._context(feats)
        out = None
        for n in sorted(set(block_lens.flatten().tolist())):
            sel = block_lens == n  # (B, A)
            count = sel.sum(1)
            width = int(count.max())
            order = torch.argsort((~sel).int(), dim=1, stable=True)[:, :width]  # (B, width): this length first
            valid = torch.arange(width)[None] < count[:, None]
            blk_ok = torch.ones(B, width, n, dtype=torch.bool)
            states = self._blocks(tokens, ctx, kvs, anchors.gather(1, order), blk_ok, n, ctx_extra, False,
                                  None if max_slot is None else max_slot + 1)
            if out is None:
                out = states.new_zeros(B, A, block_size, states.shape[-1])
            rows = torch.arange(B)[:, None].expand(B, width)[valid]
            out = out.index_put((rows, order[valid]), F.pad(states[valid], (0, 0, 0, block_size - states.shape[2])))
        return out

    def _context(self, feats):
        """hidden_norm(fc(features)) (B, L, h) and each layer's context K/V."""
        ctx = self.ctx_dropout(self.hidden_norm(self.fc(feats)))
        return ctx, [layer.context_kv(ctx, self.theta) for layer in self.layers]

    def _blocks(self, tokens, ctx, kvs, anchors, blk_ok, bs: int, ctx_extra: int, guide: bool,
                n_query: int | None = None):
        """The decoder layers over the blocks anchored at `anchors` (B, A), bs slots each (blk_ok (B, A, bs):
        the slots that exist), attending to the context before each anchor. n_query: the last layer computes
        (and this returns) the first n_query slots' states only."""
        B, L = tokens.shape
        A = anchors.shape[1]
        ctx_ok = torch.arange(L)[None, None, :] < (anchors[:, :, None] + ctx_extra)
        x = self.mask_embedding.to(ctx.dtype).expand(B, A, bs, -1).clone()
        x[:, :, 0] = self.embed[tokens.gather(1, anchors)].to(x.dtype)
        pos = anchors[:, :, None] + torch.arange(bs)[None, None]
        attn = None
        for n, (layer, (kc, vc)) in enumerate(zip(self.layers, kvs)):
            if guide and n == 0:
                x, w_prev, w_anchor = layer(x, pos, kc, vc, ctx_ok, blk_ok, self.theta,
                                              (anchors - 1 + ctx_extra).clamp(0, L - 1))
                attn = (w_prev, w_anchor)
            else:
                x = layer(x, pos, kc, vc, ctx_ok, blk_ok, self.theta,
                          n_query=n_query if n == len(self.layers) - 1 else None)
        return (self.norm(x), attn) if guide else self.norm(x)

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        """Over the draft vocabulary (own lm_head) or the target's whole vocabulary."""
        return self.lm_head(states) if self.lm_head is not None else states @ self.embed.T.to(states.dtype)

    def to_target_ids(self, draft_pred: torch.Tensor) -> torch.Tensor:
        return self.draft_ids[draft_pred] if self.draft_ids is not None else draft_pred

    def vllm_parameters(self) -> dict[str, nn.Parameter]:
        """The drafter's parameters under the names vLLM's loader expects (export and load both use it)."""
        m = {"fc.weight": self.fc.weight, "hidden_norm.weight": self.hidden_norm.weight, "norm.weight": self.norm.weight}
        for n, layer in enumerate(self.layers):
            m.update(layer.weights(f"layers.{n}"))
        if self.lm_head is not None:
            m["lm_head.weight"] = self.lm_head.weight
        return m

    def export_weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().float().contiguous() for k, v in self.vllm_parameters().items()}


def vllm_walk(accepted_at: dict[int, int], lo: int, hi: int) -> list[int]:
    """The anchors vLLM drafts from over a greedy answer: the first at `lo`; a step at p that accepts r drafts
    (`accepted_at[p]`) is followed by one at p + r + 1 (the r accepted tokens and the target's bonus token are
    verified), until past `hi`."""
    out, p = [], lo
    while p <= hi:
        out.append(p)
        p += accepted_at[p] + 1
    return out


def teacher_forced(model: DFlashDrafter, data: dict, indices: list[int], K: int, max_len: int = 384,
                   chunk: int = 64) -> dict:
    """Acceptance the drafter would get at T = 0 with K drafted tokens, block K + 1 as vLLM runs it, at every
    response position of the given examples: {"al": mean accepted length over every position (counting the
    bonus token, as vLLM's AL does), "al_walk": the same along the positions vLLM actually drafts from (a
    step at p that accepts r drafts verifies up to p + r + 1, the next step's anchor: vLLM's counters),
    "accept_by_pos": share of blocks whose first j drafts are all right (vLLM's per-position acceptance),
    "slot_acc": plain accuracy of slot j, "slot_lag": share of slot j's drafts (j >= 2) that equal the token
    slot j - 1 should draft (a parallel drafter repeating its previous slot), "blocks": n, "steps": the walk's
    drafting steps}. The responses are the target's greedy answers, so a draft is accepted exactly when it
    equals the next response token. `al` weighs a stretch of easy positions by its length, the walk crosses it
    in few steps: where acceptance comes in runs, `al` is above what vLLM reports."""
    model.eval()
    acc_len, by_pos, slot_hit, slot_n = [], torch.zeros(K), torch.zeros(K), torch.zeros(K)
    lag_hit = torch.zeros(K)
    walk: list[int] = []
    with torch.no_grad():
        for i in indices:
            x = data["tokens"][i][:max_len]
            n = len(x)
            lo, hi = max(1, data["prompt_lens"][i]), n - 2
            if hi < lo:
                continue
            feats = data["features"][i][:n].float()[None]
            run_at: dict[int, int] = {}
            for start in range(lo, hi + 1, chunk):
                anchors = torch.arange(start, min(hi + 1, start + chunk))[None]
                states = model(x[None], feats, anchors, block_size=K + 1)
                pred = model.to_target_ids(model.logits(states[0, :, 1:]).argmax(-1))  # (A, K)
                want = torch.full_like(pred, -1)
                for a, p in enumerate(anchors[0].tolist()):
                    m = min(K, n - 1 - p)
                    want[a, :m] = x[p + 1: p + 1 + m]
                hit = (pred == want) & (want >= 0)
                lag_hit[1:] += ((pred[:, 1:] == want[:, :-1]) & (want[:, 1:] >= 0)).sum(0).float()
                run = hit.long().cumprod(-1)
                run_at.update(zip(anchors[0].tolist(), run.sum(-1).tolist()))
                acc_len.append(1 + run.sum(-1).float())
                by_pos += run.sum(0).float()
                slot_hit += hit.sum(0).float()
                slot_n += (want >= 0).sum(0).float()
            walk += [1 + run_at[p] for p in vllm_walk(run_at, lo, hi)]
    model.train()
    al = torch.cat(acc_len)
    return {"al": float(al.mean()), "al_walk": sum(walk) / max(1, len(walk)), "steps": len(walk),
            "accept_by_pos": (by_pos / len(al)).tolist(),
            "slot_acc": (slot_hit / slot_n.clamp_min(1)).tolist(),
            "slot_lag": [None] + (lag_hit[1:] / slot_n[1:].clamp_min(1)).tolist(), "blocks": len(al)}


def load_dflash(folder, embed: torch.Tensor, final_norm: torch.Tensor) -> DFlashDrafter:
    """A drafter folder as vLLM loads it (config.json, model.safetensors, optional mask_embedding.pt), in
    this module's forward: what the agreement check runs against vLLM's own forward."""
    import json
    from pathlib import Path

    from safetensors.torch import load_file

    folder = Path(folder)
    cfg = json.loads((folder / "config.json").read_text())
    weights = load_file(str(folder / "model.safetensors"))
    draft_ids = None
    if "d2t" in weights:
        draft_ids = torch.arange(len(weights["d2t"])) + weights["d2t"]
    model = DFlashDrafter(cfg, embed, final_norm, draft_ids)
    own = model.vllm_parameters()
    missing = set(own) - set(weights)
    if missing:
        raise ValueError(f"{folder}: model.safetensors lacks {sorted(missing)}")
    with torch.no_grad():
        for k, p in own.items():
            p.copy_(weights[k])
        mask_file = folder / "mask_embedding.pt"
        if mask_file.is_file():
            m = torch.load(mask_file, weights_only=True)
            model.mask_embedding.copy_((m["embedding"] if isinstance(m, dict) else m).reshape(-1))
        else:  # vLLM embeds the mask slots with the target's embedding of mask_token_id
            model.mask_embedding.copy_(embed[model.mask_token_id])
    model.eval()
    return model
