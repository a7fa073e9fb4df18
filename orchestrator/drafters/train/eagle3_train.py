"""Training of the EAGLE-3 drafter (model in eagle3.py): batches, labels (hard, or the target's top-k
distribution) and the per-step loss; the loop itself (schedule, resume, checkpoints) is loop.py."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from ..layout import eagle3_config
from .eagle3 import draft_index, draft_vocabulary, init_drafter
from .loop import run_training, tail_means, train_threads

MAX_LEN = 384
STEP_WEIGHT = 0.8  # loss weight of draft step s: 0.8 ** s


def _soft_targets(data: dict, idx: list[int], L: int, s: int, t2d_index: torch.Tensor):
    """Draft step s, row i: the target's distribution over x[i + 2 + s] (its top-k at position i + 1 + s),
    restricted to the draft vocabulary and renormalised: (ids (B, T, k) in draft ids or -1, probs (B, T, k))."""
    B, T = len(idx), L - 1
    k = data["topk_ids"][idx[0]].shape[-1]
    ids = torch.full((B, T, k), -1, dtype=torch.long)
    probs = torch.zeros(B, T, k)
    for b, i in enumerate(idx):
        n = min(len(data["tokens"][i]), MAX_LEN)
        rows = max(0, min(T, n - 2 - s))
        if rows:
            src = slice(1 + s, 1 + s + rows)
            ids[b, :rows] = t2d_index[data["topk_ids"][i][src].long()]
            probs[b, :rows] = data["topk_probs"][i][src].float()
    probs = torch.where(ids >= 0, probs, torch.zeros_like(probs))
    probs = probs / probs.sum(-1, keepdim=True).clamp_min(1e-8)
    return ids, probs


def _batch(data: dict, idx: list[int], t2d_index: torch.Tensor):
    seqs = [data["tokens"][i][:MAX_LEN] for i in idx]
    L = max(len(x) for x in seqs)
    B = len(seqs)
    tokens = torch.zeros(B, L, dtype=torch.long)
    feats = torch.zeros(B, L, data["features"][idx[0]].shape[-1])
    valid = torch.zeros(B, L, dtype=torch.bool)
    resp = torch.zeros(B, L, dtype=torch.bool)
    for b, (i, x) in enumerate(zip(idx, seqs)):
        n = len(x)
        tokens[b, :n] = x
        feats[b, :n] = data["features"][i][:n].float()
        valid[b, :n] = True
        resp[b, data["prompt_lens"][i]:n] = True
    return tokens, feats, valid, resp


def _labels(tokens, valid, resp, s: int, t2d_index):
    """Draft step s, row i predicts x[i + 2 + s]: (labels in draft ids, mask)."""
    B, L = tokens.shape
    T = L - 1
    labels = torch.full((B, T), -1, dtype=torch.long)
    n = max(0, L - 2 - s)
    tgt = tokens[:, 2 + s: 2 + s + n]
    ok = valid[:, 2 + s: 2 + s + n] & resp[:, 2 + s: 2 + s + n]
    mapped = t2d_index[tgt]
    labels[:, :n] = torch.where(ok & (mapped >= 0), mapped, torch.full_like(mapped, -1))
    return labels


def train_eagle3(s, target_cfg: dict, data: dict, tensors: dict, work: Path, progress, seconds: float | None = None):
    torch.set_num_threads(train_threads())
    responses = [t[p:].tolist() for t, p in zip(data["tokens"], data["prompt_lens"])]
    vocab = target_cfg["vocab_size"]
    target_ids, t2d = draft_vocabulary(responses, min(s.draft_vocab_size, vocab), vocab)
    t2d_index = draft_index(target_ids, vocab)
    cfg = eagle3_config(target_cfg, draft_vocab_size=len(target_ids))
    model = init_drafter(cfg, tensors["embed"], tensors["final_norm"], target_ids, s.seed)
    def step_fn(idx, g):
        tokens, feats, valid, resp = _batch(data, idx, t2d_index)
        states = model(tokens, feats, valid, s.ttt_steps)
        loss = 0.0
        losses, accs = [], []
        for k, st in enumerate(states):
            lab = _labels(tokens, valid, resp, k, t2d_index)
            m = lab >= 0
            if m.sum() == 0:
                losses.append(float("nan"))
                accs.append(float("nan"))
                continue
            lg = model.lm_head(st[m])  # labelled (response) rows only: the prompt rows cost nothing here
            if s.soft_labels and "topk_ids" in data:
                ids, probs = _soft_targets(data, idx, tokens.shape[1], k, t2d_index)
                ids, probs = ids[m], probs[m]
                logp = F.log_softmax(lg.float(), -1).gather(1, ids.clamp_min(0))
                ce = -(probs * logp).sum(-1).mean()
            else:
                ce = F.cross_entropy(lg.float(), lab[m])
            loss = loss + (STEP_WEIGHT ** k) * ce
            losses.append(ce.item())
            accs.append(float((lg.argmax(-1) == lab[m]).float().mean()))
        return loss, losses, accs, f"loss {losses[0]:.2f} acc@1 {accs[0]:.2f} acc@{len(accs)} {accs[-1]:.2f}"

    run = run_training(s, model, work / "train_state.pt", len(data["tokens"]), step_fn, progress, seconds=seconds)
    result = {"steps_done": run["steps_done"], "stopped_early": run["stopped_early"], "seconds": run["seconds"],
              "resumed_from_step": run["resumed_from_step"], "planned_steps": run["planned_steps"],
              "final_losses": tail_means(run["history"], "losses", s.ttt_steps),
              "final_accuracy": tail_means(run["history"], "accuracy", s.ttt_steps),
              "draft_vocab_size": len(target_ids)}
    weights = model.export_weights()
    weights["d2t"] = (target_ids - torch.arange(len(target_ids))).to(torch.long)
    weights["t2d"] = t2d
    return cfg, weights, result
