"""Engine reuse: a grid over baseline + 2 speculative methods x 3 draft lengths x 4 concurrencies with the
fake backend (engine start 2 s). Prints engine starts (must equal the 7 distinct engine configurations,
not the 28 trials or a naive 36) and wall time against the lower bound

    bound = max(longest configuration group incl. its start, (total measured work + all starts) / engines)

where a start is the measured wall time from actor creation to a ready engine (process spawn, imports,
the simulated `start_seconds`). With exactly one engine per configuration, 7 configurations cannot be
spread evenly over 2 or 4 engines, so the bound is not always reachable; the script prints both.

for 1, 2 and 4 parallel engines. Target: wall <= 1.10 x bound.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from _common import run_spec

SPEC = """
name: reuse-{n}
target: {{model: fake-model}}
engine: {{backend: fake, fake: {{start_seconds: {start}, step_seconds: {step}, clock: real, acceptance: [0.7, 0.5, 0.3, 0.2, 0.1, 0.05]}}}}
workload: {{dataset: smoke, num_prompts: 8, max_tokens: 32, ignore_eos: true}}
methods:
  baseline: {{}}
  ngram: {{num_speculative_tokens: [2, 4, 6]}}
  draft_model: {{model: fake/drafter, num_speculative_tokens: [2, 4, 6]}}
space: {{concurrency: [1, 2, 4, 8]}}
measurement: {{repeats: 1, warmup_requests: 1, discard_first_window: false}}
resources: {{max_parallel_engines: {n}}}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--start-seconds", type=float, default=2.0)
    ap.add_argument("--step-seconds", type=float, default=0.02)
    ap.add_argument("--engines", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    print("wall = sweep wall time without Ray's own start-up (printed apart)")
    print(f"{'engines':>7} {'trials':>6} {'starts':>6} {'configs':>7} {'ray s':>6} {'wall s':>7} {'bound s':>7} {'ratio':>6}")
    for n in args.engines:
        out, st = run_spec(SPEC.format(n=n, start=args.start_seconds, step=args.step_seconds), f"reuse-{n}")
        rows = st.trials(out.sweep_id)
        configs = {r.engine_config_hash for r in rows}
        work, start = defaultdict(float), {}
        for r in rows:
            work[r.engine_config_hash] += (r.warmup_s or 0) + (r.measure_s or 0)
            start[r.engine_config_hash] = r.engine_start_s  # measured: spawn + imports + load
        bound = max(max(work[h] + start[h] for h in work), (sum(work.values()) + sum(start.values())) / n)
        wall = out.wall_s - out.ray_init_s
        print(f"{n:>7} {len(rows):>6} {out.engine_starts:>6} {len(configs):>7} {out.ray_init_s:>6.1f} {wall:>7.1f} "
              f"{bound:>7.1f} {wall / bound:>6.2f}")


if __name__ == "__main__":
    main()
