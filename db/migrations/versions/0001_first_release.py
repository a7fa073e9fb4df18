"""The results schema as first released (issues 2-4: sweeps, trials, measurements, trial metrics, request
outputs, environments). Frozen here: later changes are later revisions.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""
from alembic import op
from sqlalchemy import (JSON, Boolean, Column, DateTime, Float, ForeignKey, Integer, MetaData, String, Table, Text,
                        UniqueConstraint)

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# The metric columns as they were at this revision.
METRIC_COLUMNS = [
    "output_tok_s", "req_s",
    "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99",
    "itl_ms_p50", "itl_ms_p99", "e2e_ms_p50", "e2e_ms_p99",
    "acceptance_length", "acceptance_rate",
]

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
    Column("concurrency", Integer, nullable=False),
    Column("dataset", String(120), nullable=False),
    Column("chat_template_kwargs", JSON),  # as applied (Qwen3: enable_thinking false unless the spec says)
    Column("max_num_seqs", Integer),
    Column("max_num_batched_tokens", Integer),
    Column("engine_config", JSON, nullable=False),
    Column("engine_config_hash", String(32), nullable=False, index=True),
    Column("model", Text, nullable=False),
    Column("model_path", Text),
    Column("drafter", Text),
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
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("started_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True)),
    UniqueConstraint("sweep_id", "trial_number", name="uq_sweep_trials_number"),
    sqlite_autoincrement=True,
)


def _metric_columns() -> list[Column]:
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
    Column("created_at", DateTime(timezone=True), nullable=False),
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
)


def upgrade() -> None:
    metadata.create_all(op.get_bind())


def downgrade() -> None:
    metadata.drop_all(op.get_bind())
