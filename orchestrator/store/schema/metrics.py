"""The metric columns shared by per-window and per-trial rows, with their descriptions."""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
)

from ...records import METRIC_COLUMNS

# The metric columns shared by sweep_measurements (one window) and sweep_trial_metrics (median over windows).
METRIC_COMMENTS: dict[str, str] = {
    "output_tok_s": "Throughput: output tokens of the successful requests / window duration (first send to last "
                    "completion), tokens/s",
    "req_s": "Successful requests / window duration (first send to last completion), requests/s",
    "ttft_ms_p50": "Time to first token (send to first streamed token), median over successful requests, ms",
    "ttft_ms_p99": "Time to first token (send to first streamed token), 99th percentile over successful "
                   "requests, ms",
    "tpot_ms_p50": "Time per output token after the first, per request (e2e - TTFT) / (output tokens - 1), median "
                   "over successful requests, ms",
    "tpot_ms_p99": "Time per output token after the first, per request (e2e - TTFT) / (output tokens - 1), 99th "
                   "percentile over successful requests, ms",
    "itl_ms_p50": "Inter-token latency: median of the gaps between consecutive streamed chunks, pooled over "
                  "successful requests, ms (a chunk can carry several speculated tokens, so ITL >= TPOT)",
    "itl_ms_p99": "Inter-token latency: 99th percentile of the gaps between consecutive streamed chunks, pooled "
                  "over successful requests, ms",
    "e2e_ms_p50": "End-to-end latency (send to last token), median over successful requests, ms",
    "e2e_ms_p99": "End-to-end latency (send to last token), 99th percentile over successful requests, ms",
    "acceptance_length": "Acceptance length (AL) from vLLM's counters: 1 + accepted draft tokens / verify steps "
                         "with drafts (bonus token counted); NULL: baseline, nothing drafted, or inconsistent "
                         "counters (flag impossible_al)",
    "acceptance_rate": "Accepted draft tokens / proposed draft tokens, 0 to 1; NULL: baseline or nothing drafted",
    "goodput_req_s": "Requests that succeeded and met every measurement.slo threshold / window duration, "
                     "requests/s; NULL: the sweep sets no SLO",
    "slo_attainment": "Share (0 to 1) of the window's requests, failed ones included, that met every "
                      "measurement.slo threshold; NULL: the sweep sets no SLO",
    "decode_step_ms": "Time between two decode steps of one request: sum of (e2e - TTFT) / sum of decode steps "
                      "(output tokens - 1 - accepted drafts) over successful requests, ms; NULL: no decode step",
    "decode_tokens_per_step": "Tokens a request gains per decode step, every step counted: sum of (output tokens "
                              "- 1) / sum of decode steps; 1.0 for a baseline; NULL: no decode step",
    "engine_step_ms": "The model runner's own time per engine step (execute_model + sample_tokens), measured "
                      "inside the engine, ms; NULL: step timing not installed",
    "tokens_per_engine_step": "Output tokens / engine steps (about batch size x tokens per step, prefill steps "
                              "included); a part's ms per step / this = its ms per generated token; NULL: not "
                              "timed",
    "drafter_ms_per_step": "Time proposing the next drafts (drafter forward passes, or ngram's lookup) per engine "
                           "step, ms; 0 for a baseline; NULL: not timed",
    "verify_ms_per_step": "The target model's forward pass per engine step (verifying K drafts + 1 for every "
                          "request of the batch), ms; NULL: not timed",
    "other_ms_per_step": "engine_step_ms - verify - drafter: input preparation, sampling and rejection sampling, "
                         "bookkeeping, ms per step; NULL: not timed",
    "request_al_p10": "10th percentile over successful requests of each request's own AL (1 + its accepted "
                      "drafts / its verify steps with drafts), vLLM per-request metrics; NULL: baseline or not "
                      "reported",
    "request_al_p50": "Median over successful requests of each request's own AL (1 + its accepted drafts / its "
                      "verify steps with drafts), vLLM per-request metrics; NULL: baseline or not reported",
    "request_al_p90": "90th percentile over successful requests of each request's own AL (1 + its accepted "
                      "drafts / its verify steps with drafts), vLLM per-request metrics; NULL: baseline or not "
                      "reported",
    "offered_rate": "Open loop: the rate really offered, (requests - 1) / (last send - first send), requests/s; "
                    "NULL: closed loop, fewer than 2 requests, or all sent at once",
}
TRIAL_METRIC_PREFIX = "Median over the trial's windows: "


def _metric_columns(prefix: str = "") -> list[Column[float]]:
    return [Column(c, Float, comment=prefix + METRIC_COMMENTS[c]) for c in METRIC_COLUMNS]
