"""The store's views: what users query with SQL (docs/src/reference/store.md) and what store/results.py reads. Recreated
when their text changes (store/migrate.py compares a hash of it)."""

from __future__ import annotations

from ..records import METRIC_COLUMNS

_METRICS_SELECT = ",\n  ".join(f"m.{c}" for c in METRIC_COLUMNS)

VIEWS = {
    "trial_results": f"""
CREATE VIEW trial_results AS
SELECT
  s.name AS sweep,
  t.trial_number AS trial,
  t.method_label AS label,
  t.method,
  t.backend,
  t.num_speculative_tokens,
  t.dataset,
  t.concurrency,
  t.request_rate,
  t.max_num_seqs,
  t.max_num_batched_tokens,
  t.params,
  {_METRICS_SELECT},
  m.repeats,
  m.failed_requests,
  m.acceptance_per_pos,
  m.output_tok_s_cv,
  c.speedup,
  c.speedup_ci_low,
  c.speedup_ci_high,
  c.tpot_ratio,
  c.ttft_ratio,
  c.step_cost_ratio,
  c.predicted_speedup,
  c.identity_residual,
  m.al_by_position,
  m.tps_var_share_acceptance,
  m.tps_var_share_step_time,
  c.greedy_match_rate,
  c.common_prefix_frac,
  c.departures,
  c.near_tie_departures,
  c.min_clear_margin,
  t.flags,
  t.role,
  t.baseline_trial_id,
  t.state,
  t.error,
  t.feasible,
  t.on_pareto_front,
  t.optuna_trial_number,
  t.model,
  t.drafter,
  t.engine_config_hash,
  e.hostname,
  e.cpu_model,
  e.gpu_model,
  e.vllm_version,
  e.cpu_isa,
  e.dtype,
  t.queued_s,
  t.engine_start_s,
  t.warmup_s,
  t.measure_s,
  t.memory_kind,
  t.engine_memory_mb,
  t.kv_cache_tokens,
  c.speedup_ci_method,
  c.fingerprint_diff,
  t.started_at,
  t.finished_at,
  t.point_key,
  t.environment_id,
  t.id AS trial_id,
  s.id AS sweep_id
FROM sweep_trials t
JOIN sweeps s ON s.id = t.sweep_id
LEFT JOIN sweep_trial_metrics m ON m.trial_id = t.id
LEFT JOIN sweep_environments e ON e.id = t.environment_id
LEFT JOIN sweep_trial_comparisons c ON c.trial_id = t.id
""",
    # Per method configuration and dataset: the lowest measured concurrency at which the speedup is below
    # 1.0 (null: none in range), and the measured range.
    "speedup_crossover": """
CREATE VIEW speedup_crossover AS
SELECT
  sweep,
  label,
  method,
  num_speculative_tokens,
  drafter,
  max_num_seqs,
  max_num_batched_tokens,
  dataset,
  MIN(CASE WHEN speedup < 1.0 THEN concurrency END) AS crossover_concurrency,
  MIN(concurrency) AS min_concurrency,
  MAX(concurrency) AS max_concurrency,
  MAX(speedup) AS best_speedup
FROM trial_results
WHERE speedup IS NOT NULL AND request_rate IS NULL
GROUP BY sweep, label, method, num_speculative_tokens, drafter, max_num_seqs, max_num_batched_tokens, dataset
""",
    # The Pareto front of each sweep (Optuna's best trials for the sweep's objectives).
    "pareto": """
CREATE VIEW pareto AS
SELECT * FROM trial_results WHERE on_pareto_front AND state = 'COMPLETE'
""",
    # Per sweep, method label, dataset and concurrency: the configuration with the highest throughput
    # (K, drafter, batch settings), with its speedup, interval and flags.
    "method_summary": """
CREATE VIEW method_summary AS
SELECT sweep, label, method, dataset, concurrency, request_rate, num_speculative_tokens, drafter, max_num_seqs,
       max_num_batched_tokens, output_tok_s, speedup, speedup_ci_low, speedup_ci_high, tpot_ms_p50, ttft_ms_p50,
       acceptance_length, flags, trial_id
FROM (
  SELECT r.*, ROW_NUMBER() OVER (PARTITION BY sweep, label, dataset, concurrency, request_rate
                                 ORDER BY output_tok_s DESC, trial_id) AS rank_in_group
  FROM trial_results r
  WHERE state = 'COMPLETE' AND role = 'search' AND output_tok_s IS NOT NULL
) ranked
WHERE rank_in_group = 1
""",
    # search.sampler capacity: each configuration's capacity beside the no-speculation baseline's at the same
    # dataset and engine batch settings (capacity_ratio: how much more traffic it serves within the SLO).
    "capacity_results": """
CREATE VIEW capacity_results AS
SELECT s.name AS sweep, c.method_label AS label, c.method, c.num_speculative_tokens, c.drafter, c.dataset,
       c.max_num_seqs, c.max_num_batched_tokens, c.status, c.max_rate_within_slo, c.first_failing_rate,
       b.max_rate_within_slo AS baseline_max_rate_within_slo, b.first_failing_rate AS baseline_first_failing_rate,
       c.max_rate_within_slo / NULLIF(b.max_rate_within_slo, 0) AS capacity_ratio,
       c.target_attainment, c.slo, c.probes, c.sweep_id, c.id AS capacity_id
FROM sweep_capacity c
JOIN sweeps s ON s.id = c.sweep_id
LEFT JOIN sweep_capacity b ON b.sweep_id = c.sweep_id AND b.method = 'baseline' AND b.dataset = c.dataset
  AND COALESCE(b.max_num_seqs, -1) = COALESCE(c.max_num_seqs, -1)
  AND COALESCE(b.max_num_batched_tokens, -1) = COALESCE(c.max_num_batched_tokens, -1)
""",
    # One row per request of a speculative trial's windows: its own AL, verify steps and decode step time
    # (per_request_spec_decode_metrics; the histogram of request AL per method is a GROUP BY over this).
    "request_acceptance": """
CREATE VIEW request_acceptance AS
SELECT s.name AS sweep, t.method_label AS label, t.method, t.num_speculative_tokens, t.drafter, t.dataset,
       t.concurrency, t.request_rate, t.max_num_seqs, ms.repeat, o.prompt_id, o.output_tokens, o.spec_steps,
       o.spec_draft_tokens, o.spec_accepted_tokens,
       1.0 + CAST(o.spec_accepted_tokens AS FLOAT) / NULLIF(o.spec_steps, 0) AS request_al,
       o.e2e_ms - o.ttft_ms AS decode_ms,
       (o.e2e_ms - o.ttft_ms) / NULLIF(o.output_tokens - 1 - o.spec_accepted_tokens, 0) AS decode_step_ms,
       o.spec_accept_histogram, o.spec_step_accepted, o.spec_step_drafted, t.id AS trial_id, s.id AS sweep_id
FROM sweep_request_outputs o
JOIN sweep_measurements ms ON ms.id = o.measurement_id
JOIN sweep_trials t ON t.id = ms.trial_id
JOIN sweeps s ON s.id = t.sweep_id
WHERE o.ok AND o.spec_steps IS NOT NULL
""",
    # Every nightly verdict with its night and point: how a metric moved over time.
    "nightly_history": """
CREATE VIEW nightly_history AS
SELECT n.suite, n.id AS run_id, n.started_at AS night, n.status AS run_status, v.spec_name, s.name AS sweep,
       t.method_label AS label, t.method, t.num_speculative_tokens, t.dataset, t.concurrency, t.max_num_seqs,
       v.metric, v.value, v.history_median, v.history_n, v.change, v.threshold, v.verdict, v.note, v.trial_id
FROM nightly_verdicts v
JOIN nightly_runs n ON n.id = v.run_id
JOIN sweep_trials t ON t.id = v.trial_id
JOIN sweeps s ON s.id = t.sweep_id
""",
}
