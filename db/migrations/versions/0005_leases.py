"""Issue 13: one lease mechanism for sweeps and nightly suites (owner, heartbeat on the database's clock),
replacing the nightly lock table; a metadata table (the views' definition hash).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(300), primary_key=True),
        sa.Column("owner", sa.String(300), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("acquired_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
    )
    op.create_table(
        "specsweep_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.drop_table("nightly_locks")


def downgrade() -> None:
    op.create_table(
        "nightly_locks",
        sa.Column("suite", sa.String(120), primary_key=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.drop_table("specsweep_meta")
    op.drop_table("leases")
