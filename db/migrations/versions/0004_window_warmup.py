"""Issue 12: each window records its failed warm-up requests and whether a whole window was discarded
before it (the actor computed both; nothing stored them, so a failed warm-up disappeared).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweep_measurements") as batch:
        batch.add_column(sa.Column("warmup_failed_requests", sa.Integer))
        batch.add_column(sa.Column("discarded_window", sa.Boolean))


def downgrade() -> None:
    with op.batch_alter_table("sweep_measurements") as batch:
        batch.drop_column("discarded_window")
        batch.drop_column("warmup_failed_requests")
