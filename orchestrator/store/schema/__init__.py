"""Tables of the results store, one module per concern, all on one MetaData (`base.metadata`). Names never
collide with Optuna's (studies, trials, trial_*, version_info, alembic_version), which share the same database.
Every table and column carries its description as `comment=` (on PostgreSQL also the schema's comments; the
docs' reference is generated from them); the views are in store/views.py, their descriptions in
store/view_docs.py."""

from .base import metadata
from .metrics import METRIC_COMMENTS, TRIAL_METRIC_PREFIX
from .more import (
    leases,
    nightly_runs,
    nightly_sweeps,
    nightly_verdicts,
    store_meta,
    sweep_capacity,
    sweep_recommendations,
)
from .results import sweep_measurements, sweep_request_outputs, sweep_trial_comparisons, sweep_trial_metrics
from .sweeps import sweep_environments, sweep_trials, sweeps

__all__ = [
    "metadata", "METRIC_COMMENTS", "TRIAL_METRIC_PREFIX", "leases", "nightly_runs", "nightly_sweeps",
    "nightly_verdicts", "store_meta", "sweep_capacity", "sweep_recommendations", "sweep_measurements",
    "sweep_request_outputs", "sweep_trial_comparisons", "sweep_trial_metrics", "sweep_environments",
    "sweep_trials", "sweeps",
]
