"""Each record the store returns declares exactly the columns of its table or view, on SQLite and PostgreSQL: a
column added, renamed or dropped in the schema fails here, not as a missing attribute in a report."""

from __future__ import annotations

from dataclasses import fields

import pytest
import sqlalchemy as sa

from orchestrator.states import TrialRole, TrialState
from orchestrator.store import (
    CapacityResult,
    CrossoverRow,
    EnvironmentRow,
    MeasurementRow,
    NewCapacity,
    NewTrial,
    NewVerdict,
    NightlyHistoryRow,
    RecommendationRow,
    RequestAcceptanceRow,
    RequestOutputRow,
    Store,
    SweepRow,
    TrialResult,
    TrialRow,
)

# record -> the SELECT whose columns it must declare
SELECTS = {
    SweepRow: "SELECT * FROM sweeps",
    TrialRow: "SELECT * FROM sweep_trials",
    MeasurementRow: "SELECT * FROM sweep_measurements",
    RequestOutputRow: "SELECT o.*, m.repeat FROM sweep_request_outputs o JOIN sweep_measurements m "
                      "ON m.id = o.measurement_id",
    EnvironmentRow: "SELECT * FROM sweep_environments",
    TrialResult: "SELECT * FROM trial_results",
    CrossoverRow: "SELECT * FROM speedup_crossover",
    CapacityResult: "SELECT * FROM capacity_results",
    RecommendationRow: "SELECT * FROM sweep_recommendations",
    NightlyHistoryRow: "SELECT * FROM nightly_history",
}
# insert records -> the table they fill, less the columns the store sets itself
INSERTS = {
    NewTrial: ("sweep_trials", {"id", "sweep_id", "trial_number", "state", "created_at", "optuna_trial_number",
                                "baseline_trial_id", "flags", "error", "environment_id", "engine_pid", "attempt",
                                "feasible", "on_pareto_front", "queued_s", "engine_start_s", "warmup_s", "measure_s",
                                "memory_kind", "engine_memory_mb", "kv_cache_tokens", "started_at", "finished_at"}),
    NewCapacity: ("sweep_capacity", {"id", "sweep_id", "created_at"}),
    NewVerdict: ("nightly_verdicts", {"id"}),
}


def _columns(st: Store, sql: str) -> list[str]:
    with st.engine.connect() as conn:
        return list(conn.execute(sa.text(sql + " LIMIT 0")).keys())


VIEWS = (TrialResult, CrossoverRow, CapacityResult, NightlyHistoryRow)


@pytest.mark.parametrize("record", list(SELECTS), ids=lambda r: r.__name__)
def test_read_records_declare_their_columns(store_url, record):
    """A view's records in the view's column order too (`specsweep results --format csv` writes a row's fields
    in order); a table's columns are in migration order, which the records need not follow."""
    st = Store(store_url)
    names, columns = [f.name for f in fields(record)], _columns(st, SELECTS[record])
    if record in VIEWS:
        assert names == columns
    else:
        assert sorted(names) == sorted(columns)


def test_request_acceptance_record_is_a_subset_of_its_view(store_url):
    st = Store(store_url)
    assert {f.name for f in fields(RequestAcceptanceRow)} <= set(_columns(st, "SELECT * FROM request_acceptance"))


@pytest.mark.parametrize("record", list(INSERTS), ids=lambda r: r.__name__)
def test_insert_records_fill_their_table(store_url, record):
    st = Store(store_url)
    table, set_by_store = INSERTS[record]
    assert {f.name for f in fields(record)} == set(_columns(st, f"SELECT * FROM {table}")) - set_by_store


def test_a_column_without_a_field_is_refused():
    with pytest.raises(TypeError, match="columns without a field: \\['surprise'\\]"):
        CrossoverRow.from_mapping({f.name: None for f in fields(CrossoverRow)} | {"surprise": 1})


def test_states_and_roles_come_back_as_enums_and_equal_their_text():
    row = {f.name: None for f in fields(TrialRow)} | {"state": TrialState.COMPLETE, "role": "paired_baseline"}
    t = TrialRow.from_mapping(row)
    assert t.state is TrialState.COMPLETE and t.role is TrialRole.PAIRED_BASELINE
    assert t.state == TrialState.COMPLETE and TrialState.COMPLETE.finished and not TrialState.RUNNING.finished
