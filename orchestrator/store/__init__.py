"""The results store (SQLAlchemy 2): tables, views and every SQL statement specsweep issues; rows as records."""

from .inserts import NewCapacity, NewRecommendation, NewTrial, NewVerdict
from .rows import EnvironmentRow, MeasurementRow, RecommendationRow, RequestOutputRow, SweepRow, TrialRow
from .store import Store
from .urls import display_url, normalize_url
from .view_rows import CapacityResult, CrossoverRow, NightlyHistoryRow, RequestAcceptanceRow, TrialResult

__all__ = ["CapacityResult", "CrossoverRow", "EnvironmentRow", "MeasurementRow", "NewCapacity", "NewRecommendation",
           "NewTrial", "NewVerdict", "NightlyHistoryRow", "RecommendationRow", "RequestAcceptanceRow",
           "RequestOutputRow", "Store", "SweepRow", "TrialResult", "TrialRow", "display_url", "normalize_url"]
