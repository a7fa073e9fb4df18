"""Issue 18: every row says which dtype its engine ran (after `dtype: auto` was resolved on that machine)
and which dtype-relevant ISA flags its CPU has (two CPUs of one model name can differ in AVX512-BF16).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sweep_environments") as batch:
        batch.add_column(sa.Column("cpu_isa", sa.String(255)))
        batch.add_column(sa.Column("dtype", sa.String(32)))


def downgrade() -> None:
    with op.batch_alter_table("sweep_environments") as batch:
        batch.drop_column("dtype")
        batch.drop_column("cpu_isa")
