"""Issue 51: the rate an open-loop window really offered (from its send times), beside the nominal request_rate,
per window and per trial (median over windows).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("sweep_measurements", "sweep_trial_metrics"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("offered_rate", sa.Float))


def downgrade() -> None:
    for table in ("sweep_trial_metrics", "sweep_measurements"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("offered_rate")
