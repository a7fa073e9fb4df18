"""The states and roles a stored row can have: the only place their spellings appear in Python (the SQL views
and frozen migrations spell them too). `StrEnum`: a member equals its stored string, so SQL and JSON see text."""

from __future__ import annotations

from enum import StrEnum


class TrialState(StrEnum):
    """sweep_trials.state: PENDING (planned or requeued) -> RUNNING -> COMPLETE | FAIL."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    FAIL = "FAIL"

    @property
    def finished(self) -> bool:
        """COMPLETE or FAIL: nothing more will be measured for the row in this attempt."""
        return self in (TrialState.COMPLETE, TrialState.FAIL)


class TrialRole(StrEnum):
    """sweep_trials.role: a point the sampler asked for, or the no-speculation baseline paired with such points."""

    SEARCH = "search"
    PAIRED_BASELINE = "paired_baseline"


class SweepStatus(StrEnum):
    """sweeps.status."""

    RUNNING = "running"
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"  # stopped with trials left (e.g. search.timeout_s): run again to continue
    FAILED = "failed"
    INTERRUPTED = "interrupted"


# A PENDING paired-baseline row already handed to the engine pool: the controller's own bookkeeping
# (controller/pairing.py Baselines), never stored.
QUEUED = "QUEUED"
BaselineState = TrialState | str
