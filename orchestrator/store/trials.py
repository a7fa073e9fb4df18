"""The store's trials: planned rows, their state changes, the measurements written when one completes, and
their comparisons with their paired baselines."""

from __future__ import annotations

import math
from dataclasses import asdict, fields
from typing import Any, Iterable

from sqlalchemy import func, insert, select, update

from ..records import METRIC_COLUMNS, Comparison, CompletedTrial
from ..states import TrialState
from .db import Database, new_id
from .inserts import NewTrial
from .rows import MeasurementRow, RequestOutputRow, TrialRow
from .schema import (
    sweep_measurements,
    sweep_request_outputs,
    sweep_trial_comparisons,
    sweep_trial_metrics,
    sweep_trials,
)
from .sweeps import now


def _finite(x: Any) -> Any:
    """NaN is not storable portably (SQLite turns it into NULL, PostgreSQL keeps it): store NULL; the
    `impossible_al` flag records why."""
    return None if isinstance(x, float) and math.isnan(x) else x


_COMPARISON_FIELDS = {f.name for f in fields(Comparison)}


class TrialRepository:
    db: Database

    def add_trials(self, sweep_id: int, trials: list[NewTrial]) -> list[int]:
        """Insert PENDING trials (the whole plan is visible before anything runs). Idempotent through a store
        outage: the trial numbers are fixed first, and a retry after a commit whose outcome was unknown finds
        its rows instead of adding them twice."""
        with self.db.read(f"numbering trials of sweep id {sweep_id}") as conn:
            start = int(conn.execute(select(func.coalesce(func.max(sweep_trials.c.trial_number), -1))
                                     .where(sweep_trials.c.sweep_id == sweep_id)).scalar_one()) + 1
        return self.db.retry(lambda: self._insert_trials(sweep_id, start, trials))

    def _insert_trials(self, sweep_id: int, start: int, trials: list[NewTrial]) -> list[int]:
        with self.db.write(f"planning trials of sweep id {sweep_id}") as conn:
            found = conn.execute(select(sweep_trials.c.id, sweep_trials.c.point_key).where(
                sweep_trials.c.sweep_id == sweep_id, sweep_trials.c.trial_number >= start,
                sweep_trials.c.trial_number < start + len(trials)).order_by(sweep_trials.c.trial_number)).all()
            if found and [k for _, k in found] == [t.point_key for t in trials]:
                return [int(i) for i, _ in found]  # written by an attempt whose commit was not acknowledged
            return [new_id(conn.execute(insert(sweep_trials).values(
                sweep_id=sweep_id, trial_number=start + i, state=TrialState.PENDING, created_at=now(), **asdict(t))))
                for i, t in enumerate(trials)]

    def trials(self, sweep_id: int) -> list[TrialRow]:
        with self.db.read(f"reading the trials of sweep id {sweep_id}") as conn:
            return [TrialRow.from_mapping(r) for r in conn.execute(
                select(sweep_trials).where(sweep_trials.c.sweep_id == sweep_id).order_by(sweep_trials.c.trial_number)
            ).mappings()]

    def trial(self, trial_id: int) -> TrialRow | None:
        with self.db.read(f"reading trial row {trial_id}") as conn:
            row = conn.execute(select(sweep_trials).where(sweep_trials.c.id == trial_id)).mappings().first()
            return TrialRow.from_mapping(row) if row else None

    def paired_trials(self, baseline_trial_id: int) -> list[TrialRow]:
        """Trials whose paired baseline is `baseline_trial_id`."""
        with self.db.read(f"reading the trials paired with row {baseline_trial_id}") as conn:
            return [TrialRow.from_mapping(r) for r in conn.execute(select(sweep_trials).where(
                sweep_trials.c.baseline_trial_id == baseline_trial_id)).mappings()]

    def update_trial(self, trial_id: int, **values: Any) -> None:
        with self.db.write(f"updating trial row {trial_id}") as conn:
            conn.execute(update(sweep_trials).where(sweep_trials.c.id == trial_id).values(**values))

    def mark_running(self, trial_id: int, environment_id: int | None, engine_start_s: float | None,
                     engine_pid: int | None = None, queued_s: float | None = None) -> None:
        self.update_trial(trial_id, state=TrialState.RUNNING, started_at=now(), environment_id=environment_id,
                          engine_start_s=engine_start_s, engine_pid=engine_pid, queued_s=queued_s, error=None)

    def link_baseline(self, trial_id: int, baseline_trial_id: int) -> None:
        self.update_trial(trial_id, baseline_trial_id=baseline_trial_id)

    def set_pareto_front(self, sweep_id: int, trial_ids: Iterable[int]) -> None:
        ids = list(trial_ids)
        with self.db.write(f"marking the Pareto front of sweep id {sweep_id}") as conn:
            conn.execute(update(sweep_trials).where(sweep_trials.c.sweep_id == sweep_id).values(on_pareto_front=False))
            if ids:
                conn.execute(update(sweep_trials).where(sweep_trials.c.sweep_id == sweep_id,
                                                        sweep_trials.c.id.in_(ids)).values(on_pareto_front=True))

    def fail_trials(self, trial_ids: Iterable[int], error: str) -> None:
        ids = list(trial_ids)
        if not ids:
            return
        with self.db.write(f"failing trial rows {ids}") as conn:
            conn.execute(update(sweep_trials).where(sweep_trials.c.id.in_(ids)).values(
                state=TrialState.FAIL, error=error, finished_at=now()))

    def requeue_trial(self, trial_id: int, note: str | None = None) -> None:
        """Put a trial back to PENDING for another attempt (a resumed sweep re-runs it). A trial that did not
        complete has no measurements (they are written only on completion), so nothing measured is lost.
        `note`: why the last attempt ended (kept in `error` until the trial runs again)."""
        self.requeue_trials([trial_id], note)

    def requeue_trials(self, trial_ids: Iterable[int], note: str | None = None) -> None:
        ids = list(trial_ids)
        if not ids:
            return
        with self.db.write(f"requeueing trial rows {ids}") as conn:
            conn.execute(update(sweep_trials).where(sweep_trials.c.id.in_(ids)).values(
                state=TrialState.PENDING, error=note, started_at=None, finished_at=None,
                attempt=sweep_trials.c.attempt + 1))

    def trial_states(self, sweep_id: int) -> dict[TrialState, int]:
        """How many of the sweep's trials are in each state."""
        with self.db.read(f"counting the trials of sweep id {sweep_id}") as conn:
            return {TrialState(state): int(n) for state, n in conn.execute(
                select(sweep_trials.c.state, func.count()).where(sweep_trials.c.sweep_id == sweep_id)
                .group_by(sweep_trials.c.state))}

    def complete_trial(self, trial_id: int, trial: CompletedTrial) -> None:
        """Write a trial's measurements, summary and request outputs, and mark it COMPLETE — in one
        transaction, so a crash leaves either all of it or none of it. Idempotent: a retry after a commit whose
        outcome was unknown (store/outage.py) finds the trial COMPLETE and writes nothing twice."""
        with self.db.write(f"completing trial row {trial_id}") as conn:
            state = conn.execute(select(sweep_trials.c.state).where(sweep_trials.c.id == trial_id)
                                 .with_for_update()).scalar()
            if state == TrialState.COMPLETE:
                return
            for repeat, w in enumerate(trial.windows):
                m = w.metrics
                res = conn.execute(insert(sweep_measurements).values(
                    trial_id=trial_id, repeat=repeat, window_s=m.window_s, num_requests=m.num_requests,
                    failed_requests=m.failed_requests, output_tokens=m.output_tokens,
                    num_drafts=m.num_drafts, num_draft_tokens=m.num_draft_tokens,
                    num_accepted_tokens=m.num_accepted_tokens, acceptance_per_pos=m.acceptance_per_pos,
                    environment_id=w.environment_id, client_cpu_frac=m.client_cpu_frac,
                    prefix_cache_hit_rate=m.prefix_cache_hit_rate, memory_mb=m.memory_mb, started_at=m.started_at,
                    warmup_failed_requests=m.warmup_failed_requests, discarded_window=m.discarded_window,
                    send_lag_ms_p99=m.send_lag_ms_p99, send_lag_ms_max=m.send_lag_ms_max,
                    engine_steps=m.engine_steps, position_acceptance=m.position_acceptance or None,
                    created_at=now(), **{c: _finite(m.metric(c)) for c in METRIC_COLUMNS}))
                mid = new_id(res)
                if w.outputs:
                    conn.execute(insert(sweep_request_outputs), [dict(o.row(), measurement_id=mid) for o in w.outputs])
            s = trial.summary
            conn.execute(insert(sweep_trial_metrics).values(
                trial_id=trial_id, acceptance_per_pos=s.acceptance_per_pos, repeats=s.repeats,
                failed_requests=s.failed_requests, output_tok_s_cv=s.output_tok_s_cv, trial_flags=s.trial_flags,
                al_by_position=s.al_by_position or None, tps_var_share_acceptance=_finite(s.tps_var_share_acceptance),
                tps_var_share_step_time=_finite(s.tps_var_share_step_time),
                **{c: _finite(s.metric(c)) for c in METRIC_COLUMNS}))
            conn.execute(update(sweep_trials).where(sweep_trials.c.id == trial_id).values(
                state=TrialState.COMPLETE, finished_at=now(), error=None, feasible=trial.feasible,
                warmup_s=trial.warmup_s, measure_s=trial.measure_s, flags=trial.flags, memory_kind=trial.memory_kind,
                engine_memory_mb=trial.engine_memory_mb, kv_cache_tokens=trial.kv_cache_tokens))

    def measurements(self, trial_id: int) -> list[MeasurementRow]:
        with self.db.read(f"reading the windows of trial row {trial_id}") as conn:
            return [MeasurementRow.from_mapping(r) for r in conn.execute(select(sweep_measurements).where(
                sweep_measurements.c.trial_id == trial_id).order_by(sweep_measurements.c.repeat)).mappings()]

    def request_outputs(self, trial_id: int, repeat: int | None = 0) -> list[RequestOutputRow]:
        """A trial's request outputs of one window (`repeat`), or of every window (None), each with its
        measurement's `repeat`."""
        with self.db.read(f"reading the request outputs of trial row {trial_id}") as conn:
            q = (select(sweep_request_outputs, sweep_measurements.c.repeat)
                 .join(sweep_measurements, sweep_measurements.c.id == sweep_request_outputs.c.measurement_id)
                 .where(sweep_measurements.c.trial_id == trial_id)
                 .order_by(sweep_measurements.c.repeat, sweep_request_outputs.c.prompt_id))
            if repeat is not None:
                q = q.where(sweep_measurements.c.repeat == repeat)
            return [RequestOutputRow.from_mapping(r) for r in conn.execute(q).mappings()]

    # ---- paired baselines -------------------------------------------------------------------------
    def save_comparison(self, trial_id: int, comparison: Comparison) -> None:
        """Insert or replace a trial's comparison with its baseline, and set the trial's flags to its own
        flags plus the pairing flags."""
        with self.db.write(f"storing the comparison of trial row {trial_id}") as conn:
            conn.execute(sweep_trial_comparisons.delete().where(sweep_trial_comparisons.c.trial_id == trial_id))
            conn.execute(insert(sweep_trial_comparisons).values(trial_id=trial_id, created_at=now(), **comparison.row()))
            own = conn.execute(select(sweep_trial_metrics.c.trial_flags)
                               .where(sweep_trial_metrics.c.trial_id == trial_id)).scalar()
            flags = [f for f in (own or "").split(",") + (comparison.pairing_flags or "").split(",") if f]
            conn.execute(update(sweep_trials).where(sweep_trials.c.id == trial_id).values(
                flags=",".join(dict.fromkeys(flags)) or None))

    def comparison(self, trial_id: int) -> Comparison | None:
        with self.db.read(f"reading the comparison of trial row {trial_id}") as conn:
            row = conn.execute(select(sweep_trial_comparisons).where(
                sweep_trial_comparisons.c.trial_id == trial_id)).mappings().first()
        return Comparison(**{k: v for k, v in row.items() if k in _COMPARISON_FIELDS}) if row else None
