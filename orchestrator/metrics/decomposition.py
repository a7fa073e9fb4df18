"""Where the time goes, and for whom acceptance is high: step-time decomposition and per-request acceptance.

Definitions (also in docs/src/concepts/measurement.md, "Why a method wins or loses"):
  decode steps of a request   output tokens - 1 - accepted drafts: every engine step after the first token
                              emits one token plus the drafts it accepted (steps where the drafter proposed
                              nothing included; a baseline request has output tokens - 1 steps)
  decode_step_ms              sum over a window's successful requests of (e2e - ttft) / sum of their decode
                              steps: the time between two steps of one request at that load
  decode_tokens_per_step      sum of (output tokens - 1) / sum of decode steps: tokens a request gains per
                              engine step, every step counted. acceptance_length (vLLM's counters) counts only
                              the steps that had drafts; ngram proposes nothing when no n-gram matches, so its
                              AL overstates what a step yields. 1.0 for a baseline
  engine_step_ms              the model runner's own step time, measured inside the engine (engines/
                              step_timing.py): total runner time / target forward passes
  verify_ms_per_step          the target's forward pass (the verification of K drafts + 1), per step
  drafter_ms_per_step         proposing the next drafts (the drafter's forward passes, or ngram's lookup)
  other_ms_per_step           engine_step_ms - verify - drafter (input preparation, sampling, rejection
                              sampling, bookkeeping)
  tokens_per_engine_step      output tokens of the window / its engine steps (batch size x AL, prefill steps
                              included); x_ms_per_step / tokens_per_engine_step is x's time per generated token
  request AL                  1 + accepted / verify steps of one request (vLLM's per-request
                              mean_acceptance_length); request_al_p10/p50/p90 are percentiles over requests
  step_cost_ratio             decode_step_ms / the paired baseline's decode_step_ms
  predicted_speedup           decode_tokens_per_step / step_cost_ratio: tokens per step over the cost of a
                              step (the baseline gains 1 token per step)
  identity_residual           measured speedup / predicted_speedup - 1 (what the identity leaves out: prefill
                              and time to first token, steps without drafts, a batch that is not full)
  al_by_position[b]           AL of the verify steps whose first token is at output positions
                              [b * POSITION_BUCKET, (b + 1) * POSITION_BUCKET), pooled over requests and windows
  tps_var_share_acceptance    cov(log tok/s, log decode_tokens_per_step) / var(log tok/s) over the trial's
                              windows
  tps_var_share_step_time     cov(log tok/s, -log decode_step_ms) / var(log tok/s); the two add up to about
                              1 when tok/s ~ AL / step time holds between repeats
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

from ..records import RequestSpecStats, StepTiming

POSITION_BUCKET = 16  # output tokens per bucket of al_by_position


def encode_runs(values: Sequence[int]) -> str:
    """Run-length encoding of a per-step array: "3*40,2,0*3" is forty 3s, one 2, three 0s ("" for none)."""
    out: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j < len(values) and values[j] == values[i]:
            j += 1
        n = j - i
        out.append(f"{values[i]}*{n}" if n > 1 else str(values[i]))
        i = j
    return ",".join(out)


def decode_runs(text: str | None) -> list[int]:
    """The inverse of encode_runs."""
    if not text:
        return []
    out: list[int] = []
    for part in text.split(","):
        value, _, count = part.partition("*")
        out.extend([int(value)] * (int(count) if count else 1))
    return out


def spec_columns(spec: RequestSpecStats | None) -> dict[str, Any]:
    """A request's RequestSpecStats as the RequestOutput (sweep_request_outputs) fields."""
    if spec is None:
        return {}
    return {"spec_steps": spec.steps, "spec_draft_tokens": spec.num_draft_tokens, "spec_accepted_tokens": spec.accepted,
            "spec_accept_histogram": list(spec.accept_histogram),
            "spec_step_accepted": encode_runs(spec.per_step_accepted) if spec.per_step_accepted else None,
            "spec_step_drafted": encode_runs(spec.per_step_drafted) if spec.per_step_drafted else None}


def decode_steps(output_tokens: int, accepted: int) -> int:
    """Engine steps a request took after its first token (each emits one token plus its accepted drafts)."""
    return max(0, output_tokens - 1 - accepted)


def decode_timeline(requests: Iterable[tuple[float, float, int, int]]) -> tuple[float | None, float | None]:
    """(e2e_s, ttft_s, output_tokens, accepted drafts) per successful request -> (decode_step_ms,
    decode_tokens_per_step), each pooled over the requests (None: no request took a decode step)."""
    time_s = steps = tokens = 0.0
    for e2e, ttft, out, accepted in requests:
        n = decode_steps(out, accepted)
        if n > 0 and e2e is not None and ttft is not None:
            time_s += e2e - ttft
            steps += n
            tokens += out - 1
    return (1000.0 * time_s / steps, tokens / steps) if steps else (None, None)


def request_al_percentiles(stats: Iterable[RequestSpecStats | None]) -> dict[str, float | None]:
    als = [s.acceptance_length for s in stats if s is not None and s.acceptance_length is not None]
    if not als:
        return {"request_al_p10": None, "request_al_p50": None, "request_al_p90": None}
    a = np.asarray(als, dtype=float)
    return {f"request_al_p{q}": float(np.percentile(a, q)) for q in (10, 50, 90)}


def position_acceptance(stats: Iterable[RequestSpecStats | None], bucket: int = POSITION_BUCKET) -> list[list[int]]:
    """[[verify steps, accepted drafts]] per bucket of output positions, from the per-step arrays. A request's
    first token comes from prefill (position 0); a step emitting 1 + a tokens starts at the next position."""
    counts: list[list[int]] = []
    for s in stats:
        if s is None or not s.per_step_accepted:
            continue
        pos = 1
        for a in s.per_step_accepted:
            b = pos // bucket
            while len(counts) <= b:
                counts.append([0, 0])
            counts[b][0] += 1
            counts[b][1] += a
            pos += a + 1
    return counts


def al_by_position(windows_counts: Iterable[list[list[int]]]) -> list[float | None]:
    """Pool position_acceptance over windows; AL per bucket (None where no step fell in it)."""
    total: list[list[int]] = []
    for counts in windows_counts:
        for b, (steps, accepted) in enumerate(counts):
            while len(total) <= b:
                total.append([0, 0])
            total[b][0] += steps
            total[b][1] += accepted
    return [1.0 + a / s if s else None for s, a in total]


def timing_metrics(delta: StepTiming | None, output_tokens: int = 0) -> dict[str, Any]:
    """Per-step figures of a window's StepTiming delta (None where the engine did not time its steps)."""
    if delta is None or delta.steps <= 0:
        return {"engine_steps": None if delta is None else delta.steps, "engine_step_ms": None,
                "tokens_per_engine_step": None, "drafter_ms_per_step": None, "verify_ms_per_step": None,
                "other_ms_per_step": None}
    per = 1000.0 / delta.steps
    return {
        "engine_steps": delta.steps,
        "engine_step_ms": delta.total_s * per,
        "tokens_per_engine_step": output_tokens / delta.steps,
        "drafter_ms_per_step": delta.drafter_s * per,
        "verify_ms_per_step": delta.verify_s * per,
        "other_ms_per_step": max(0.0, delta.total_s - delta.verify_s - delta.drafter_s) * per,
    }


def variance_shares(tok_s: Sequence[float | None], al: Sequence[float | None],
                    step_ms: Sequence[float | None]) -> tuple[float | None, float | None]:
    """How much of the throughput variance between repeats acceptance and step time explain (log scale).
    None with fewer than 3 complete windows or no variance."""
    rows = [(t, a, s) for t, a, s in zip(tok_s, al, step_ms)
            if t and a and s and t > 0 and a > 0 and s > 0 and not any(map(math.isnan, (t, a, s)))]
    if len(rows) < 3:
        return None, None
    y = np.log([r[0] for r in rows])
    la = np.log([r[1] for r in rows])
    ls = -np.log([r[2] for r in rows])
    var = float(np.var(y))
    if var <= 0:
        return None, None
    cov = lambda x: float(np.mean((y - y.mean()) * (x - x.mean())))  # noqa: E731
    return cov(la) / var, cov(ls) / var


def identity(tokens_per_step: float | None, step_ms: float | None, baseline_step_ms: float | None,
             speedup: float | None) -> dict[str, float | None]:
    """step_cost_ratio, predicted_speedup (decode tokens per step / ratio) and the measured speedup's residual
    against it."""
    ratio = step_ms / baseline_step_ms if step_ms and baseline_step_ms else None
    predicted = tokens_per_step / ratio if ratio and tokens_per_step else None
    residual = speedup / predicted - 1.0 if predicted and speedup is not None else None
    return {"step_cost_ratio": ratio, "predicted_speedup": predicted, "identity_residual": residual}
