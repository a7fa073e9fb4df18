"""Training of the xPress refiner head (drafters/xpress_head.py) over a trained DFlash drafter whose backbone stays
frozen, so whatever xPress gains over DFlash is the head's, and 0 passes serve exactly the DFlash drafter.

Data: the DFlash trainer's cached responses and features. For each response, `blocks_per_seq` anchors p are drawn
(seeded) and the frozen drafter runs each block as vLLM serves it, at every length in `block_lens` (K + 1 slots:
4 and 8 serve K = 3 and 7); its normed slot states are kept (bf16), the base logits are recomputed from them by
the frozen lm_head in each step. Slot k's label is the target's greedy token x[p + k] in the draft vocabulary
(-1 outside it or past the response: no loss).

Loss, as the reference recipe (xPress speculators port): a teacher-forced term (previous tokens = the right
ones) plus `free_weight` x the mean over `free_rounds` free-running rounds (seeded from the base argmax, each
round fed the previous round's detached argmax), slot k weighted exp(-(k - 1) / slot_decay). Hard labels (the
target's greedy tokens are what vLLM verifies against at T = 0).

`XPressRecipe` holds the choices; `RECIPE` is what the demo ships (docs/src/results/2026-12-07-xpress-demo.md says why).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from ..layout import xpress_config
from ..xpress_head import HeadConfig, XPressHead, previous_tokens
from .dflash_model import DFlashDrafter, load_dflash
from .eagle3 import draft_index
from .loop import run_training, tail_means, train_threads

MAX_LEN = 384


@dataclass(frozen=True)
class XPressRecipe:
    rank: int = 64
    block_lens: tuple[int, ...] = (4, 8)  # blocks vLLM serves at K = 3 and 7; the head's block is the largest
    blocks_per_seq: int = 24
    free_rounds: int = 3
    free_weight: float = 0.3
    slot_decay: float = 2.0
    num_passes: int = 2  # written to config.json: what vLLM runs unless a sweep overlays xpress_num_passes

    def describe(self) -> dict:
        return asdict(self)


RECIPE = XPressRecipe()


def target_to_head(drafter: DFlashDrafter, head_vocab: str) -> torch.Tensor:
    """Target id -> the head's vocabulary id (-1: outside it): the drafter's draft vocabulary for a "draft" head,
    the target's own for a "target" head (the published layout)."""
    vocab = drafter.embed.shape[0]
    if head_vocab == "draft" and drafter.draft_ids is not None:
        return draft_index(drafter.draft_ids, vocab)
    return torch.arange(vocab)


def block_data(drafter: DFlashDrafter, data: dict, recipe: XPressRecipe, seed: int, progress=None) -> dict:
    """Per block length S: states (N, A, S, H) bf16, labels (N, A, S - 1) draft ids (-1: none), anchors (N, A)
    draft ids of the anchor tokens (-1: outside the draft vocabulary). N = responses, A = blocks_per_seq."""
    t2d = target_to_head(drafter, "draft")  # the head's vocabulary is the drafter's (head_config)
    gen = torch.Generator().manual_seed(seed)
    n, A = len(data["tokens"]), recipe.blocks_per_seq
    out = {S: {"states": None, "labels": torch.full((n, A, S - 1), -1, dtype=torch.long),
               "anchors": torch.full((n, A), -1, dtype=torch.long)} for S in recipe.block_lens}
    drafter.eval()
    with torch.no_grad():
        for i in range(n):
            x = data["tokens"][i][:MAX_LEN]
            L = len(x)
            lo, hi = max(1, data["prompt_lens"][i]), L - 2
            if hi < lo:
                lo = hi = max(1, L - 2)
            anchors = torch.randint(lo, hi + 1, (A,), generator=gen)
            feats = data["features"][i][:L].float()[None]
            for S in recipe.block_lens:
                states = drafter(x[None], feats, anchors[None], block_size=S)[0]  # (A, S, H)
                o = out[S]
                if o["states"] is None:
                    o["states"] = torch.zeros(n, A, S, states.shape[-1], dtype=torch.bfloat16)
                o["states"][i] = states.to(torch.bfloat16)
                pos = anchors[:, None] + torch.arange(1, S)[None]  # (A, S - 1)
                gold = torch.where(pos < L, x[pos.clamp_max(L - 1)], torch.full_like(pos, -1))
                o["labels"][i] = torch.where(gold >= 0, t2d[gold.clamp_min(0)], gold)
                o["anchors"][i] = t2d[x[anchors]]
            if progress and (i + 1) % 100 == 0:
                progress("blocks", i + 1, n, "frozen DFlash drafter over anchored blocks")
    return out


def base_logits(drafter: DFlashDrafter, states: torch.Tensor) -> torch.Tensor:
    """The frozen drafter's logits of slots 1.. over its draft vocabulary (what vLLM's compute_logits gives on
    the draft columns), float32, no gradient."""
    with torch.no_grad():
        return drafter.logits(states[:, 1:].float()).float()


def make_step_fn(head: XPressHead, drafter: DFlashDrafter, blocks: dict, recipe: XPressRecipe):
    weights = {S: torch.exp(-torch.arange(S - 1).float() / recipe.slot_decay) for S in recipe.block_lens}

    def ce(logits, labels, w):
        m = labels >= 0
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.clamp_min(0).reshape(-1),
                               reduction="none").view(labels.shape)
        ww = w[None] * m
        return (loss * ww).sum() / ww.sum().clamp_min(1e-6)

    def step_fn(idx, g):
        total, accs = 0.0, []
        for S in recipe.block_lens:
            b = blocks[S]
            states = b["states"][idx].flatten(0, 1).float()  # (B*A, S, H)
            labels = b["labels"][idx].flatten(0, 1)
            anchor = b["anchors"][idx].flatten(0, 1)
            base = base_logits(drafter, states)
            ctx = head.context(states)
            tf_prev = previous_tokens(anchor, labels)  # the right previous tokens (-1: zero embedding)
            loss = ce(base + head.bias(ctx, tf_prev)[:, 1:], labels, weights[S])
            drafts = base.argmax(-1)
            free = 0.0
            for _ in range(recipe.free_rounds):
                logits = base + head.bias(ctx, previous_tokens(anchor, drafts))[:, 1:]
                free = free + ce(logits, labels, weights[S])
                drafts = logits.detach().argmax(-1)
            loss = loss + recipe.free_weight * free / max(1, recipe.free_rounds)
            total = total + loss / len(recipe.block_lens)
            if S == max(recipe.block_lens):
                with torch.no_grad():
                    hit = (drafts == labels) & (labels >= 0)
                    base_hit = (base.argmax(-1) == labels) & (labels >= 0)
                    accs = [float(hit[:, j].float().mean()) for j in range(S - 1)]
                    base_accs = [float(base_hit[:, j].float().mean()) for j in range(min(2, S - 1))]
        note = (f"loss {float(total.detach()):.2f} acc slot1 {accs[0]:.2f} slot2 {accs[1]:.2f} "
                f"(bare drafter {base_accs[0]:.2f} {base_accs[1]:.2f})")
        return total, [float(total.detach())], accs, note

    return step_fn


def head_config(dflash_cfg: dict, recipe: XPressRecipe) -> dict:
    """The exported config.json: the DFlash drafter's with the head's keys (published layout + head vocabulary)."""
    vocab = "draft" if dflash_cfg.get("draft_vocab_size") not in (None, dflash_cfg["vocab_size"]) else "target"
    return xpress_config(dflash_cfg, rank=recipe.rank, block_size=max(recipe.block_lens),
                         num_passes=recipe.num_passes, head_vocab=vocab)


def train_xpress(s, target_cfg: dict, data: dict, tensors: dict, work: Path, progress, dflash_folder: Path,
                 recipe: XPressRecipe | None = None, seconds: float | None = None):
    """Train the head over the DFlash drafter in `dflash_folder`; returns (config.json, weights incl. the
    backbone's, result) as the other trainers do (run.py writes them)."""
    recipe = recipe or RECIPE
    # blocks no longer than the backbone's (a drafter of block B serves K <= B - 1)
    recipe = replace(recipe, block_lens=tuple(b for b in recipe.block_lens if b <= s.block_size) or (s.block_size,))
    torch.set_num_threads(train_threads())
    drafter = load_dflash(dflash_folder, tensors["embed"], tensors["final_norm"])
    for p in drafter.parameters():
        p.requires_grad_(False)
    blocks = block_data(drafter, data, recipe, s.seed, progress)
    dflash_cfg = json.loads((Path(dflash_folder) / "config.json").read_text())
    cfg = head_config(dflash_cfg, recipe)
    torch.manual_seed(s.seed)
    head = XPressHead(HeadConfig.from_config(cfg))
    head.init_weights(torch.Generator().manual_seed(s.seed))
    run = run_training(s, head, work / "train_state_xpress.pt", len(data["tokens"]),
                       make_step_fn(head, drafter, blocks, recipe), progress, seconds=seconds)
    from safetensors.torch import load_file

    weights = dict(load_file(str(Path(dflash_folder) / "model.safetensors")))  # the backbone, unchanged
    weights.update({"xpress_head." + k: v.detach().float().contiguous() for k, v in head.state_dict().items()})
    mask = Path(dflash_folder) / "mask_embedding.pt"
    if mask.is_file():
        weights["__mask_embedding_pt__"] = mask.read_bytes()
    result = {"steps_done": run["steps_done"], "stopped_early": run["stopped_early"], "seconds": run["seconds"],
              "resumed_from_step": run["resumed_from_step"], "planned_steps": run["planned_steps"],
              "final_losses": tail_means(run["history"], "losses", 1),
              "final_accuracy": tail_means(run["history"], "accuracy", max(recipe.block_lens) - 1),
              "recipe": recipe.describe(), "backbone": str(dflash_folder)}
    return cfg, weights, result


def load_xpress(folder, embed: torch.Tensor, final_norm: torch.Tensor) -> tuple[DFlashDrafter, XPressHead]:
    """An xPress drafter folder as vLLM loads it: the DFlash backbone (dflash_model) and the head."""
    from safetensors.torch import load_file

    from ..xpress_head import split_weights

    folder = Path(folder)
    cfg = json.loads((folder / "config.json").read_text())
    drafter = load_dflash(folder, embed, final_norm)
    hc = HeadConfig.from_config(cfg, str(folder / "config.json"))
    head_w, _ = split_weights(load_file(str(folder / "model.safetensors")).items(), hc, str(folder))
    head = XPressHead(hc)
    head.load_state_dict(head_w)
    head.eval()
    return drafter, head


class RefinedDrafter(torch.nn.Module):
    """An xPress drafter behind the DFlash drafter's scoring interface (`dflash_model.teacher_forced`): `forward`
    is the backbone's (its states are kept), `logits` the head's refined logits of the drafted slots of the last
    forward, after `passes` Jacobi passes. An offline pre-check of what vLLM will measure."""

    def __init__(self, drafter: DFlashDrafter, head: XPressHead, passes: int):
        super().__init__()
        self.drafter, self.head, self.passes = drafter, head, passes
        self.t2h = target_to_head(drafter, head.cfg.head_vocab)
        self._last: tuple[torch.Tensor, torch.Tensor] | None = None

    def forward(self, tokens, feats, anchors, block_size: int = 16, **kw):
        states = self.drafter(tokens, feats, anchors, block_size=block_size, **kw)
        self._last = (states, tokens.gather(1, anchors))
        return states

    def logits(self, slot_states: torch.Tensor) -> torch.Tensor:
        from ..xpress_head import refine

        assert self._last is not None, "logits() follows a forward pass"
        states, anchor_ids = self._last  # (1, A, S, H), (1, A)
        base = self.drafter.logits(slot_states).float()
        return refine(self.head, states[0].float(), base, self.t2h[anchor_ids[0]], self.passes)

    def to_target_ids(self, draft_pred: torch.Tensor) -> torch.Tensor:
        return self.drafter.to_target_ids(draft_pred)
