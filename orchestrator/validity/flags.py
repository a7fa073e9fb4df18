"""Sanity flags: symptoms that make a row's numbers suspect. Each flag is a short name; a row's flags are
stored comma-separated (`trial_results.flags`) and explained in docs/src/concepts/measurement.md ("Flags").

Trial flags (from the trial's own windows):
  acceptance_collapse  AL < 1.05 with K >= 2: the drafter predicts nothing (wrong sample_from_anchor,
                       thinking mode on, a drafter for another target, random weights)
  impossible_al        AL > K + 1, or undefined though speculative counters moved (broken counters)
  no_drafts            speculation configured but not one draft counted
  empty_output         a successful request produced no token
  truncated_output     a request ended without stop or length (aborted), or short of max_tokens with ignore_eos
  failed_requests      at least one request failed
  warmup_failed        a warm-up request before a window failed (the engine may not have been warm)
  prefix_cache_hits    prefix-cache hits while prefix caching was meant to be off
  client_saturated     the load generator's process used > 90 % of a core: the client may have capped throughput
  noisy                throughput's coefficient of variation over repeats above measurement.noisy_cv
  low_priority         the engine process ran at a niceness above 0 (a Ray cluster's workers default to 15):
                       the node's other processes outranked it
  send_lag             open loop: the p99 of how late requests were sent against their schedule exceeded
                       measurement.max_send_lag_ms (the load generator could not keep the rate: the window
                       did not offer the load its row names)
  rate_off             open loop: a window offered a rate more than RATE_TOLERANCE (5 %) away from the nominal
                       request_rate (send lag, a max_concurrency cap holding sends back, or a raw schedule)
Pairing flags (against the paired baseline):
  lossy?               temperature 0 and the share of outputs identical to the baseline's, counting those
                       that part only at a near tie of the baseline's top-2 (validity/lossless.py), below
                       measurement.lossless_threshold
  inexact_numerics     (informational, not suspect) temperature 0 and some outputs part from the baseline's at
                       near ties: bfloat16 rounding of a batched verify, not a loss
  distribution_shift?  temperature > 0 and the first-token test's p-value < 0.01
  fingerprint_mismatch trial and baseline ran in different environments: no speedup is computed
  baseline_failed      the paired baseline failed: no speedup
"""

from __future__ import annotations

import math
from typing import Any

from ..records import RequestOutput, WindowMetrics
from ..states import TrialState

CLIENT_CPU_LIMIT = 0.9
RATE_TOLERANCE = 0.05  # rate_off: |offered / nominal - 1| above this
INFORMATIONAL_FLAGS = ("inexact_numerics",)  # flags that say something about a row without making it suspect


def _bad(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def trial_flags(*, k: int | None, windows: list[WindowMetrics], outputs: list[list[RequestOutput]], max_tokens: int,
                ignore_eos: bool, prefix_caching: bool, cv: float | None, noisy_cv: float,
                engine_niceness: int | None = None, max_send_lag_ms: float | None = None,
                nominal_rate: float | None = None) -> list[str]:
    flags: list[str] = []
    k = k or 0
    if k >= 1:
        als = [w.acceptance_length for w in windows]
        moved = any(w.num_accepted_tokens > 0 or w.num_drafts > 0 for w in windows)
        if any(isinstance(a, float) and math.isnan(a) for a in als) or any(
                a is not None and a > k + 1 + 1e-9 for a in als):
            flags.append("impossible_al")
        elif not moved:
            flags.append("no_drafts")
        good = [a for a in als if a is not None and not _bad(a)]
        if k >= 2 and good and sorted(good)[len(good) // 2] < 1.05:
            flags.append("acceptance_collapse")
    reqs = [o for window in outputs for o in window]
    if any(o.ok and o.output_tokens == 0 for o in reqs):
        flags.append("empty_output")
    if any(o.ok and (o.finish_reason not in ("stop", "length") or (ignore_eos and o.output_tokens < max_tokens))
           for o in reqs):
        flags.append("truncated_output")
    if any(w.failed_requests > 0 for w in windows):
        flags.append("failed_requests")
    if any(w.warmup_failed_requests > 0 for w in windows):
        flags.append("warmup_failed")
    if not prefix_caching and any((w.prefix_cache_hit_rate or 0) > 0 for w in windows):
        flags.append("prefix_cache_hits")
    if any((w.client_cpu_frac or 0) > CLIENT_CPU_LIMIT for w in windows):
        flags.append("client_saturated")
    if cv is not None and cv > noisy_cv:
        flags.append("noisy")
    if engine_niceness is not None and engine_niceness > 0:
        flags.append("low_priority")
    if max_send_lag_ms is not None and any((w.send_lag_ms_p99 or 0) > max_send_lag_ms for w in windows):
        flags.append("send_lag")
    if nominal_rate is not None and math.isfinite(nominal_rate) and any(
            w.offered_rate is not None and abs(w.offered_rate / nominal_rate - 1) > RATE_TOLERANCE for w in windows):
        flags.append("rate_off")
    return flags


def pairing_flags(*, temperature: float, match: dict | None, distribution: dict | None, threshold: float,
                  mismatch: list[str], baseline_state: str) -> list[str]:
    flags = []
    if baseline_state == TrialState.FAIL:
        flags.append("baseline_failed")
    if mismatch:
        flags.append("fingerprint_mismatch")
    if temperature == 0 and match and match.get("greedy_match_rate") is not None:
        near, n = match.get("near_tie_departures") or 0, match.get("outputs_compared") or 0
        if match["greedy_match_rate"] + (near / n if n else 0.0) < threshold:  # near ties count as identical
            flags.append("lossy?")
        if near:
            flags.append("inexact_numerics")
    if temperature > 0 and distribution and distribution.get("p_value") is not None and distribution["p_value"] < 0.01:
        flags.append("distribution_shift?")
    return flags
