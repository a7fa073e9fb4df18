"""Issue 15 (parts 1-2): where the time goes (decode and engine step time, drafter/verify/other per step, the
AL / step-cost identity against the paired baseline) and per-request acceptance (vLLM's
per_request_spec_decode_metrics: histogram, per-step arrays; request-level AL percentiles, AL by position).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

METRICS = ("decode_step_ms", "decode_tokens_per_step", "engine_step_ms", "tokens_per_engine_step", "drafter_ms_per_step", "verify_ms_per_step", "other_ms_per_step",
           "request_al_p10", "request_al_p50", "request_al_p90")


def upgrade() -> None:
    with op.batch_alter_table("sweep_measurements") as batch:
        for c in METRICS:
            batch.add_column(sa.Column(c, sa.Float))
        batch.add_column(sa.Column("engine_steps", sa.Integer))
        batch.add_column(sa.Column("position_acceptance", sa.JSON))
    with op.batch_alter_table("sweep_trial_metrics") as batch:
        for c in METRICS:
            batch.add_column(sa.Column(c, sa.Float))
        batch.add_column(sa.Column("al_by_position", sa.JSON))
        batch.add_column(sa.Column("tps_var_share_acceptance", sa.Float))
        batch.add_column(sa.Column("tps_var_share_step_time", sa.Float))
    with op.batch_alter_table("sweep_trial_comparisons") as batch:
        batch.add_column(sa.Column("step_cost_ratio", sa.Float))
        batch.add_column(sa.Column("predicted_speedup", sa.Float))
        batch.add_column(sa.Column("identity_residual", sa.Float))
    with op.batch_alter_table("sweep_request_outputs") as batch:
        batch.add_column(sa.Column("spec_steps", sa.Integer))
        batch.add_column(sa.Column("spec_draft_tokens", sa.Integer))
        batch.add_column(sa.Column("spec_accepted_tokens", sa.Integer))
        batch.add_column(sa.Column("spec_accept_histogram", sa.JSON))
        batch.add_column(sa.Column("spec_step_accepted", sa.Text))
        batch.add_column(sa.Column("spec_step_drafted", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("sweep_request_outputs") as batch:
        for c in ("spec_step_drafted", "spec_step_accepted", "spec_accept_histogram", "spec_accepted_tokens",
                  "spec_draft_tokens", "spec_steps"):
            batch.drop_column(c)
    with op.batch_alter_table("sweep_trial_comparisons") as batch:
        for c in ("identity_residual", "predicted_speedup", "step_cost_ratio"):
            batch.drop_column(c)
    with op.batch_alter_table("sweep_trial_metrics") as batch:
        for c in ("tps_var_share_step_time", "tps_var_share_acceptance", "al_by_position", *reversed(METRICS)):
            batch.drop_column(c)
    with op.batch_alter_table("sweep_measurements") as batch:
        for c in ("position_acceptance", "engine_steps", *reversed(METRICS)):
            batch.drop_column(c)
