"""Typed records for everything that crosses a module boundary on the way from an engine to the store.

The path, and the record at each hop:
  controller --MeasureRequest--> engine actor            (what to measure: dataset, load, warm-up)
  engine backend --TokenChunk--> load generator          (streamed tokens)
  engine backend --DraftCounters--> metrics              (vllm:spec_decode_* counters; subtract snapshots)
  engine actor --WindowResult--> pool --> controller     (one window: WindowMetrics + RequestOutput per request)
  controller --TrialSummary--> validity/store/Optuna     (median over windows)
  controller --CompletedTrial--> Store.complete_trial    (all of a finished trial, written in one transaction)

No module reads a result dict by convention: a new measured quantity is a field here, which makes every
reader and the store's insert see it. This module imports nothing from the rest of the package.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import asdict, dataclass, field
from typing import Any

# Numeric columns shared by a window's metrics (sweep_measurements, one row per window) and a trial's summary
# (sweep_trial_metrics, median over windows). The spec's objectives and constraints take these names.
METRIC_COLUMNS = (
    "output_tok_s", "req_s",
    "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99",
    "itl_ms_p50", "itl_ms_p99", "e2e_ms_p50", "e2e_ms_p99",
    "acceptance_length", "acceptance_rate",
    "goodput_req_s", "slo_attainment",
    # where the time goes (issue 15; metrics/decomposition.py defines each)
    "decode_step_ms", "decode_tokens_per_step", "engine_step_ms", "tokens_per_engine_step", "drafter_ms_per_step", "verify_ms_per_step", "other_ms_per_step",
    # per-request acceptance (vLLM's per_request_spec_decode_metrics): percentiles of request-level AL
    "request_al_p10", "request_al_p50", "request_al_p90",
    # open loop: the rate the window really offered (load/open_loop.py; issue 51)
    "offered_rate",
)


@dataclass(frozen=True)
class SamplingSettings:
    """How every request of a sweep is sampled (the same for every method and its baseline)."""

    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    ignore_eos: bool = False
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestSpecStats:
    """One request's speculative decoding as the engine verified it (vLLM's per-request spec-decode metrics at
    the `detailed` level; the fake backend keeps the same). A verify step proposes `per_step_drafted[i]` draft
    tokens and accepts `per_step_accepted[i]` of them, then adds one bonus token."""

    accept_histogram: list[int]  # [j] = verify steps that accepted j drafts (length num_speculative_tokens + 1)
    num_draft_tokens: int
    per_step_accepted: list[int] = field(default_factory=list)  # in step order (empty at the `summary` level)
    per_step_drafted: list[int] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return sum(self.accept_histogram)

    @property
    def accepted(self) -> int:
        return sum(j * n for j, n in enumerate(self.accept_histogram))

    @property
    def acceptance_length(self) -> float | None:
        """Tokens per verify step, the bonus token counted (None: no verify step)."""
        return 1.0 + self.accepted / self.steps if self.steps else None


@dataclass
class TokenChunk:
    """Tokens that arrived together in one streamed update (speculation can deliver several)."""

    token_ids: list[int]
    text: str
    finished: bool = False
    finish_reason: str | None = None
    prompt_tokens: int | None = None  # prompt length as the engine tokenised it (first chunk)
    spec: RequestSpecStats | None = None  # on the finishing chunk, when the engine reports per-request metrics


@dataclass
class DraftCounters:
    """Cumulative draft/accept counters of an engine (vllm:spec_decode_*). Subtract two snapshots for a delta."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)

    def __sub__(self, other: "DraftCounters") -> "DraftCounters":
        return DraftCounters(
            self.num_drafts - other.num_drafts,
            self.num_draft_tokens - other.num_draft_tokens,
            self.num_accepted_tokens - other.num_accepted_tokens,
            [x - y for x, y in itertools.zip_longest(self.accepted_per_pos, other.accepted_per_pos, fillvalue=0)],
        )


@dataclass(frozen=True)
class StepTiming:
    """Cumulative time inside the engine's model runner (engines/step_timing.py). Subtract two snapshots for a
    window. `steps`: forward passes of the target (one per engine step); `total_s`: the runner's whole step
    (input preparation, target forward, sampling and verification, drafting, bookkeeping); `verify_s`: the
    target's forward pass; `drafter_s`: proposing the next drafts. `other` = total - verify - drafter."""

    steps: int = 0
    total_s: float = 0.0
    verify_s: float = 0.0
    drafter_s: float = 0.0
    clock: str = "perf_counter"  # perf_counter (CPU: synchronous) | cuda_events (GPU)

    def __sub__(self, other: "StepTiming") -> "StepTiming":
        return StepTiming(self.steps - other.steps, self.total_s - other.total_s, self.verify_s - other.verify_s,
                          self.drafter_s - other.drafter_s, self.clock)


@dataclass(frozen=True)
class EngineStarted:
    """What an engine actor reports once its engine is up."""

    start_s: float  # inside the actor: engine construction and model load
    pid: int  # the actor's process (the engine core may run in a child)
    fingerprint: dict[str, Any]  # environment fingerprint document (validity.fingerprint compares its fields)
    kv_cache_tokens: int | None = None
    memory_kind: str | None = None
    memory_mb: float | None = None
    log_path: str | None = None  # the engine's own output (engines/engine_log.py); None: it went to the console


@dataclass(frozen=True)
class SloThresholds:
    """Per-request service-level objectives (`measurement.slo`): a request meets the SLO when it succeeded and
    every threshold given holds for it. Goodput counts such requests per second."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def met(self, ok: bool, ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None) -> bool:
        if not ok:
            return False
        if self.ttft_ms is not None and (ttft_ms is None or ttft_ms > self.ttft_ms):
            return False
        # a one-token answer has no TPOT: that threshold cannot be missed
        if self.tpot_ms is not None and tpot_ms is not None and tpot_ms > self.tpot_ms:
            return False
        if self.e2e_ms is not None and (e2e_ms is None or e2e_ms > self.e2e_ms):
            return False
        return True


@dataclass(frozen=True)
class OpenLoopLoad:
    """An open-loop load point: requests sent on a seeded arrival schedule, whatever is in flight
    (load/open_loop.py). The schedule depends only on these fields and the number of prompts, so the
    baseline and every method at one load point get the same send times, in the same prompt order."""

    request_rate: float  # requests/s; inf: every request at once
    arrival: str = "poisson"  # poisson | gamma
    burstiness: float = 1.0  # gamma shape (1.0 = poisson); < 1 burstier, > 1 more regular
    seed: int = 0
    max_concurrency: int | None = None  # cap on requests in flight (a request due while full waits)
    schedule: str = "exact"  # exact: the drawn gaps rescaled so the schedule offers request_rate; raw: as drawn


@dataclass(frozen=True)
class MeasureRequest:
    """What the pool asks an engine actor to measure: one window of `dataset` at `concurrency` (closed loop)
    or on `open_loop`'s arrival schedule."""

    dataset: str
    concurrency: int
    open_loop: OpenLoopLoad | None = None
    slo: SloThresholds | None = None
    warmup_requests: int = 0
    request_timeout_s: float = 600.0
    discard_first_window: bool = False  # after an engine start, run (and discard) one whole window first
    score_top3: bool = False  # after the window (outside it): each output's top three per position (RequestOutput.top3)


@dataclass(frozen=True)
class RequestOutput:
    """One request of a measurement window (a sweep_request_outputs row)."""

    prompt_id: str
    ok: bool
    error: str | None = None
    finish_reason: str | None = None
    output_tokens: int = 0
    prompt_tokens: int | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    output_text: str = ""
    output_token_ids: list[int] = field(default_factory=list)
    # per-request speculative decoding (None: baseline, or the engine did not report it); see RequestSpecStats
    spec_steps: int | None = None
    spec_draft_tokens: int | None = None
    spec_accepted_tokens: int | None = None
    spec_accept_histogram: list[int] | None = None
    spec_step_accepted: str | None = None  # per-step arrays, run-length encoded (metrics.decomposition.encode_runs)
    spec_step_drafted: str | None = None
    # baseline engines, first window, temperature 0: per output position [chosen token id, 2nd, |logprob margin|,
    # 3rd, |margin|], from a check pass after the window (validity/lossless.py: near ties)
    top3: list[list[float]] | None = None

    def row(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MetricValues:
    """The METRIC_COLUMNS, shared by a window's metrics and a trial's summary (median over windows)."""

    output_tok_s: float | None = None
    req_s: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_p50: float | None = None
    tpot_ms_p99: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p99: float | None = None
    e2e_ms_p50: float | None = None
    e2e_ms_p99: float | None = None
    acceptance_length: float | None = None  # 1 + accepted / drafts: counts the bonus token
    acceptance_rate: float | None = None
    goodput_req_s: float | None = None  # requests that met every measurement.slo threshold / window duration
    slo_attainment: float | None = None  # share of the window's requests (failed included) that met the SLO
    decode_step_ms: float | None = None  # sum of requests' decode time / sum of their verify (or decode) steps
    decode_tokens_per_step: float | None = None  # sum of (output tokens - 1) / sum of decode steps (1.0: baseline)
    engine_step_ms: float | None = None  # the model runner's own step time (StepTiming): total / steps
    tokens_per_engine_step: float | None = None  # output tokens of the window / its engine steps (batch x AL)
    drafter_ms_per_step: float | None = None
    verify_ms_per_step: float | None = None
    other_ms_per_step: float | None = None
    request_al_p10: float | None = None  # percentiles over requests of each request's own AL
    request_al_p50: float | None = None
    request_al_p90: float | None = None
    offered_rate: float | None = None  # open loop: (requests - 1) / (last send - first send), requests/s
    acceptance_per_pos: list[float] = field(default_factory=list)

    def metric(self, name: str) -> float | None:
        value: float | None = getattr(self, name)
        return value


@dataclass(frozen=True)
class WindowMetrics(MetricValues):
    """Everything measured over one window (a sweep_measurements row, less its keys)."""

    window_s: float = 0.0
    num_requests: int = 0
    failed_requests: int = 0
    output_tokens: int = 0
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    # how the window was taken
    started_at: dt.datetime | None = None
    warmup_failed_requests: int = 0  # warm-up requests (discarded) that failed before this window
    discarded_window: bool = False  # a whole window was run and discarded first (engine just started)
    client_cpu_frac: float | None = None  # the load generator's share of a core during the window
    prefix_cache_hit_rate: float | None = None
    memory_kind: str | None = None  # gpu | rss
    memory_mb: float | None = None
    # open loop: how late requests were sent against their schedule (the generator's own lag; time a request
    # waited for a free slot under max_concurrency is not lag)
    send_lag_ms_p99: float | None = None
    send_lag_ms_max: float | None = None
    engine_steps: int | None = None  # model-runner steps in the window (StepTiming)
    # acceptance by output position: [[verify steps, accepted drafts]] per POSITION_BUCKET tokens of the answer
    position_acceptance: list[list[int]] = field(default_factory=list)


@dataclass(frozen=True)
class WindowResult:
    """What an engine actor returns for one MeasureRequest."""

    metrics: WindowMetrics
    outputs: list[RequestOutput]
    warmup_s: float = 0.0
    measure_s: float = 0.0
    environment_id: int | None = None  # set by the controller's pool: the engine that served the window


@dataclass(frozen=True)
class TrialSummary(MetricValues):
    """A trial's figures: the median of each metric over its windows (a sweep_trial_metrics row)."""

    repeats: int = 0
    failed_requests: int = 0
    output_tok_s_cv: float | None = None  # coefficient of variation of output_tok_s over windows
    trial_flags: str | None = None  # comma-separated sanity flags of the trial's own windows
    al_by_position: list[float | None] = field(default_factory=list)  # AL per POSITION_BUCKET output tokens, pooled
    # share of the throughput variance between repeats explained by acceptance and by step time (log scale)
    tps_var_share_acceptance: float | None = None
    tps_var_share_step_time: float | None = None



@dataclass(frozen=True)
class CompletedTrial:
    """All of a finished trial, as Store.complete_trial writes it in one transaction."""

    windows: list[WindowResult]
    summary: TrialSummary
    warmup_s: float = 0.0
    measure_s: float = 0.0
    feasible: bool | None = None  # None: the sweep has no SLO constraints
    flags: str | None = None
    memory_kind: str | None = None
    engine_memory_mb: float | None = None
    kv_cache_tokens: int | None = None


@dataclass(frozen=True)
class Comparison:
    """A speculative trial against its paired baseline (a sweep_trial_comparisons row)."""

    baseline_trial_id: int
    confidence: float
    speedup: float | None = None  # median output tok/s / the baseline's (None on a fingerprint mismatch)
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    speedup_ci_method: str | None = None
    tpot_ratio: float | None = None
    ttft_ratio: float | None = None
    step_cost_ratio: float | None = None  # decode_step_ms / the baseline's
    predicted_speedup: float | None = None  # decode_tokens_per_step / step_cost_ratio (the identity)
    identity_residual: float | None = None  # speedup / predicted_speedup - 1
    greedy_match_rate: float | None = None  # temperature 0: outputs identical to the baseline's
    common_prefix_frac: float | None = None
    outputs_compared: int | None = None
    # temperature 0: outputs that part from the baseline's, those that part at a near tie of the baseline's own
    # top three (numerics, not a loss), and the smallest margin among the other departures (validity/lossless.py)
    departures: int | None = None
    near_tie_departures: int | None = None
    min_clear_margin: float | None = None
    distribution_test: dict[str, Any] | None = None  # temperature > 0: first-token test
    fingerprint_diff: list[str] | None = None  # compared fingerprint fields that differ
    pairing_flags: str | None = None

    def row(self) -> dict[str, Any]:
        return asdict(self)
