"""Tables and views of the results store. Names never collide with Optuna's (studies, trials, trial_*,
version_info, alembic_version), which share the same database. Documented in README.md ("Schema")."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from ..records import METRIC_COLUMNS

metadata = MetaData()

sweeps = Table(
    "sweeps", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(120), nullable=False, unique=True),
    Column("spec_hash", String(64), nullable=False),
    Column("spec", JSON, nullable=False),  # the validated spec, as JSON
    Column("spec_path", Text),
    Column("status", String(16), nullable=False),  # running | complete | failed | interrupted
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    sqlite_autoincrement=True,
)

sweep_environments = Table(
    "sweep_environments", metadata,
    Column("id", Integer, primary_key=True),
    Column("fingerprint_hash", String(64), nullable=False, unique=True),
    Column("hostname", String(255)),
    Column("cpu_model", String(255)),
    Column("cpu_count", Integer),
    Column("cpu_isa", String(255)),  # dtype-relevant CPU flags (avx2 avx512f avx512_bf16 ...; migration 0006)
    Column("dtype", String(32)),  # what the engine ran (`auto` resolved on the engine's machine)
    Column("gpu_model", String(255)),
    Column("gpu_count", Integer),
    Column("gpu_driver", String(64)),
    Column("cuda_version", String(64)),
    Column("python_version", String(32)),
    Column("vllm_version", String(64)),
    Column("torch_version", String(64)),
    Column("transformers_version", String(64)),
    Column("ray_version", String(64)),
    Column("optuna_version", String(64)),
    Column("specsweep_version", String(64)),
    Column("platform", String(255)),
    Column("details", JSON),  # everything else collected (engine facts, paths, env vars of interest)
    Column("created_at", DateTime(timezone=True), nullable=False),
)

sweep_trials = Table(
    "sweep_trials", metadata,
    Column("id", Integer, primary_key=True),
    Column("sweep_id", Integer, ForeignKey("sweeps.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("trial_number", Integer, nullable=False),
    Column("method_label", String(120), nullable=False),
    Column("method", String(64), nullable=False),
    Column("backend", String(16), nullable=False),
    Column("num_speculative_tokens", Integer),
    Column("method_params", JSON, nullable=False),
    Column("params", JSON, nullable=False),  # the trial's Optuna parameters
    Column("point_key", String(512), nullable=False),  # canonical JSON of params: identity of the point
    Column("optuna_trial_number", Integer),
    Column("concurrency", Integer, nullable=False),  # closed loop: in flight; open loop: the most in flight
    Column("request_rate", Float),  # open loop: requests/s (Infinity: all at once); null: closed loop (0007)
    Column("dataset", String(120), nullable=False),
    Column("chat_template_kwargs", JSON),  # as applied (Qwen3: enable_thinking false unless the spec says)
    Column("max_num_seqs", Integer),
    Column("max_num_batched_tokens", Integer),
    Column("engine_config", JSON, nullable=False),
    Column("engine_config_hash", String(32), nullable=False, index=True),
    Column("model", Text, nullable=False),
    Column("model_path", Text),
    Column("drafter", Text),
    Column("role", String(16), nullable=False, server_default="search"),  # search | paired_baseline
    Column("baseline_trial_id", Integer, ForeignKey("sweep_trials.id", name="fk_sweep_trials_baseline",
                                                    ondelete="SET NULL")),  # its paired baseline
    Column("flags", Text),  # comma-separated sanity flags (validity/flags.py), trial and pairing flags together
    Column("state", String(16), nullable=False),  # PENDING | RUNNING | COMPLETE | FAIL
    Column("error", Text),
    Column("environment_id", Integer, ForeignKey("sweep_environments.id")),
    Column("engine_pid", Integer),
    Column("attempt", Integer, nullable=False, default=1),
    Column("feasible", Boolean),  # SLO constraints met (null: not measured)
    Column("on_pareto_front", Boolean, nullable=False, default=False),  # in Optuna's study.best_trials
    Column("queued_s", Float),  # ask -> dispatched to a ready engine (includes waiting for its start)
    Column("engine_start_s", Float),  # start time of the engine that served the trial
    Column("warmup_s", Float),
    Column("measure_s", Float),
    Column("memory_kind", String(8)),  # gpu (memory in use on the GPU) | rss (peak resident set, CPU engines)
    Column("engine_memory_mb", Float),  # peak over the trial's windows, engine process and its children
    Column("kv_cache_tokens", Integer),  # KV-cache capacity of the engine that served the trial
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("started_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True)),
    UniqueConstraint("sweep_id", "trial_number", name="uq_sweep_trials_number"),
    sqlite_autoincrement=True,
)


def _metric_columns() -> list[Column[float]]:
    return [Column(c, Float) for c in METRIC_COLUMNS]


sweep_measurements = Table(
    "sweep_measurements", metadata,
    Column("id", Integer, primary_key=True),
    Column("trial_id", Integer, ForeignKey("sweep_trials.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("repeat", Integer, nullable=False),
    Column("window_s", Float, nullable=False),
    Column("num_requests", Integer, nullable=False),
    Column("failed_requests", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    *_metric_columns(),
    Column("num_drafts", Integer),
    Column("num_draft_tokens", Integer),
    Column("num_accepted_tokens", Integer),
    Column("acceptance_per_pos", JSON),
    Column("environment_id", Integer, ForeignKey("sweep_environments.id", name="fk_sweep_measurements_environment")),
    Column("client_cpu_frac", Float),  # load generator process CPU time / window time
    Column("prefix_cache_hit_rate", Float),  # prefix-cache hits / queries in the window (null: no queries)
    Column("memory_mb", Float),  # engine memory after the window (see sweep_trials.memory_kind)
    Column("started_at", DateTime(timezone=True)),  # window start (rotated order: repeat r of all before r+1)
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("warmup_failed_requests", Integer),  # discarded warm-up requests before this window that failed
    Column("discarded_window", Boolean),  # a whole window was run and discarded first (engine just started)
    Column("send_lag_ms_p99", Float),  # open loop: how late requests were sent against their schedule (0007)
    Column("send_lag_ms_max", Float),
    Column("engine_steps", Integer),  # model-runner steps in the window (engines/step_timing.py; 0009)
    Column("position_acceptance", JSON),  # [[verify steps, accepted drafts]] per 16 output positions (0009)
    UniqueConstraint("trial_id", "repeat", name="uq_sweep_measurements_repeat"),
)

# Median over the trial's repeats; one row per completed trial.
sweep_trial_metrics = Table(
    "sweep_trial_metrics", metadata,
    Column("trial_id", Integer, ForeignKey("sweep_trials.id", ondelete="CASCADE"), primary_key=True),
    *_metric_columns(),
    Column("acceptance_per_pos", JSON),
    Column("repeats", Integer, nullable=False),
    Column("failed_requests", Integer, nullable=False),
    Column("output_tok_s_cv", Float),  # coefficient of variation of output_tok_s over repeats
    Column("trial_flags", Text),  # flags from the trial's own windows
    Column("al_by_position", JSON),  # AL per 16 output positions, pooled over requests and windows (0009)
    Column("tps_var_share_acceptance", Float),  # share of tok/s variance between repeats explained by AL (0009)
    Column("tps_var_share_step_time", Float),  # ... and by decode step time
)

# A speculative trial against its paired baseline; one row per compared trial.
sweep_trial_comparisons = Table(
    "sweep_trial_comparisons", metadata,
    Column("trial_id", Integer, ForeignKey("sweep_trials.id", ondelete="CASCADE"), primary_key=True),
    Column("baseline_trial_id", Integer, ForeignKey("sweep_trials.id", ondelete="CASCADE"), nullable=False),
    Column("speedup", Float),  # median output_tok_s / baseline median output_tok_s (null on a fingerprint mismatch)
    Column("speedup_ci_low", Float),
    Column("speedup_ci_high", Float),
    Column("speedup_ci_method", Text),
    Column("confidence", Float),
    Column("tpot_ratio", Float),  # median TPOT p50 / baseline's (< 1: faster per token)
    Column("ttft_ratio", Float),  # median TTFT p50 / baseline's
    Column("step_cost_ratio", Float),  # decode_step_ms / baseline's (0009)
    Column("predicted_speedup", Float),  # decode_tokens_per_step / step_cost_ratio (0009)
    Column("identity_residual", Float),  # speedup / predicted_speedup - 1 (0009)
    Column("greedy_match_rate", Float),  # temperature 0: share of (repeat, prompt) outputs identical to the baseline
    Column("common_prefix_frac", Float),  # mean common-prefix length / longer output
    Column("outputs_compared", Integer),
    Column("distribution_test", JSON),  # temperature > 0: first-token chi-square test
    Column("fingerprint_diff", JSON),  # compared fingerprint fields that differ (empty: comparable)
    Column("pairing_flags", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

sweep_request_outputs = Table(
    "sweep_request_outputs", metadata,
    Column("id", Integer, primary_key=True),
    Column("measurement_id", Integer, ForeignKey("sweep_measurements.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("prompt_id", String(255), nullable=False),
    Column("ok", Boolean, nullable=False),
    Column("error", Text),
    Column("finish_reason", String(32)),
    Column("output_tokens", Integer, nullable=False),
    Column("prompt_tokens", Integer),  # as the engine tokenised the prompt (chat template applied)
    Column("ttft_ms", Float),
    Column("e2e_ms", Float),
    Column("output_text", Text),
    Column("output_token_ids", JSON),
    # per-request speculative decoding, from vLLM's per_request_spec_decode_metrics=detailed (0009; null: baseline)
    Column("spec_steps", Integer),  # verify steps that had drafts
    Column("spec_draft_tokens", Integer),
    Column("spec_accepted_tokens", Integer),
    Column("spec_accept_histogram", JSON),  # [j] = verify steps that accepted j drafts
    Column("spec_step_accepted", Text),  # per verify step, run-length encoded: "3*40,2,0*3"
    Column("spec_step_drafted", Text),
)

# search.sampler capacity: one row per configuration (method point x engine settings x dataset) and sweep (0007)
sweep_capacity = Table(
    "sweep_capacity", metadata,
    Column("id", Integer, primary_key=True),
    Column("sweep_id", Integer, ForeignKey("sweeps.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("config_key", String(512), nullable=False),  # canonical JSON of the configuration's parameters
    Column("method_label", String(120), nullable=False),
    Column("method", String(64)),
    Column("num_speculative_tokens", Integer),
    Column("drafter", Text),
    Column("dataset", String(120), nullable=False),
    Column("max_num_seqs", Integer),
    Column("max_num_batched_tokens", Integer),
    Column("engine_config_hash", String(32)),
    Column("target_attainment", Float, nullable=False),
    Column("slo", JSON, nullable=False),  # the per-request thresholds (measurement.slo)
    Column("status", String(16), nullable=False),  # bracketed | above_max | below_min | probe_limit | failed
    Column("max_rate_within_slo", Float),  # highest probed rate that met the target (null: none did)
    Column("first_failing_rate", Float),  # lowest probed rate that missed it (null: none did)
    Column("probes", JSON, nullable=False),  # [{rate, attainment, trial_id}] in probe order
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("sweep_id", "config_key", name="uq_sweep_capacity_config"),
)

# specsweep recommend: a draft-length schedule per (sweep, method label, dataset), with its evidence (0008)
sweep_recommendations = Table(
    "sweep_recommendations", metadata,
    Column("id", Integer, primary_key=True),
    Column("sweep_id", Integer, ForeignKey("sweeps.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("method_label", String(120), nullable=False),
    Column("method", String(64), nullable=False),
    Column("dataset", String(120), nullable=False),
    Column("schedule", Text, nullable=False),  # '1-3:3, 4-7:1, 8-16:0' (batch ranges inclusive : K)
    Column("speculative_config", JSON),  # ready for vLLM's --speculative-config (null: do not speculate)
    Column("best_fixed_k", Integer),
    Column("evidence", JSON, nullable=False),  # per concurrency: the K options with speedup and interval, the choice
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("sweep_id", "method_label", "dataset", name="uq_sweep_recommendations"),
)

# ---- nightly regression runs (specsweep nightly) --------------------------------------------------------
nightly_runs = Table(
    "nightly_runs", metadata,
    Column("id", Integer, primary_key=True),
    Column("suite", String(120), nullable=False, index=True),
    Column("status", String(16), nullable=False),  # running | ok | regression | failed
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    Column("history_nights", Integer, nullable=False),
    Column("regressions", Integer),
    Column("host", String(255)),
    sqlite_autoincrement=True,
)

nightly_sweeps = Table(
    "nightly_sweeps", metadata,
    Column("run_id", Integer, ForeignKey("nightly_runs.id", ondelete="CASCADE"), primary_key=True),
    Column("sweep_id", Integer, ForeignKey("sweeps.id", ondelete="CASCADE"), primary_key=True),
    Column("spec_name", String(120), nullable=False),  # the spec's name: the key across nights
)

nightly_verdicts = Table(
    "nightly_verdicts", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("nightly_runs.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("trial_id", Integer, ForeignKey("sweep_trials.id", ondelete="CASCADE"), nullable=False),
    Column("spec_name", String(120), nullable=False),
    Column("point_key", String(512), nullable=False),
    Column("metric", String(64), nullable=False),
    Column("value", Float),
    Column("history_median", Float),
    Column("history_n", Integer, nullable=False),
    Column("change", Float),  # value / history_median - 1
    Column("threshold", Float, nullable=False),
    Column("verdict", String(24), nullable=False),  # regression | suspicious | ok | insufficient data
    Column("note", Text),
)

# One row per (suite, held lock): two nightly runs of one suite never overlap.
# One live owner per resource: `sweep:<name>` (a controller running that sweep) or `nightly:<suite>`. Times are
# the database's clock in epoch seconds, so owners on machines with skewed clocks still agree on staleness.
leases = Table(
    "leases", metadata,
    Column("name", String(300), primary_key=True),
    Column("owner", String(300), nullable=False),  # host:pid:random, unique per process and lease
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("acquired_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),  # renewed while the owner runs
)

# Small facts about the store itself (the hash of the views' definitions, so they are recreated only on change).
store_meta = Table(
    "specsweep_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
