"""The training loop both drafter trainers share: AdamW with warm-up then cosine decay to 10 %, batches
drawn from a generator seeded by (seed, step) — so a resumed run draws what an uninterrupted one would —
gradient clipping, a checkpoint every CHECKPOINT_EVERY steps, an optional wall-clock cap, and an optional
time budget (budget.py): after PROBE_STEPS steps the run plans how many steps fit in the time left and the
learning-rate schedule decays over those (a run cut by a budget still ends its schedule; the plan is kept in
the checkpoint, so a resumed run follows it). Every REPLAN_EVERY steps after that, and when the plan is
reached, it plans again at the rate of the steps since the last plan: the first steps run slower than the rest
(seen here: 1.65 s a step over steps 2-4 of an EAGLE-3 run whose 341 steps averaged 0.90 s, which cut it to
341 of 400 steps where all 400 fitted). The forward pass runs
under bfloat16 autocast when `s.bf16_autocast` (weights, optimizer state and the loss stay float32): about
1.8x faster per step on an AVX512-BF16 CPU (0.65 vs 1.18 s for an EAGLE-3 batch of 8 here)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable

import torch

CHECKPOINT_EVERY = 25
PROBE_STEPS = 4  # steps timed before a budget plans the rest (the first is left out: it warms up)
REPLAN_EVERY = 10  # a budgeted run plans again after this many steps at the rate they ran

# (batch indices, the step's generator) -> (loss to minimise, per-position losses, per-position accuracy, note)
StepFn = Callable[[list[int], torch.Generator], tuple[torch.Tensor, list[float], list[float], str]]


def train_threads() -> int:
    """PyTorch threads for training: every CPU, or SPECSWEEP_TRAIN_THREADS. Small models on a busy machine train
    far faster on one thread (tiny test drafters: 2.2 s instead of 19 s on 2 cores beside another job), so the
    test suite sets it to 1."""
    import os

    env = os.environ.get("SPECSWEEP_TRAIN_THREADS")
    return max(1, int(env)) if env and env.isdigit() else (os.cpu_count() or 1)


def lr_at(step: int, steps: int, lr: float) -> float:
    warmup = min(20, max(1, steps // 10))
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def plan_steps(step: int, steps: int, seconds_left: float, seconds_per_step: float, at_least: int = 1) -> int:
    """Steps to train in all when `seconds_left` remain after `step` at `seconds_per_step`: at most `steps`,
    at least `at_least` more (one for the first plan; none when planning again)."""
    fit = int(max(seconds_left, 0.0) / max(seconds_per_step, 1e-9))
    return max(step + at_least, min(steps, step + fit))


def run_training(s, model: torch.nn.Module, checkpoint: Path, n_examples: int, step_fn: StepFn, progress,
                 seconds: float | None = None, clock: Callable[[], float] = time.perf_counter) -> dict:
    """Train `model` for `s.steps` steps (resuming from `checkpoint` when it belongs to these settings), or
    for the steps that fit in `seconds` when that is fewer."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=s.lr, weight_decay=0.0)
    step, history, plan = _resume(s, model, opt, checkpoint)
    t0 = clock()
    stopped_early = False
    resumed_from = step
    probe_t0 = None
    last_plan = None  # (step, time) of this run's last plan: re-planned from there (None: this run made none)
    shown = s.steps  # the plan last printed (the full settings need no line)

    def replan(per_step: float, at_least: int) -> None:
        nonlocal plan, last_plan, shown
        assert seconds is not None  # replanned only under a time budget
        plan = plan_steps(step, s.steps, seconds - (clock() - t0), per_step, at_least)
        last_plan = (step, clock())
        if plan != shown and (plan == s.steps or abs(plan - shown) >= 0.05 * s.steps):
            progress("training", step, plan, f"budget: {plan} of {s.steps} steps fit ({per_step:.2f} s a step)")
            shown = plan

    while True:
        if last_plan is not None and step - last_plan[0] >= 1 and (
                step == plan or step - last_plan[0] >= REPLAN_EVERY):
            replan((clock() - last_plan[1]) / (step - last_plan[0]), at_least=0)
        if step >= (plan or s.steps):
            break
        if s.max_minutes is not None and clock() - t0 > 60 * s.max_minutes:
            stopped_early = True
            break
        if seconds is not None and plan is None:
            if step == resumed_from + 1:
                probe_t0 = clock()
            elif step == resumed_from + PROBE_STEPS and probe_t0 is not None:
                replan((clock() - probe_t0) / (PROBE_STEPS - 1), at_least=1)
        g = torch.Generator().manual_seed(s.seed * 1_000_003 + step)
        idx = torch.randperm(n_examples, generator=g)[: s.batch_size].tolist()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, plan or s.steps, s.lr)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s.autocast):
            loss, losses, accs, note = step_fn(idx, g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        history.append({"step": step, "losses": losses, "accuracy": accs})
        progress("training", step, plan or s.steps, note)
        if step % CHECKPOINT_EVERY == 0 or step == (plan or s.steps):
            _save(checkpoint, {"key": s.key(), "step": step, "model": model.state_dict(), "opt": opt.state_dict(),
                               "history": history, "plan": plan})
    return {"steps_done": step, "stopped_early": stopped_early, "seconds": clock() - t0,
            "history": history, "resumed_from_step": resumed_from, "planned_steps": plan or s.steps}


def tail_means(history: list[dict], key: str, n: int, last: int = 20) -> list[float | None]:
    """Mean of each of the `n` per-position values over the last `last` steps (NaN skipped)."""
    out = []
    for k in range(n):
        vals = [h[key][k] for h in history[-last:] if k < len(h[key]) and not math.isnan(h[key][k])]
        out.append(sum(vals) / len(vals) if vals else None)
    return out


def _resume(s, model: torch.nn.Module, opt: torch.optim.Optimizer, checkpoint: Path) -> tuple[int, list, int | None]:
    """(step, history, plan) of the checkpoint when it belongs to these settings (model and optimizer loaded),
    else a fresh start."""
    if checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False)
        if state.get("key") == s.key():
            model.load_state_dict(state["model"], strict=False)
            opt.load_state_dict(state["opt"])
            return state["step"], state["history"], state.get("plan")
    return 0, [], None


def _save(checkpoint: Path, state: dict) -> None:
    """Write a checkpoint atomically (a crash mid-write leaves the previous one)."""
    tmp = checkpoint.with_suffix(".part")
    torch.save(state, tmp)
    tmp.replace(checkpoint)
