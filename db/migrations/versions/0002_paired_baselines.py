"""Issue 5: paired baselines, repeat statistics, flags, fingerprints per window, memory.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweep_trials") as b:
        b.add_column(sa.Column("role", sa.String(16), nullable=False, server_default="search"))
        b.add_column(sa.Column("baseline_trial_id", sa.Integer,
                               sa.ForeignKey("sweep_trials.id", name="fk_sweep_trials_baseline", ondelete="SET NULL")))
        b.add_column(sa.Column("flags", sa.Text))
        b.add_column(sa.Column("memory_kind", sa.String(8)))
        b.add_column(sa.Column("engine_memory_mb", sa.Float))
        b.add_column(sa.Column("kv_cache_tokens", sa.Integer))
    with op.batch_alter_table("sweep_measurements") as b:
        b.add_column(sa.Column("environment_id", sa.Integer,
                               sa.ForeignKey("sweep_environments.id", name="fk_sweep_measurements_environment")))
        b.add_column(sa.Column("client_cpu_frac", sa.Float))
        b.add_column(sa.Column("prefix_cache_hit_rate", sa.Float))
        b.add_column(sa.Column("memory_mb", sa.Float))
        b.add_column(sa.Column("started_at", sa.DateTime(timezone=True)))
    with op.batch_alter_table("sweep_trial_metrics") as b:
        b.add_column(sa.Column("output_tok_s_cv", sa.Float))
        b.add_column(sa.Column("trial_flags", sa.Text))
    op.create_table(
        "sweep_trial_comparisons",
        sa.Column("trial_id", sa.Integer, sa.ForeignKey("sweep_trials.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("baseline_trial_id", sa.Integer, sa.ForeignKey("sweep_trials.id", ondelete="CASCADE"), nullable=False),
        sa.Column("speedup", sa.Float),
        sa.Column("speedup_ci_low", sa.Float),
        sa.Column("speedup_ci_high", sa.Float),
        sa.Column("speedup_ci_method", sa.Text),
        sa.Column("confidence", sa.Float),
        sa.Column("tpot_ratio", sa.Float),
        sa.Column("ttft_ratio", sa.Float),
        sa.Column("greedy_match_rate", sa.Float),
        sa.Column("common_prefix_frac", sa.Float),
        sa.Column("outputs_compared", sa.Integer),
        sa.Column("distribution_test", sa.JSON),
        sa.Column("fingerprint_diff", sa.JSON),
        sa.Column("pairing_flags", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("sweep_trial_comparisons")
    with op.batch_alter_table("sweep_trial_metrics") as b:
        b.drop_column("trial_flags")
        b.drop_column("output_tok_s_cv")
    with op.batch_alter_table("sweep_measurements") as b:
        for c in ("started_at", "memory_mb", "prefix_cache_hit_rate", "client_cpu_frac", "environment_id"):
            b.drop_column(c)
    with op.batch_alter_table("sweep_trials") as b:
        for c in ("kv_cache_tokens", "engine_memory_mb", "memory_kind", "flags", "baseline_trial_id", "role"):
            b.drop_column(c)
