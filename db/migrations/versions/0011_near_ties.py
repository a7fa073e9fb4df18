"""Issue 54: the lossless check that knows numerics. The baseline's top three per output position (checked after its
first window) on its request outputs, and per comparison the departures from the baseline, those at near ties,
and the smallest margin among the others.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07
"""
import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweep_request_outputs") as batch:
        batch.add_column(sa.Column("top3", sa.JSON))
    with op.batch_alter_table("sweep_trial_comparisons") as batch:
        batch.add_column(sa.Column("departures", sa.Integer))
        batch.add_column(sa.Column("near_tie_departures", sa.Integer))
        batch.add_column(sa.Column("min_clear_margin", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("sweep_trial_comparisons") as batch:
        batch.drop_column("min_clear_margin")
        batch.drop_column("near_tie_departures")
        batch.drop_column("departures")
    with op.batch_alter_table("sweep_request_outputs") as batch:
        batch.drop_column("top3")
