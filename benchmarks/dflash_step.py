"""Seconds per DFlash training step of the shipped recipe at the demo target's shape (SmolLM2-135M: hidden 576,
9 heads, 30 layers, 49,152-token vocabulary), on synthetic responses of the demo's lengths, with every block
run at the full block size (`forward`, how training ran first), each block only as long as it is
(`forward_by_length`), and that with the last layer computing only the slots that get a loss (`max_slot`,
how it runs now). The figure is the drafter's own compute: with `--data` (a
`features.pt` that `specsweep drafters train` wrote, under `$SPECSWEEP_CACHE/drafters/data/`) it runs on those
responses, else on synthetic ones of 190-384 tokens (random features; no model or cache needed).

    .venv/bin/python benchmarks/dflash_step.py [--steps 6] [--batch 8] [--data PATH/features.pt]

Prints the CPU and torch's thread count beside the figures (they depend on both)."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from orchestrator.drafters.train.dflash_train import RECIPE, build, make_step_fn  # noqa: E402

TARGET = {"hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9, "num_key_value_heads": 3,
          "head_dim": 64, "num_hidden_layers": 30, "rms_norm_eps": 1e-5, "rope_theta": 100000.0,
          "vocab_size": 49152, "max_position_embeddings": 8192, "hidden_act": "silu", "model_type": "llama",
          "torch_dtype": "bfloat16", "tie_word_embeddings": True}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                flags = Path("/proc/cpuinfo").read_text()
                have = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f" {f}" in flags]
                return f"{line.split(':', 1)[1].strip()} ({', '.join(have)})"
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def synthetic(n: int, seed: int = 0) -> dict:
    """Sequences of 190-384 tokens (40-token prompts), random features and top-16 labels (timing only)."""
    g = torch.Generator().manual_seed(seed)
    data = {"tokens": [], "features": [], "prompt_lens": [], "topk_ids": [], "topk_probs": []}
    for _ in range(n):
        L = int(torch.randint(190, 384, (1,), generator=g))
        data["tokens"].append(torch.randint(0, 8000, (L,), generator=g))
        data["features"].append(torch.randn(L, 3 * 576, generator=g).to(torch.bfloat16))
        data["prompt_lens"].append(40)
        data["topk_ids"].append(torch.randint(0, 8000, (L, 16), generator=g, dtype=torch.int32))
        data["topk_probs"].append(torch.full((L, 16), 1 / 16, dtype=torch.float16))
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6, help="timed steps per way (after one untimed)")
    ap.add_argument("--batch", type=int, default=8, help="responses per step (drafters train's batch_size)")
    ap.add_argument("--data", type=Path, help="a features.pt of `drafters train` (default: synthetic responses)")
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    if args.data:
        data = torch.load(args.data, weights_only=False)
        lens = [len(t) for t in data["tokens"]]
        print(f"data: {args.data} ({len(lens)} examples, median {statistics.median(lens):.0f} tokens)")
    else:
        data = synthetic(4 * args.batch)
        print("data: synthetic (190-384 tokens, random features)")
    g = torch.Generator().manual_seed(1)
    tensors = {"embed": torch.randn(TARGET["vocab_size"], 576, generator=g) * 0.02, "final_norm": torch.ones(576)}
    print(f"CPU: {cpu_name()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"recipe: block lengths {RECIPE.block_lens}, {RECIPE.anchors_per_seq} anchors, slots <= "
          f"{RECIPE.loss_max_slot}, batch {args.batch}")
    results = {}
    for way in ("padded", "by_length", "trained_slots"):
        _, model = build(TARGET, RECIPE, 16, data, tensors, seed=0)
        model.forward_by_length = _way(model, way)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        step = make_step_fn(model, data, replace(RECIPE), 16)
        times = []
        for i in range(args.steps + 1):
            idx = [(i * args.batch + b) % len(data["tokens"]) for b in range(args.batch)]
            t0 = time.perf_counter()
            loss = step(idx, torch.Generator().manual_seed(i))[0]
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i:
                times.append(time.perf_counter() - t0)
        results[way] = statistics.median(times)
        print(f"{way:>9}: {results[way]:.3f} s/step (median of {args.steps}; min {min(times):.3f}, max {max(times):.3f})")
    print(f"by length / padded: {results['by_length'] / results['padded']:.2f}; "
          f"trained slots / padded: {results['trained_slots'] / results['padded']:.2f}")


def _way(model, way: str):
    """The forward the step runs: "padded" every block at 16 slots (training before issue 17's second
    session); "by_length" each block as long as it is, every slot computed; "trained_slots" (how it runs
    now) the last layer also skips the slots past the recipe's `loss_max_slot`."""
    by_length = model.forward_by_length

    def forward(tokens, feats, anchors, lens, block_size, ctx_extra, max_slot=None):
        if way == "padded":
            return model(tokens, feats, anchors, lens, block_size=block_size, ctx_extra=ctx_extra)
        return by_length(tokens, feats, anchors, lens, block_size=block_size, ctx_extra=ctx_extra,
                         max_slot=max_slot if way == "trained_slots" else None)
    return forward


if __name__ == "__main__":
    main()
