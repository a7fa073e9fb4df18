"""The xPress refiner head: what vLLM serves (through specsweep's plugin, `orchestrator/vllm_plugin/`) and what the
trainer fits (`drafters/train/xpress_train.py`) — one implementation, so the two cannot drift.

The head sits on a DFlash drafter's block: slot 0 is the verified anchor, slots 1..S-1 the drafted positions
(vLLM runs S = K + 1 slots). Tensors under `xpress_head.` (the xPress project's published names; no biases,
no norms): `w1` [V, r] embeds the previous token, `down_h` / `down_g` [r, H] project a slot's state and the
block mean, `in_proj` [r, 3r] mixes the three, `mix.L` [r, B, B] a per-channel causal mixer (stored raw:
its lower triangle is used, plus the identity), a SwiGLU `mlp` (gate/up [m, r], down [r, m]), and `w2`
[V, r] reads out a logit bias. One pass:

    a_k = in_proj([down_h(h_k); down_g(g); w1(prev_k)])          g = mean of h over the S slots
    x[k, c] = a[k, c] + sum_{j <= k} L[c, k, j] a[j, c]
    z = x + down(silu(gate(x)) * up(x))
    refined_k = base_k + w2(z_k)                                  base = the drafter's own logits

prev_0 = prev_1 = the anchor id (vLLM's speculator convention: the token before the anchor never reaches the
drafter), prev_k = the current draft of slot k - 1. Jacobi passes: slots 1.. start at the argmax of the base
logits; each pass recomputes every slot's refined logits from the previous pass's drafts. The mixer is causal,
so pass p settles slot p: after >= S - 1 passes the block is the head's left-to-right greedy decode. 0 passes
= the bare DFlash drafter.

Vocabulary V: the target's (the published layout) or, with `xpress_head_vocab: "draft"` in config.json, the
drafter's reduced draft vocabulary (d2t): the demo drafter drafts from 8,192 tokens and its logits are -inf
elsewhere, so a head over 49,152 would spend 6x the readout on tokens that can never be drafted. A previous
token outside the head's vocabulary gets a zero embedding.

A block of S < B slots uses the mixer's leading S x S corner (causal, so a prefix is self-consistent) and
the mean over its own S slots: the trainer trains on the block lengths vLLM serves.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .xpress_config import HeadConfig, XPressCheckpointError, split_weights  # noqa: F401 (one import for both)


class _Mix(nn.Module):
    def __init__(self, rank: int, block: int):
        super().__init__()
        self.L = nn.Parameter(torch.zeros(rank, block, block))


class _MLP(nn.Module):
    def __init__(self, rank: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(rank, hidden, bias=False)
        self.up_proj = nn.Linear(rank, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, rank, bias=False)


class XPressHead(nn.Module):
    """The head's parameters under the published names (state_dict keys = TENSORS) and its math."""

    def __init__(self, cfg: HeadConfig):
        super().__init__()
        self.cfg = cfg
        r = cfg.rank
        self.w1 = nn.Embedding(cfg.vocab, r)
        self.down_h = nn.Linear(cfg.hidden, r, bias=False)
        self.down_g = nn.Linear(cfg.hidden, r, bias=False)
        self.in_proj = nn.Linear(3 * r, r, bias=False)
        self.mix = _Mix(r, cfg.block_size)
        self.mlp = _MLP(r, cfg.mlp_hidden)
        self.w2 = nn.Linear(r, cfg.vocab, bias=False)

    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """The reference initialisation: N(0, 0.02) for the linear maps and embeddings, L = 0 (the mixer
        starts as the identity). Training then starts from a small bias on the base logits."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name == "mix.L":
                    p.zero_()
                else:
                    p.normal_(0.0, 0.02, generator=generator)

    def context(self, states: torch.Tensor) -> torch.Tensor:
        """states (N, S, H), slot 0 the anchor -> the pass-independent part of a_k (N, S, r)."""
        r = self.cfg.rank
        w = self.in_proj.weight
        g = states.mean(dim=1, keepdim=True)
        return F.linear(self.down_h(states), w[:, :r]) + F.linear(self.down_g(g), w[:, r:2 * r])

    def bias(self, ctx: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """ctx (N, S, r) from `context`; prev (N, S) previous-token ids in the head's vocabulary (-1: none)
        -> the logit bias of every slot (N, S, V)."""
        r = self.cfg.rank
        S = prev.shape[1]
        if S > self.cfg.block_size:
            raise ValueError(f"a block of {S} slots exceeds the head's block size {self.cfg.block_size}")
        emb = self.w1(prev.clamp_min(0)) * (prev >= 0).unsqueeze(-1).to(ctx.dtype)
        a = ctx + F.linear(emb, self.in_proj.weight[:, 2 * r:])
        mix = torch.tril(self.mix.L[:, :S, :S])  # (r, S, S): slot k reads slots j <= k
        x = a + torch.einsum("ckj,njc->nkc", mix, a)
        m = self.mlp
        z = x + m.down_proj(F.silu(m.gate_proj(x)) * m.up_proj(x))
        return self.w2(z)


def previous_tokens(anchor: torch.Tensor, drafts: torch.Tensor) -> torch.Tensor:
    """anchor (N,), drafts (N, S - 1) of slots 1..S-1 -> prev (N, S): [anchor, anchor, d_1 .. d_{S-2}]."""
    a = anchor.unsqueeze(1)
    return torch.cat([a, a, drafts[:, :-1]], dim=1)


def refine(head: XPressHead, states: torch.Tensor, base: torch.Tensor, anchor: torch.Tensor,
           passes: int) -> torch.Tensor:
    """Jacobi refinement. states (N, S, H) slot 0 = the anchor; base (N, S - 1, V) the drafter's logits of slots
    1..S-1 over the head's vocabulary; anchor (N,) the anchor's id in that vocabulary (-1: outside it).
    Returns the refined logits of slots 1..S-1 (N, S - 1, V); `base` itself when passes = 0."""
    if passes <= 0:
        return base
    ctx = head.context(states)
    logits = base
    drafts = base.argmax(dim=-1)
    for _ in range(passes):
        logits = base + head.bias(ctx, previous_tokens(anchor, drafts))[:, 1:]
        drafts = logits.argmax(dim=-1)
    return logits


def greedy_decode(head: XPressHead, states: torch.Tensor, base: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
    """The head decoded left to right, one slot at a time (each slot sees the drafts before it): the drafts
    (N, S - 1) that >= S - 1 Jacobi passes must reproduce."""
    ctx = head.context(states)
    n, s1, _ = base.shape
    drafts = torch.zeros(n, s1, dtype=torch.long, device=base.device)
    for k in range(s1):
        logits = base[:, k] + head.bias(ctx, previous_tokens(anchor, drafts))[:, k + 1]
        drafts[:, k] = logits.argmax(dim=-1)
    return drafts
