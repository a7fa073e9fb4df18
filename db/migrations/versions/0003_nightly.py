"""Issue 6: nightly regression runs (runs, their sweeps, per-metric verdicts, a lock per suite).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "nightly_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("suite", sa.String(120), nullable=False, index=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("history_nights", sa.Integer, nullable=False),
        sa.Column("regressions", sa.Integer),
        sa.Column("host", sa.String(255)),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "nightly_sweeps",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("nightly_runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("spec_name", sa.String(120), nullable=False),
    )
    op.create_table(
        "nightly_verdicts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("nightly_runs.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("trial_id", sa.Integer, sa.ForeignKey("sweep_trials.id", ondelete="CASCADE"), nullable=False),
        sa.Column("spec_name", sa.String(120), nullable=False),
        sa.Column("point_key", sa.String(512), nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("value", sa.Float),
        sa.Column("history_median", sa.Float),
        sa.Column("history_n", sa.Integer, nullable=False),
        sa.Column("change", sa.Float),
        sa.Column("threshold", sa.Float, nullable=False),
        sa.Column("verdict", sa.String(24), nullable=False),
        sa.Column("note", sa.Text),
    )
    op.create_table(
        "nightly_locks",
        sa.Column("suite", sa.String(120), primary_key=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    for t in ("nightly_locks", "nightly_verdicts", "nightly_sweeps", "nightly_runs"):
        op.drop_table(t)
