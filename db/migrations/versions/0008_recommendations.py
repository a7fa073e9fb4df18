"""Issue 15 (part 3): `specsweep recommend` stores the draft-length schedule it derived, with its evidence.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweep_recommendations",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("method_label", sa.String(120), nullable=False),
        sa.Column("method", sa.String(64), nullable=False),
        sa.Column("dataset", sa.String(120), nullable=False),
        sa.Column("schedule", sa.Text, nullable=False),
        sa.Column("speculative_config", sa.JSON),
        sa.Column("best_fixed_k", sa.Integer),
        sa.Column("evidence", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("sweep_id", "method_label", "dataset", name="uq_sweep_recommendations"),
    )


def downgrade() -> None:
    op.drop_table("sweep_recommendations")
