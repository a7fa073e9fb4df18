"""`specsweep nightly SUITE.yaml`: run a suite of sweeps and compare every point with the previous nights."""

from .runner import NightlyOutcome, run_nightly
from .suite import SuiteSpec, load_suite
from .verdict import verdict_for

__all__ = ["NightlyOutcome", "SuiteSpec", "load_suite", "run_nightly", "verdict_for"]
