"""Coverage of the speedup's confidence interval, end to end through the engine actor's measurement
windows: the fake backend with injected per-window noise of known size (step time x exp(N(0, sigma))).

The true speedup is the noise-free one (geometric mean over 40 noise-free window pairs; the drafts'
acceptance draws vary by window, so this is an average over them too). Each of N seeded
runs measures `repeats` windows of the baseline and of ngram K=3, alternating as the rotated order does,
and computes the 95 % interval with the product's `speedup_interval`. Prints how many intervals cover the
true speedup. Target (issue 5): >= 93 of 100.

    .venv/bin/python benchmarks/speedup_ci.py [--runs 100] [--repeats 3] [--noise 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.datasets import load_prompts  # noqa: E402
from orchestrator.engines.actor import EngineActor  # noqa: E402
from orchestrator.engines.base import EngineConfig  # noqa: E402
from orchestrator.records import MeasureRequest, SamplingSettings  # noqa: E402
from orchestrator.validity import speedup_interval  # noqa: E402

SAMPLING = SamplingSettings(max_tokens=16, temperature=0.0, ignore_eos=True)
PROMPTS = {"smoke": load_prompts("smoke", num_prompts=8)}


def config(k: int, noise: float, noise_seed: int) -> EngineConfig:
    # `seed` drives the drafts' acceptance draws: a different one per run, or every run would see the same
    # (lucky or unlucky) first windows and the runs would share one bias
    fake = {"step_seconds": 0.004, "token_cost": 0.1, "acceptance": [0.8, 0.6, 0.4], "seed": noise_seed,
            "noise": noise, "noise_seed": noise_seed}
    spec = {"method": "ngram", "num_speculative_tokens": k} if k else None
    return EngineConfig(backend="fake", model="fake", model_path="fake", revision=None, dtype="auto",
                        max_model_len=2048, method_label="ngram" if k else "baseline",
                        method="ngram" if k else "baseline", speculative_config=spec,
                        engine_args={"max_num_seqs": 64}, fake=fake)


async def windows(noise: float, noise_seed: int, repeats: int, concurrency: int) -> tuple[list[float], list[float]]:
    base, spec = EngineActor(config(0, noise, noise_seed), PROMPTS, SAMPLING), EngineActor(config(3, noise, noise_seed), PROMPTS, SAMPLING)
    await base.start()
    await spec.start()
    b, s = [], []
    req = MeasureRequest(dataset="smoke", concurrency=concurrency, warmup_requests=0, request_timeout_s=60.0)
    for _ in range(repeats):  # rotated: repeat r of both before r + 1
        b.append((await base.measure(req)).metrics.output_tok_s)
        s.append((await spec.measure(req)).metrics.output_tok_s)
    await base.stop()
    await spec.stop()
    return s, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--noise", type=float, default=0.1, help="sigma of the per-window log slowdown")
    ap.add_argument("--concurrency", type=int, default=4)
    a = ap.parse_args()
    t0 = time.perf_counter()
    s, b = asyncio.run(windows(0.0, 0, 40, a.concurrency))
    truth = math.exp(statistics.fmean(math.log(x / y) for x, y in zip(s, b)))
    print(f"true speedup (noise-free, geometric mean of 40 window ratios): {truth:.4f}")
    covered, widths, method = 0, [], ""
    for seed in range(a.runs):
        s, b = asyncio.run(windows(a.noise, seed + 1, a.repeats, a.concurrency))
        ci = speedup_interval(s, b, confidence=0.95, resamples=10000, seed=seed)
        covered += ci["low"] <= truth <= ci["high"]
        widths.append(ci["high"] - ci["low"])
        method = ci["method"]
    print(f"interval: {method}")
    print(f"repeats {a.repeats}, injected noise sigma {a.noise}: the 95% interval covered the true speedup in "
          f"{covered} of {a.runs} runs (target >= 93); median width {statistics.median(widths):.3f}; "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
