"""Descriptions of the store's views (store/views.py) and of every column of each: what a user writing SQL over
the results reads in the docs' schema reference and, on PostgreSQL, with `\\d+` (views carry no SQLAlchemy
metadata, so their comments live here, beside the tables' `comment=` in store/schema/).

A column that passes a table column through takes that column's comment from store/schema/ (one source); computed
and renamed columns are described here from the SQL in views.py. Keys match the views' column names exactly,
in the views' column order."""

from __future__ import annotations

from sqlalchemy import Table

from ..records import METRIC_COLUMNS
from .schema import (
    nightly_runs,
    nightly_verdicts,
    sweep_capacity,
    sweep_environments,
    sweep_measurements,
    sweep_request_outputs,
    sweep_trial_comparisons,
    sweep_trial_metrics,
    sweep_trials,
)


def _doc(table: Table, column: str) -> str:
    comment = table.c[column].comment
    if not comment:
        raise ValueError(f"{table.name}.{column} has no comment in store/schema/")
    return comment


def _docs(table: Table, *columns: str) -> dict[str, str]:
    return {c: _doc(table, c) for c in columns}


_SWEEP = "The sweep's name (sweeps.name)"
_LABEL = "The method's label as the spec names it (the method name unless the entry sets method:), e.g. eagle3"

VIEW_DOCS: dict[str, str] = {
    "trial_results": "One row per trial (engine configuration x load point) of every sweep: its settings, its "
                     "medians over repeats, its comparison with the paired baseline and its engine's environment "
                     "(metrics NULL until the trial completes; comparison columns NULL for baselines)",
    "speedup_crossover": "One row per sweep, method label, K, drafter, batch settings and dataset over the "
                         "closed-loop trial_results rows with a speedup: the lowest concurrency where speculation "
                         "is slower than the baseline, and the range measured",
    "pareto": "The trial_results rows on each sweep's Pareto front (on_pareto_front, state COMPLETE): Optuna's best "
              "trials for the sweep's objectives; same columns as trial_results",
    "method_summary": "One row per sweep, method label, dataset and load point (concurrency, request_rate): the "
                      "completed search trial with the highest output_tok_s (ties: lowest trial_id), with its K, "
                      "drafter, batch settings, speedup and latencies",
    "capacity_results": "One row per capacity-search configuration (sweep_capacity) beside the no-speculation "
                        "baseline's capacity at the same dataset and batch settings in the same sweep",
    "request_acceptance": "One row per successful request of a speculative trial's windows that carries vLLM's "
                          "per-request spec-decode metrics: its own AL, verify steps and decode step time",
    "nightly_history": "One row per nightly verdict (one point and metric on one night) with its run and the "
                       "trial's method and load point: how a metric moved over the nights",
}

_TRIAL_RESULTS: dict[str, str] = {
    "sweep": _SWEEP,
    "trial": "Trial number within its sweep, from 0 in plan order (sweep_trials.trial_number)",
    "label": _LABEL,
    **_docs(sweep_trials, "method", "backend", "num_speculative_tokens", "dataset", "concurrency", "request_rate",
            "max_num_seqs", "max_num_batched_tokens", "params"),
    **_docs(sweep_trial_metrics, *METRIC_COLUMNS, "repeats", "failed_requests", "acceptance_per_pos",
            "output_tok_s_cv"),
    **_docs(sweep_trial_comparisons, "speedup", "speedup_ci_low", "speedup_ci_high", "tpot_ratio", "ttft_ratio",
            "step_cost_ratio", "predicted_speedup", "identity_residual"),
    **_docs(sweep_trial_metrics, "al_by_position", "tps_var_share_acceptance", "tps_var_share_step_time"),
    **_docs(sweep_trial_comparisons, "greedy_match_rate", "common_prefix_frac", "departures", "near_tie_departures",
            "min_clear_margin"),
    **_docs(sweep_trials, "flags", "role", "baseline_trial_id", "state", "error", "feasible", "on_pareto_front",
            "optuna_trial_number", "model", "drafter", "engine_config_hash"),
    **_docs(sweep_environments, "hostname", "cpu_model", "gpu_model", "vllm_version", "cpu_isa", "dtype"),
    **_docs(sweep_trials, "queued_s", "engine_start_s", "warmup_s", "measure_s", "memory_kind", "engine_memory_mb",
            "kv_cache_tokens"),
    **_docs(sweep_trial_comparisons, "speedup_ci_method", "fingerprint_diff"),
    **_docs(sweep_trials, "started_at", "finished_at", "point_key", "environment_id"),
    "trial_id": "Trial id (sweep_trials.id): joins sweep_measurements, sweep_trial_metrics and the other per-trial "
                "tables",
    "sweep_id": "Sweep id (sweeps.id)",
}

VIEW_COLUMN_DOCS: dict[str, dict[str, str]] = {
    "trial_results": _TRIAL_RESULTS,
    "speedup_crossover": {
        "sweep": _SWEEP,
        "label": _LABEL,
        **_docs(sweep_trials, "method", "num_speculative_tokens", "drafter", "max_num_seqs", "max_num_batched_tokens",
                "dataset"),
        "crossover_concurrency": "Lowest measured concurrency whose speedup is below 1.0 (speculation slower than "
                                 "the paired baseline); NULL: at least as fast at every measured concurrency",
        "min_concurrency": "Lowest concurrency measured with a speedup in this group",
        "max_concurrency": "Highest concurrency measured with a speedup in this group",
        "best_speedup": "Highest speedup (median output_tok_s / the paired baseline's) over the group's measured "
                        "concurrencies",
    },
    "pareto": dict(_TRIAL_RESULTS),
    "method_summary": {
        "sweep": _SWEEP,
        "label": _LABEL,
        **_docs(sweep_trials, "method", "dataset", "concurrency", "request_rate", "num_speculative_tokens", "drafter",
                "max_num_seqs", "max_num_batched_tokens"),
        **_docs(sweep_trial_metrics, "output_tok_s"),
        **_docs(sweep_trial_comparisons, "speedup", "speedup_ci_low", "speedup_ci_high"),
        **_docs(sweep_trial_metrics, "tpot_ms_p50", "ttft_ms_p50", "acceptance_length"),
        "flags": _doc(sweep_trials, "flags"),
        "trial_id": "The chosen trial, the group's fastest by output_tok_s (sweep_trials.id)",
    },
    "capacity_results": {
        "sweep": _SWEEP,
        "label": _LABEL,
        **_docs(sweep_capacity, "method", "num_speculative_tokens", "drafter", "dataset", "max_num_seqs",
                "max_num_batched_tokens", "status", "max_rate_within_slo", "first_failing_rate"),
        "baseline_max_rate_within_slo": "max_rate_within_slo of the sweep's baseline configuration at the same "
                                        "dataset, max_num_seqs and max_num_batched_tokens, requests/s; NULL: no "
                                        "such baseline, or it passed no rate",
        "baseline_first_failing_rate": "first_failing_rate of that baseline configuration, requests/s; NULL: no "
                                       "such baseline, or none of its rates failed",
        "capacity_ratio": "max_rate_within_slo / baseline_max_rate_within_slo: how much more traffic the "
                          "configuration serves within the SLO than no speculation (> 1: more; 1 on the baseline's "
                          "own row); NULL: a rate missing or the baseline's 0",
        **_docs(sweep_capacity, "target_attainment", "slo", "probes", "sweep_id"),
        "capacity_id": "Id of the capacity result (sweep_capacity.id)",
    },
    "request_acceptance": {
        "sweep": _SWEEP,
        "label": _LABEL,
        **_docs(sweep_trials, "method", "num_speculative_tokens", "drafter", "dataset", "concurrency", "request_rate",
                "max_num_seqs"),
        "repeat": _doc(sweep_measurements, "repeat"),
        **_docs(sweep_request_outputs, "prompt_id", "output_tokens", "spec_steps", "spec_draft_tokens",
                "spec_accepted_tokens"),
        "request_al": "This request's own acceptance length: 1 + spec_accepted_tokens / spec_steps (bonus token "
                      "counted); NULL: no verify step had drafts (spec_steps 0)",
        "decode_ms": "e2e_ms - ttft_ms: the request's time after its first token, ms",
        "decode_step_ms": "decode_ms / the request's decode steps (output_tokens - 1 - spec_accepted_tokens): time "
                          "between two of its engine steps, ms; NULL: no decode step",
        **_docs(sweep_request_outputs, "spec_accept_histogram", "spec_step_accepted", "spec_step_drafted"),
        "trial_id": "The trial the request belongs to (sweep_trials.id)",
        "sweep_id": "Sweep id (sweeps.id)",
    },
    "nightly_history": {
        "suite": _doc(nightly_runs, "suite"),
        "run_id": "The nightly run (nightly_runs.id)",
        "night": "When the nightly run started (UTC): the night the verdict belongs to (nightly_runs.started_at)",
        "run_status": "The run's status (nightly_runs.status): running | ok | regression | failed",
        "spec_name": _doc(nightly_verdicts, "spec_name"),
        "sweep": "The sweep tonight's trial belongs to (sweeps.name)",
        "label": _LABEL,
        **_docs(sweep_trials, "method", "num_speculative_tokens", "dataset", "concurrency", "max_num_seqs"),
        **_docs(nightly_verdicts, "metric", "value", "history_median", "history_n", "change", "threshold", "verdict",
                "note", "trial_id"),
    },
}
