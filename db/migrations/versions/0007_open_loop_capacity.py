"""Issue 16: open-loop load points (a trial's request rate), per-request SLO metrics (goodput, attainment), how
late an open-loop window's requests were sent, and the capacity search's results.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweep_trials") as batch:
        batch.add_column(sa.Column("request_rate", sa.Float))
    with op.batch_alter_table("sweep_measurements") as batch:
        batch.add_column(sa.Column("goodput_req_s", sa.Float))
        batch.add_column(sa.Column("slo_attainment", sa.Float))
        batch.add_column(sa.Column("send_lag_ms_p99", sa.Float))
        batch.add_column(sa.Column("send_lag_ms_max", sa.Float))
    with op.batch_alter_table("sweep_trial_metrics") as batch:
        batch.add_column(sa.Column("goodput_req_s", sa.Float))
        batch.add_column(sa.Column("slo_attainment", sa.Float))
    op.create_table(
        "sweep_capacity",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("config_key", sa.String(512), nullable=False),
        sa.Column("method_label", sa.String(120), nullable=False),
        sa.Column("method", sa.String(64)),
        sa.Column("num_speculative_tokens", sa.Integer),
        sa.Column("drafter", sa.Text),
        sa.Column("dataset", sa.String(120), nullable=False),
        sa.Column("max_num_seqs", sa.Integer),
        sa.Column("max_num_batched_tokens", sa.Integer),
        sa.Column("engine_config_hash", sa.String(32)),
        sa.Column("target_attainment", sa.Float, nullable=False),
        sa.Column("slo", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("max_rate_within_slo", sa.Float),
        sa.Column("first_failing_rate", sa.Float),
        sa.Column("probes", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("sweep_id", "config_key", name="uq_sweep_capacity_config"),
    )


def downgrade() -> None:
    op.drop_table("sweep_capacity")
    with op.batch_alter_table("sweep_trial_metrics") as batch:
        batch.drop_column("slo_attainment")
        batch.drop_column("goodput_req_s")
    with op.batch_alter_table("sweep_measurements") as batch:
        batch.drop_column("send_lag_ms_max")
        batch.drop_column("send_lag_ms_p99")
        batch.drop_column("slo_attainment")
        batch.drop_column("goodput_req_s")
    with op.batch_alter_table("sweep_trials") as batch:
        batch.drop_column("request_rate")
