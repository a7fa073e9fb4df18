"""Controller + store overhead per trial: N trials (default 200) of ~1 s of fake work each on one engine.

overhead per trial = (sweep wall - Ray start-up - engine start - sum of measured trial work) / N
It covers Optuna ask/tell on the RDB storage, the store writes, the scheduling loop and Ray RPCs.
Target: <= 20 ms per trial and <= 1% of the trial time.
"""

from __future__ import annotations

import argparse

from _common import run_spec

SPEC = """
name: overhead
target: {{model: fake-model}}
engine: {{backend: fake, fake: {{step_seconds: {step}, clock: real}}}}
workload: {{dataset: smoke, num_prompts: 1, max_tokens: 100, ignore_eos: true}}
methods:
  baseline: {{}}
space: {{concurrency: {concurrencies}}}
measurement: {{repeats: 1, warmup_requests: 0, discard_first_window: false}}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--trial-seconds", type=float, default=1.0)
    args = ap.parse_args()
    # one request of 100 tokens per trial: concurrency only labels the load point
    spec = SPEC.format(step=args.trial_seconds / 100, concurrencies=list(range(1, args.trials + 1)))
    out, st = run_spec(spec, "overhead", progress=False)  # the controller alone, as before: no rendering
    rows = st.trials(out.sweep_id)
    work = sum((r.warmup_s or 0) + (r.measure_s or 0) for r in rows)
    start = rows[0].engine_start_s
    wall = out.wall_s - out.ray_init_s
    per_trial = (wall - start - work) / len(rows)
    print(f"trials {len(rows)} (completed {out.completed}), engine starts {out.engine_starts}")
    print(f"wall {wall:.1f} s (Ray start-up {out.ray_init_s:.1f} s excluded), engine start {start:.1f} s, "
          f"measured work {work:.1f} s")
    print(f"overhead per trial: {per_trial * 1000:.1f} ms = {100 * per_trial / (work / len(rows)):.2f}% of a trial")


if __name__ == "__main__":
    main()
