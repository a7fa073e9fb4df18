"""Training of the DFlash drafter (model in dflash_model.py): anchored blocks, labels and the loss; the loop
itself (schedule, resume, checkpoints) is loop.py.

Each step draws `anchors_per_seq` anchor positions p in each of the batch's responses (seeded by the step);
block slot j (1 <= j < block length) is trained to predict x[p + j] — the target's greedy token, or the
target's top-k distribution at p + j - 1 (`soft_labels`). Slot j's loss is weighted exp(-(j - 1) / loss_decay)
(the DFlash paper's weighting: a draft is accepted only up to its first miss, so early slots matter most).
The block length is drawn per anchor from `block_lens`, so one drafter serves every K it is deployed at
(vLLM runs a block of exactly K + 1 slots, and the slots attend to each other).

`DFlashRecipe` holds every choice `benchmarks/dflash_ablation.py` varies; `RECIPE` is the one the demo ships
(the ablation table in docs/src/results/drafter-demo.md says why).
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from ..layout import dflash_config
from .dflash_model import DFlashDrafter
from .eagle3 import draft_index, draft_vocabulary
from .loop import run_training, tail_means, train_threads

MAX_LEN = 384


@dataclass(frozen=True)
class DFlashRecipe:
    layers: int = 1
    kv_heads: int | None = None  # None: as many as query heads when value_init is "identity" (a full-width value
    # path), else the target's (3 for SmolLM2: a 192-wide value path)
    draft_vocab: int | None = None  # own lm_head over the most frequent response tokens; None: the target's
    anchors_per_seq: int = 8
    block_lens: tuple[int, ...] = (16,)  # drawn per anchor; each <= block_size
    soft_labels: bool = False
    loss_decay: float | None = 7.0  # None: every slot weighted 1
    ctx_extra: int = 0  # 1: blocks also see the feature at the anchor (a leak; diagnostic only)
    fc_init: str = "last"  # "last": fc starts as the last feature layer; "random"
    mask_init: str = "mean"  # "mean" of the target's embeddings; "token": the mask token's own embedding
    value_init: str = "random"  # "identity": layer 0's v_proj and o_proj start as identities, so what a head
    # attends to in the context reaches the residual stream unchanged (needs kv_heads x head_dim = hidden)
    guide: float = 0.0  # weight of the attention guidance loss: in layer 0, a third of the heads are pulled
    # towards context position p - 1 (the freshest target state), a third towards the block's slot 0 (x_p);
    # what EAGLE-3 reads by construction. 0: off. Training only: the exported layout is unchanged.
    loss_max_slot: int | None = None  # slots past this one get no logits and no loss (their weight under a small
    # loss_decay is negligible; the vocabulary projection is most of a step); None: every slot
    freeze_lm_head: bool = False  # keep the draft lm_head at the target's rows (the DFlash paper shares the target's)
    ctx_dropout: float = 0.0  # dropout on the context states in training (regularises ~3 epochs over the data)
    accept_weight: bool = False  # slot j's loss is also weighted by the drafter's own (detached) probability of
    # the right tokens at slots 1..j-1 of that block: a draft counts only up to its first miss, so slot 2 learns
    # most where slot 1 is likely right (acceptance-aware training, as HASS/GRIFFIN weight later draft steps)
    intermediate_size: int | None = None  # the drafter's MLP width (config.json `intermediate_size`, which vLLM
    # reads); None: the target's (1,536 for SmolLM2-135M)

    def describe(self) -> dict:
        """The recipe as it enters the drafter's cache key; knobs added later are left out while at their
        defaults, so a drafter trained before they existed keeps its key (and is reused, not retrained)."""
        d = asdict(self)
        for name, default in _LATER_KNOBS.items():
            if d[name] == default:
                del d[name]
        return d


_LATER_KNOBS = {"loss_max_slot": None, "freeze_lm_head": False, "ctx_dropout": 0.0, "accept_weight": False,
                "intermediate_size": None}


# What the demo ships, from the ablation (docs/src/results/drafter-demo.md): full-width K/V heads with an identity
# value path (the context state reaches the slots unchanged: without it the one layer never learns to read
# the context in a first-run budget), slot losses concentrated on the first slots and none past slot 6
# (attention guidance and slots 7-15 gave the same acceptance at 400 steps for 35 % more time a step),
# block lengths 4/8/16 (K = 3, 7, 15 each served by the block vLLM runs), the target's top-k distribution,
# 32 anchors per response and an 8,192-token draft vocabulary (a 6x cheaper vocabulary projection).
RECIPE = DFlashRecipe(kv_heads=None, value_init="identity", guide=0.0, anchors_per_seq=32, draft_vocab=8192,
                      loss_decay=1.0, soft_labels=True, block_lens=(4, 8, 16), loss_max_slot=6)


def drafter_config(target_cfg: dict, recipe: DFlashRecipe, block_size: int, draft_vocab_size: int | None) -> dict:
    cfg = dflash_config(target_cfg, block_size=block_size)
    cfg["num_hidden_layers"] = recipe.layers
    if recipe.intermediate_size is not None:
        cfg["intermediate_size"] = recipe.intermediate_size
    if recipe.kv_heads is not None:
        cfg["num_key_value_heads"] = recipe.kv_heads
    elif recipe.value_init == "identity":
        cfg["num_key_value_heads"] = cfg["num_attention_heads"]
    if draft_vocab_size is not None:
        cfg["draft_vocab_size"] = draft_vocab_size
    return cfg


def build(target_cfg: dict, recipe: DFlashRecipe, block_size: int, data: dict, tensors: dict, seed: int):
    """(config.json dict, the drafter) for this recipe."""
    vocab = target_cfg["vocab_size"]
    draft_ids = None
    if recipe.draft_vocab and recipe.draft_vocab < vocab:  # else the target's whole vocabulary and lm_head
        responses = [t[p:].tolist() for t, p in zip(data["tokens"], data["prompt_lens"])]
        draft_ids, _ = draft_vocabulary(responses, recipe.draft_vocab, vocab)
    cfg = drafter_config(target_cfg, recipe, block_size, None if draft_ids is None else len(draft_ids))
    torch.manual_seed(seed)
    model = DFlashDrafter(cfg, tensors["embed"], tensors["final_norm"], draft_ids)
    with torch.no_grad():
        if recipe.fc_init == "random":
            torch.nn.init.normal_(model.fc.weight, std=0.02)
        if recipe.value_init == "identity":
            layer = model.layers[0]
            if layer.v_proj.weight.shape[0] != layer.v_proj.weight.shape[1] or \
                    layer.o_proj.weight.shape[0] != layer.o_proj.weight.shape[1]:
                raise ValueError("value_init identity needs kv_heads x head_dim = heads x head_dim = hidden size")
            layer.v_proj.weight.copy_(torch.eye(layer.v_proj.weight.shape[0]))
            layer.o_proj.weight.copy_(torch.eye(layer.o_proj.weight.shape[0]))
        if recipe.freeze_lm_head and model.lm_head is not None:
            model.lm_head.weight.requires_grad_(False)
        model.ctx_dropout.p = recipe.ctx_dropout
        if recipe.mask_init == "token":
            model.mask_embedding.copy_(tensors["embed"][cfg["dflash_config"]["mask_token_id"]])
    return cfg, model


def _batch(data: dict, idx: list[int], recipe: DFlashRecipe, bs: int, gen: torch.Generator):
    """tokens (B, L), feats, anchors (B, A), block_lens (B, A), hard labels (B, A, bs) (-1: none), and the
    (B, A, bs) position whose target distribution labels each slot (p + j - 1)."""
    seqs = [data["tokens"][i][:MAX_LEN] for i in idx]
    L = max(len(x) for x in seqs)
    B, A = len(seqs), recipe.anchors_per_seq
    tokens = torch.zeros(B, L, dtype=torch.long)
    feats = torch.zeros(B, L, data["features"][idx[0]].shape[-1])
    anchors = torch.zeros(B, A, dtype=torch.long)
    choices = torch.tensor(recipe.block_lens)
    block_lens = choices[torch.randint(len(choices), (B, A), generator=gen)]
    for b, (i, x) in enumerate(zip(idx, seqs)):
        n = len(x)
        tokens[b, :n] = x
        feats[b, :n] = data["features"][i][:n].float()
        lo, hi = max(1, data["prompt_lens"][i]), n - 2  # anchor x_p in the response, at least one label after
        if hi < lo:
            lo, hi = max(1, n - 2), max(1, n - 2)
        anchors[b] = torch.randint(lo, hi + 1, (A,), generator=gen)
    lens = torch.tensor([min(len(x), MAX_LEN) for x in seqs])
    tgt_pos = anchors[:, :, None] + torch.arange(bs)[None, None]  # (B, A, bs)
    ok = (tgt_pos < lens[:, None, None]) & (torch.arange(bs)[None, None] >= 1) & \
         (torch.arange(bs)[None, None] < block_lens[:, :, None])
    labels = torch.where(ok, tokens.gather(1, tgt_pos.clamp_max(L - 1).view(B, -1)).view(B, A, bs),
                         torch.full_like(tgt_pos, -1))
    return tokens, feats, anchors, block_lens, labels, tgt_pos - 1


def _topk(data: dict, idx: list[int], L: int):
    """The target's top-k next-token ids / probabilities (B, L, k) of the batch's examples."""
    k = data["topk_ids"][idx[0]].shape[-1]
    ids, probs = torch.zeros(len(idx), L, k, dtype=torch.long), torch.zeros(len(idx), L, k)
    for b, i in enumerate(idx):
        n = min(len(data["tokens"][i]), L)
        ids[b, :n] = data["topk_ids"][i][:n].long()
        probs[b, :n] = data["topk_probs"][i][:n].float()
    return ids, probs


def make_step_fn(model: DFlashDrafter, data: dict, recipe: DFlashRecipe, bs: int):
    t2d_index = None if model.draft_ids is None else draft_index(model.draft_ids, model.embed.shape[0])
    slot = torch.arange(bs)
    if recipe.loss_decay is None:
        slot_weight = torch.ones(bs)
    else:
        slot_weight = torch.exp(-(slot - 1).clamp_min(0).float() / recipe.loss_decay)

    def step_fn(idx, g):
        tokens, feats, anchors, block_lens, labels, dist_pos = _batch(data, idx, recipe, bs, g)
        if recipe.guide > 0:  # the guidance reads layer 0's attention weights: the one padded pass
            states = model(tokens, feats, anchors, block_lens, block_size=bs, ctx_extra=recipe.ctx_extra, guide=True)
        else:  # each block only as long as it is (same states, ~40 % less slot work for blocks of 4/8/16)
            states = model.forward_by_length(tokens, feats, anchors, block_lens, block_size=bs,
                                             ctx_extra=recipe.ctx_extra, max_slot=recipe.loss_max_slot)
        guide_loss = None
        if recipe.guide > 0:
            states, (w_prev, w_anchor) = states
            third = w_prev.shape[1] // 3
            slots_ok = (torch.arange(bs)[None, None] >= 1) & (torch.arange(bs)[None, None] < block_lens[:, :, None])
            nll = -(torch.log(w_prev[:, :third].float() + 1e-6).mean(1) +
                    torch.log(w_anchor[:, third: 2 * third].float() + 1e-6).mean(1)) / 2  # (B, A, bs)
            guide_loss = nll[slots_ok].mean()
        m = labels >= 0
        if recipe.loss_max_slot is not None:
            m &= slot[None, None] <= recipe.loss_max_slot
        logits = model.logits(states[m]).float()
        target = labels[m]
        if t2d_index is not None:
            target = t2d_index[target]  # -1: outside the draft vocabulary (never right)
        slots = slot.expand_as(labels)[m]
        w = slot_weight[slots]
        if recipe.accept_weight:
            w = w * prefix_hit_prob(logits, target, m)
        if recipe.soft_labels:
            top_ids, top_probs = _topk(data, idx, tokens.shape[1])
            b_idx = torch.arange(len(idx))[:, None, None].expand_as(labels)[m]
            pos = dist_pos[m]
            ids, probs = top_ids[b_idx, pos], top_probs[b_idx, pos]
            if t2d_index is not None:
                ids = t2d_index[ids]
            probs = torch.where(ids >= 0, probs, torch.zeros_like(probs))
            probs = probs / probs.sum(-1, keepdim=True).clamp_min(1e-8)
            ce = -(probs * F.log_softmax(logits, -1).gather(1, ids.clamp_min(0))).sum(-1)
        else:
            ce = F.cross_entropy(logits, target.clamp_min(0), reduction="none") * (target >= 0)
        loss = (ce * w).sum() / w.sum()
        if guide_loss is not None:
            loss = loss + recipe.guide * guide_loss
        with torch.no_grad():
            hit = (logits.argmax(-1) == target) & (target >= 0)
            accs = [float(hit[slots == j].float().mean()) if (slots == j).any() else float("nan")
                    for j in range(1, bs)]
        return loss, [loss.item()], accs, f"loss {loss.item():.2f} acc slot1 {accs[0]:.2f} slot2 {accs[1]:.2f}"

    return step_fn


def prefix_hit_prob(logits: torch.Tensor, target: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """For each trained slot (rows of `logits`, in the order of `m`'s True entries, `m` of shape (B, A, bs)),
    the drafter's probability (detached) that every earlier slot of its block drafts its right token: the
    product of p(right token) over slots 1..j-1 (1 for slot 1; a slot whose right token is outside the
    draft vocabulary counts 0). Slot 0 (the anchor) is never trained and counts 1."""
    with torch.no_grad():
        p_right = torch.where(target >= 0, F.softmax(logits, -1).gather(1, target.clamp_min(0)[:, None])[:, 0],
                              torch.zeros_like(target, dtype=logits.dtype))
        grid = torch.ones(m.shape, dtype=logits.dtype)
        grid[m] = p_right
        prefix = torch.cumprod(grid, dim=-1)  # through slot j
        before = torch.cat([torch.ones_like(prefix[..., :1]), prefix[..., :-1]], dim=-1)  # through slot j - 1
        return before[m]


def fit(s, recipe: DFlashRecipe, target_cfg: dict, data: dict, tensors: dict, checkpoint: Path, progress,
        examples: list[int] | None = None, seconds: float | None = None):
    """Train a drafter of this recipe for s.steps (resumable at `checkpoint`); `examples` restricts the
    training set (the ablation holds some out). Returns (cfg, model, run)."""
    torch.set_num_threads(train_threads())
    bs = s.block_size
    if max(recipe.block_lens) > bs:
        raise ValueError(f"block lengths {recipe.block_lens} exceed the block size {bs}")
    cfg, model = build(target_cfg, recipe, bs, data, tensors, s.seed)
    step_fn = make_step_fn(model, data, recipe, bs)
    if examples is not None:
        inner = step_fn
        pool = torch.tensor(examples)
        step_fn = lambda idx, g: inner(pool[idx].tolist(), g)  # noqa: E731
    run = run_training(s, model, checkpoint, len(data["tokens"]) if examples is None else len(examples),
                       step_fn, progress, seconds=seconds)
    return cfg, model, run


def train_dflash(s, target_cfg: dict, data: dict, tensors: dict, work: Path, progress,
                 recipe: DFlashRecipe | None = None, seconds: float | None = None):
    """`recipe`: None trains the settings' own (`s.recipe()`: RECIPE unless `s.dflash_recipe` names another)."""
    recipe = recipe or s.recipe()
    recipe = replace(recipe, block_lens=tuple(b for b in recipe.block_lens if b <= s.block_size) or (s.block_size,))
    cfg, model, run = fit(s, recipe, target_cfg, data, tensors, work / "train_state_dflash.pt", progress,
                          seconds=seconds)
    bs = s.block_size
    result = {"steps_done": run["steps_done"], "stopped_early": run["stopped_early"], "seconds": run["seconds"],
              "resumed_from_step": run["resumed_from_step"], "planned_steps": run["planned_steps"],
              "final_losses": tail_means(run["history"], "losses", 1),
              "final_accuracy": tail_means(run["history"], "accuracy", bs - 1),
              "recipe": recipe.describe()}
    return cfg, export(model, cfg), result


def export(model: DFlashDrafter, cfg: dict) -> dict:
    """The tensors vLLM loads (plus d2t / t2d with a draft vocabulary) and, under `__mask_embedding_pt__`, the
    bytes of mask_embedding.pt (the trained mask-slot embedding; run.py writes it beside the weights)."""
    weights = model.export_weights()
    if model.draft_ids is not None:
        weights["d2t"] = (model.draft_ids - torch.arange(len(model.draft_ids))).to(torch.long)
        weights["t2d"] = torch.zeros(cfg["vocab_size"], dtype=torch.bool).index_fill_(0, model.draft_ids, True)
    buf = io.BytesIO()
    torch.save({"mask_token_id": cfg["dflash_config"]["mask_token_id"],
                "embedding": model.mask_embedding.detach().float().clone()}, buf)
    weights["__mask_embedding_pt__"] = buf.getvalue()
    return weights
