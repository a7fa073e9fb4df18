"""What was measured: windows, trial medians, comparisons with the paired baseline, per-request outputs."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from .base import metadata
from .metrics import TRIAL_METRIC_PREFIX, _metric_columns

sweep_measurements = Table(
    "sweep_measurements", metadata,
    Column("id", Integer, primary_key=True,
           comment="Window id, referenced by sweep_request_outputs.measurement_id"),
    Column("trial_id", Integer, ForeignKey("sweep_trials.id", ondelete="CASCADE"), nullable=False, index=True,
           comment="The trial the window measured (sweep_trials.id)"),
    Column("repeat", Integer, nullable=False,
           comment="Repeat index of the window within its trial, from 0"),
    Column("window_s", Float, nullable=False,
           comment="Window duration, first send to last completion, seconds (the denominator of every rate)"),
    Column("num_requests", Integer, nullable=False,
           comment="Requests sent in the window, failed ones included"),
    Column("failed_requests", Integer, nullable=False,
           comment="Requests of the window that failed (error or timeout)"),
    Column("output_tokens", Integer, nullable=False,
           comment="Output tokens of the window's successful requests"),
    *_metric_columns(),
    Column("num_drafts", Integer,
           comment="Verify steps with drafts in the window (delta of vLLM's spec_decode num_drafts counter); 0 "
                   "for a baseline"),
    Column("num_draft_tokens", Integer,
           comment="Draft tokens proposed in the window (delta of vLLM's spec_decode counter)"),
    Column("num_accepted_tokens", Integer,
           comment="Draft tokens accepted in the window (delta of vLLM's spec_decode counter)"),
    Column("acceptance_per_pos", JSON,
           comment="JSON list: [i] = drafts accepted at draft position i / verify steps with drafts (each 0 to "
                   "1); empty for a baseline"),
    Column("environment_id", Integer, ForeignKey("sweep_environments.id", name="fk_sweep_measurements_environment"),
           comment="Fingerprint of the engine that measured this window (sweep_environments.id)"),
    Column("client_cpu_frac", Float,
           comment="The load generator's CPU time / window time: its share of a core (> 0.9 flags "
                   "client_saturated); NULL: simulated clock"),
    Column("prefix_cache_hit_rate", Float,
           comment="Prefix-cache hits / queries in the window, 0 to 1; NULL: no queries"),
    Column("memory_mb", Float,
           comment="Engine memory after the window, MB (kind: sweep_trials.memory_kind); NULL: not measured"),
    Column("started_at", DateTime(timezone=True),
           comment="When the measured window began (UTC), after warm-up; with rotated order repeat r of every "
                   "trial precedes r+1"),
    Column("created_at", DateTime(timezone=True), nullable=False,
           comment="When the window's row was written (UTC), at the trial's completion"),
    Column("warmup_failed_requests", Integer,
           comment="Discarded warm-up requests before this window that failed (> 0 flags warmup_failed)"),
    Column("discarded_window", Boolean,
           comment="True when a whole window was run and discarded before this one (the engine had just "
                   "started)"),
    Column("send_lag_ms_p99", Float,
           comment="Open loop: 99th percentile of how late requests were sent against their schedule, ms; NULL: "
                   "closed loop"),
    Column("send_lag_ms_max", Float,
           comment="Open loop: the most any request was sent late against its schedule, ms; NULL: closed loop"),
    Column("engine_steps", Integer,
           comment="Model-runner steps (target forward passes, prefill included) in the window, counted inside "
                   "the engine; NULL: step timing not installed"),
    Column("position_acceptance", JSON,
           comment="JSON list per 16 output positions: [verify steps, accepted drafts] of the steps starting "
                   "there; NULL: baseline or no per-step data"),
    UniqueConstraint("trial_id", "repeat", name="uq_sweep_measurements_repeat"),
    comment="One row per measurement window (repeat) of a trial: its metrics, draft counters and how it was "
            "taken",
)

# Median over the trial's repeats; one row per completed trial.
sweep_trial_metrics = Table(
    "sweep_trial_metrics", metadata,
    Column("trial_id", Integer, ForeignKey("sweep_trials.id", ondelete="CASCADE"), primary_key=True,
           comment="The completed trial (sweep_trials.id)"),
    *_metric_columns(TRIAL_METRIC_PREFIX),
    Column("acceptance_per_pos", JSON,
           comment="JSON list: [i] = median over windows of the acceptance rate at draft position i (accepted "
                   "at i / verify steps with drafts); empty for a baseline"),
    Column("repeats", Integer, nullable=False,
           comment="Measurement windows the medians are taken over"),
    Column("failed_requests", Integer, nullable=False,
           comment="Failed requests summed over the trial's windows"),
    Column("output_tok_s_cv", Float,
           comment="Coefficient of variation (stdev / mean) of output_tok_s over the windows; NULL: fewer than 2 "
                   "windows"),
    Column("trial_flags", Text,
           comment="Comma-separated sanity flags from the trial's own windows (pairing flags excluded); NULL: "
                   "none"),
    Column("al_by_position", JSON,
           comment="JSON list: [b] = AL of verify steps whose first token is at output positions [16b, 16b+16), "
                   "pooled over requests and windows (null: no step there); NULL: baseline or no per-step data"),
    Column("tps_var_share_acceptance", Float,
           comment="Share of tok/s variance between windows explained by tokens per step: cov(log tok/s, log "
                   "decode_tokens_per_step) / var(log tok/s); NULL: fewer than 3 windows"),
    Column("tps_var_share_step_time", Float,
           comment="Share of tok/s variance between windows explained by step time: cov(log tok/s, -log "
                   "decode_step_ms) / var(log tok/s); NULL: fewer than 3 windows"),
    comment="One row per completed trial: the median of each metric over its windows (repeats), and repeat "
            "statistics",
)

# A speculative trial against its paired baseline; one row per compared trial.
sweep_trial_comparisons = Table(
    "sweep_trial_comparisons", metadata,
    Column("trial_id", Integer, ForeignKey("sweep_trials.id", ondelete="CASCADE"), primary_key=True,
           comment="The speculative trial compared (sweep_trials.id)"),
    Column("baseline_trial_id", Integer, ForeignKey("sweep_trials.id", ondelete="CASCADE"), nullable=False,
           comment="Its paired no-speculation baseline trial (sweep_trials.id)"),
    Column("speedup", Float,
           comment="Median output_tok_s / the baseline's median output_tok_s (> 1: faster); NULL: fingerprint "
                   "mismatch or a trial not COMPLETE"),
    Column("speedup_ci_low", Float,
           comment="Lower bound of the speedup's confidence interval (level: confidence), from per-repeat "
                   "throughputs on the log scale; NULL: fewer than 2 repeats on a side"),
    Column("speedup_ci_high", Float,
           comment="Upper bound of the speedup's confidence interval (level: confidence); NULL: fewer than 2 "
                   "repeats on a side"),
    Column("speedup_ci_method", Text,
           comment="How the interval was computed: student t or studentized bootstrap over paired log ratios, "
                   "or welch t / bootstrap over unpaired log means, or why there is none"),
    Column("confidence", Float,
           comment="Confidence level of the speedup interval (measurement.confidence, e.g. 0.95)"),
    Column("tpot_ratio", Float,
           comment="Median tpot_ms_p50 / the baseline's (< 1: faster per token); NULL: no speedup computed"),
    Column("ttft_ratio", Float,
           comment="Median ttft_ms_p50 / the baseline's (< 1: faster first token); NULL: no speedup computed"),
    Column("step_cost_ratio", Float,
           comment="decode_step_ms / the baseline's decode_step_ms: what a decode step costs against a plain "
                   "one; NULL: not measurable"),
    Column("predicted_speedup", Float,
           comment="decode_tokens_per_step / step_cost_ratio: the speedup the identity tokens per step / cost of "
                   "a step predicts"),
    Column("identity_residual", Float,
           comment="speedup / predicted_speedup - 1: what the identity leaves out (prefill and TTFT, steps "
                   "without drafts, a batch not full)"),
    Column("greedy_match_rate", Float,
           comment="Temperature 0: share (0 to 1) of (repeat, prompt) outputs token-identical to the baseline's; "
                   "NULL: temperature > 0 or nothing compared"),
    Column("common_prefix_frac", Float,
           comment="Temperature 0: mean over (repeat, prompt) of common-prefix length / longer output's length; "
                   "NULL: temperature > 0 or nothing compared"),
    Column("outputs_compared", Integer,
           comment="Temperature 0: (repeat, prompt) outputs present on both sides and compared; NULL: temperature "
                   "> 0"),
    Column("departures", Integer,
           comment="Temperature 0: compared outputs that part from the baseline's (validity/lossless.py); NULL: "
                   "temperature > 0 or stored before specsweep 0.11"),
    Column("near_tie_departures", Integer,
           comment="Of the departures, those where both tokens were among the baseline's own top three, each "
                   "within the dtype's near-tie margin of its choice: numerics (flag inexact_numerics), not a loss"),
    Column("min_clear_margin", Float,
           comment="Smallest logprob margin (nats) below the baseline's choice of a departing token at a departure "
                   "that was not a near tie; NULL: none, or the baseline's top three were not scored there"),
    Column("distribution_test", JSON,
           comment="Temperature > 0: chi-square homogeneity test of the first output token as JSON (n_spec, "
                   "n_baseline, statistic, dof, p_value); NULL: temperature 0"),
    Column("fingerprint_diff", JSON,
           comment="JSON list of compared fingerprint fields that differ between trial and baseline (empty: "
                   "comparable); NULL: a trial not COMPLETE"),
    Column("pairing_flags", Text,
           comment="Comma-separated pairing flags: lossy?, distribution_shift?, fingerprint_mismatch, "
                   "baseline_failed; NULL: none"),
    Column("created_at", DateTime(timezone=True), nullable=False,
           comment="When the comparison was computed (UTC)"),
    comment="One row per speculative trial compared with its paired baseline: speedup with its interval, "
            "latency ratios, the step-cost identity and the lossless check",
)

sweep_request_outputs = Table(
    "sweep_request_outputs", metadata,
    Column("id", Integer, primary_key=True,
           comment="Request output id"),
    Column("measurement_id", Integer, ForeignKey("sweep_measurements.id", ondelete="CASCADE"), nullable=False, index=True,
           comment="The window the request ran in (sweep_measurements.id)"),
    Column("prompt_id", String(255), nullable=False,
           comment="The dataset prompt's id: the same prompt across repeats, methods and baselines"),
    Column("ok", Boolean, nullable=False,
           comment="True when the request succeeded; False: it failed (see error)"),
    Column("error", Text,
           comment="Why the request failed; NULL: it succeeded"),
    Column("finish_reason", String(32),
           comment="Why generation ended, as the engine reports it (stop, length, abort); NULL: not reported"),
    Column("output_tokens", Integer, nullable=False,
           comment="Tokens generated for the request"),
    Column("prompt_tokens", Integer,
           comment="Prompt length in tokens, as the engine tokenised it (chat template applied); NULL: not "
                   "reported"),
    Column("ttft_ms", Float,
           comment="Time from send to the first streamed token, ms; NULL: no token arrived (failed request)"),
    Column("e2e_ms", Float,
           comment="Time from send to the last token, ms; NULL: the request did not finish"),
    Column("output_text", Text,
           comment="The generated text"),
    Column("output_token_ids", JSON,
           comment="JSON list of the generated token ids (what the lossless check compares)"),
    # per-request speculative decoding, from vLLM's per_request_spec_decode_metrics=detailed (0009; null: baseline)
    Column("spec_steps", Integer,
           comment="Verify steps of this request that had drafts (vLLM per-request spec-decode metrics); NULL: "
                   "baseline or not reported"),
    Column("spec_draft_tokens", Integer,
           comment="Draft tokens proposed for this request; NULL: baseline or not reported"),
    Column("spec_accepted_tokens", Integer,
           comment="Draft tokens accepted for this request; NULL: baseline or not reported"),
    Column("spec_accept_histogram", JSON,
           comment="JSON list: [j] = verify steps of this request that accepted j drafts (length K + 1); NULL: "
                   "baseline or not reported"),
    Column("spec_step_accepted", Text,
           comment="Accepted drafts per verify step, in step order, run-length encoded ('3*40,2,0*3' is forty "
                   "3s, a 2, three 0s); NULL: not reported"),
    Column("spec_step_drafted", Text,
           comment="Drafts proposed per verify step, in step order, run-length encoded like spec_step_accepted; "
                   "NULL: not reported"),
    Column("top3", JSON,
           comment="Baseline engines, first window, temperature 0: per output position [chosen token id, 2nd, its "
                   "logprob margin, 3rd, its margin] from a check pass after the window; NULL elsewhere"),
    comment="One row per request of a measurement window: its outcome, latencies, output and, for speculative "
            "trials, its own acceptance",
)
