"""Summaries of one measurement window, and of several repeats of it.

Definitions (also in docs/src/concepts/measurement.md):
  output_tok_s     output tokens of successful requests / window duration (first send -> last completion)
  req_s            successful requests / window duration
  ttft_ms          time from send to the first streamed token
  tpot_ms          per request: (e2e - ttft) / (output tokens - 1); percentiles over requests
  itl_ms           gaps between consecutive streamed chunks, pooled over requests (with speculation one
                   chunk can carry several tokens, so ITL >= TPOT)
  e2e_ms           send -> last token
  acceptance_length  1 + accepted / drafts (counts the bonus token; the papers' tau does too)
  acceptance_rate  accepted / draft tokens
  acceptance_per_pos[i]  accepted at draft position i / drafts
  slo_attainment   requests of the window (failed ones included) that met every measurement.slo threshold /
                   all requests of the window
  goodput_req_s    requests that met every measurement.slo threshold / window duration
  send_lag_ms      open loop: actual send time - due time per request (p99 and max over the window)
  offered_rate     open loop: the rate the window really offered, (requests - 1) / (last send - first send)
Step time, its decomposition and per-request acceptance: metrics/decomposition.py.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable

import numpy as np

from ..records import METRIC_COLUMNS, DraftCounters, SloThresholds, StepTiming, TrialSummary, WindowMetrics
from .decomposition import (
    al_by_position,
    decode_timeline,
    position_acceptance,
    request_al_percentiles,
    timing_metrics,
    variance_shares,
)


def percentile(values: Iterable[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None for no values."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return None
    return float(np.percentile(np.asarray(vals, dtype=float), q))


def acceptance_metrics(delta: DraftCounters) -> dict[str, Any]:
    """AL, acceptance rate and per-position rates from a counter delta (None when nothing was drafted)."""
    if delta.num_drafts <= 0:
        # accepted tokens without a draft: the counters are inconsistent, AL is undefined (flagged)
        al = float("nan") if delta.num_accepted_tokens > 0 else None
        return {"acceptance_length": al, "acceptance_rate": None, "acceptance_per_pos": []}
    rate = delta.num_accepted_tokens / delta.num_draft_tokens if delta.num_draft_tokens > 0 else None
    return {
        "acceptance_length": 1.0 + delta.num_accepted_tokens / delta.num_drafts,
        "acceptance_rate": rate,
        "acceptance_per_pos": [a / delta.num_drafts for a in delta.accepted_per_pos],
    }


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1000.0


def slo_metrics(records: list, duration_s: float, slo: SloThresholds | None) -> dict[str, float | None]:
    """SLO attainment and goodput of a window's requests (None without an SLO or without requests)."""
    if slo is None or not records:
        return {"slo_attainment": None, "goodput_req_s": None}
    met = sum(1 for r in records if slo.met(r.ok, _ms(r.ttft), _ms(r.tpot), _ms(r.e2e)))
    return {"slo_attainment": met / len(records), "goodput_req_s": met / duration_s if duration_s > 0 else None}


def send_lag_metrics(records: list) -> dict[str, float | None]:
    """How late an open-loop window's requests were sent (None in closed loop)."""
    lags = [r.send_lag for r in records if r.send_lag is not None]
    return {"send_lag_ms_p99": _ms(percentile(lags, 99)), "send_lag_ms_max": _ms(max(lags)) if lags else None}


def offered_rate(records: list) -> float | None:
    """Open loop: the rate a window really offered, from its send times: (n - 1) / (last send - first send).
    None in closed loop (no schedule), with fewer than two requests, or when every request went at once."""
    sends = sorted(r.start for r in records if r.due is not None)
    if len(sends) < 2 or sends[-1] - sends[0] <= 0:
        return None
    return (len(sends) - 1) / (sends[-1] - sends[0])


def summarize_window(records: list, duration_s: float, delta: DraftCounters, slo: SloThresholds | None = None,
                     timing: StepTiming | None = None, **context: Any) -> WindowMetrics:
    """Metrics of one measurement window from per-request records (load.RequestRecord); `slo`: the sweep's
    per-request SLO (goodput and attainment); `timing`: the engine's step timing over the window (None: not
    timed); `context`: the WindowMetrics fields about how the window was taken (started_at, client_cpu_frac,
    memory...)."""
    ok = [r for r in records if r.ok]
    out_tokens = sum(r.num_output_tokens for r in ok)
    itls = [g for r in ok for g in r.itls]
    m: dict[str, Any] = {
        "window_s": duration_s,
        "num_requests": len(records),
        "failed_requests": len(records) - len(ok),
        "output_tokens": out_tokens,
        "output_tok_s": out_tokens / duration_s if duration_s > 0 else None,
        "req_s": len(ok) / duration_s if duration_s > 0 else None,
        "ttft_ms_p50": _ms(percentile((r.ttft for r in ok), 50)),
        "ttft_ms_p99": _ms(percentile((r.ttft for r in ok), 99)),
        "tpot_ms_p50": _ms(percentile((r.tpot for r in ok), 50)),
        "tpot_ms_p99": _ms(percentile((r.tpot for r in ok), 99)),
        "itl_ms_p50": _ms(percentile(itls, 50)),
        "itl_ms_p99": _ms(percentile(itls, 99)),
        "e2e_ms_p50": _ms(percentile((r.e2e for r in ok), 50)),
        "e2e_ms_p99": _ms(percentile((r.e2e for r in ok), 99)),
        "num_drafts": delta.num_drafts,
        "num_draft_tokens": delta.num_draft_tokens,
        "num_accepted_tokens": delta.num_accepted_tokens,
    }
    m.update(acceptance_metrics(delta))
    m.update(slo_metrics(records, duration_s, slo))
    m.update(send_lag_metrics(records))
    m["offered_rate"] = offered_rate(records)
    m["decode_step_ms"], m["decode_tokens_per_step"] = decode_timeline(
        (r.e2e, r.ttft, r.num_output_tokens, r.accepted_drafts) for r in ok)
    m.update(request_al_percentiles(r.spec for r in ok))
    m["position_acceptance"] = position_acceptance(r.spec for r in ok)
    m.update(timing_metrics(timing, out_tokens))
    return WindowMetrics(**m, **context)


def median_over_repeats(windows: list[WindowMetrics], **extra: Any) -> TrialSummary:
    """Median of every METRIC_COLUMN over repeat windows (None and NaN values ignored); `extra`: the other
    TrialSummary fields (cv, flags)."""
    out: dict[str, Any] = {}
    for col in METRIC_COLUMNS:
        vals = [v for v in (w.metric(col) for w in windows) if v is not None and not (isinstance(v, float) and math.isnan(v))]
        out[col] = statistics.median(vals) if vals else None
    per_pos = [w.acceptance_per_pos for w in windows if w.acceptance_per_pos]
    if per_pos:
        n = max(len(p) for p in per_pos)
        out["acceptance_per_pos"] = [
            statistics.median([p[i] for p in per_pos if i < len(p)]) for i in range(n)
        ]
    else:
        out["acceptance_per_pos"] = []
    out["al_by_position"] = al_by_position(w.position_acceptance for w in windows)
    out["tps_var_share_acceptance"], out["tps_var_share_step_time"] = variance_shares(
        [w.output_tok_s for w in windows], [w.decode_tokens_per_step for w in windows],
        [w.decode_step_ms for w in windows])
    return TrialSummary(**out, repeats=len(windows), failed_requests=sum(w.failed_requests for w in windows), **extra)
