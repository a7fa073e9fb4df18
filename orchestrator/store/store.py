"""The results store: owns every SQL statement specsweep issues. SQLite by default, PostgreSQL for clusters."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Iterable

from sqlalchemy import create_engine, delete, event, func, insert, select, text, update
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError

from ..errors import StoreError
from ..records import METRIC_COLUMNS, Comparison, CompletedTrial
from . import leases
from .leases import LeaseHolder, LeaseResult
from .urls import display_url, normalize_url
from .schema import (nightly_runs, sweep_capacity, sweep_recommendations, nightly_sweeps, nightly_verdicts, sweep_environments, sweep_measurements, sweep_request_outputs,
                     sweep_trial_comparisons, sweep_trial_metrics, sweep_trials, sweeps)


def _finite(x: Any) -> Any:
    """NaN is not storable portably (SQLite turns it into NULL, PostgreSQL keeps it): store NULL; the
    `impossible_al` flag records why."""
    return None if isinstance(x, float) and math.isnan(x) else x


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class Store:
    def __init__(self, url: str):
        self.url = normalize_url(url)
        try:
            u = make_url(self.url)
        except (ArgumentError, ValueError):  # the parser's message quotes the URL: never shown
            raise StoreError(f"invalid store URL {display_url(url)!r}: expected sqlite:///PATH, "
                             f"postgresql://USER@HOST:PORT/DATABASE or a file path") from None
        if u.get_backend_name() == "sqlite" and u.database not in (None, "", ":memory:"):
            Path(u.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine: Engine = create_engine(self.url, future=True, pool_pre_ping=True)
        except Exception as e:
            raise StoreError(f"cannot open store {display_url(url)}: {type(e).__name__}") from None
        if self.engine.dialect.name == "sqlite":
            @event.listens_for(self.engine, "connect")
            def _sqlite_pragmas(dbapi_conn, _):
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA foreign_keys=ON")
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()
        self.create_schema()

    @property
    def display_url(self) -> str:
        return display_url(self.url)

    def create_schema(self) -> None:
        """Create or upgrade the schema to the newest migration (store/migrate.py), and create Optuna's tables,
        under one lock: processes opening one new database at once never race on DDL (store/migrate.py)."""
        from .migrate import initialise

        try:
            self.schema_revisions = initialise(self.engine)
        except OperationalError as e:
            raise StoreError(f"cannot reach store {self.display_url}: {e.orig}") from None
        except SQLAlchemyError as e:
            raise StoreError(f"cannot create or upgrade the schema in {self.display_url}: {e}") from None

    def dispose(self) -> None:
        self.engine.dispose()

    # ---- sweeps -----------------------------------------------------------------------------------
    def get_sweep(self, name: str) -> dict | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(sweeps).where(sweeps.c.name == name)).mappings().first()
            return dict(row) if row else None

    def create_sweep(self, name: str, spec_hash: str, spec: dict, spec_path: str) -> int:
        with self.engine.begin() as conn:
            res = conn.execute(insert(sweeps).values(
                name=name, spec_hash=spec_hash, spec=spec, spec_path=spec_path, status="running", created_at=now()))
            return int(res.inserted_primary_key[0])

    def set_sweep_status(self, sweep_id: int, status: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(sweeps).where(sweeps.c.id == sweep_id).values(
                status=status, finished_at=None if status == "running" else now()))

    def list_sweeps(self) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(select(sweeps.c.id, sweeps.c.name, sweeps.c.status,
                                                         sweeps.c.created_at).order_by(sweeps.c.id)).mappings()]

    # ---- trials -----------------------------------------------------------------------------------
    def add_trials(self, sweep_id: int, trials: list[dict]) -> list[int]:
        """Insert PENDING trials (the whole plan is visible before anything runs)."""
        ids = []
        with self.engine.begin() as conn:
            start = conn.execute(select(func.coalesce(func.max(sweep_trials.c.trial_number), -1))
                                 .where(sweep_trials.c.sweep_id == sweep_id)).scalar_one() + 1
            for i, t in enumerate(trials):
                res = conn.execute(insert(sweep_trials).values(
                    sweep_id=sweep_id, trial_number=start + i, state="PENDING", created_at=now(), **t))
                ids.append(int(res.inserted_primary_key[0]))
        return ids

    def trials(self, sweep_id: int) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(
                select(sweep_trials).where(sweep_trials.c.sweep_id == sweep_id).order_by(sweep_trials.c.trial_number)
            ).mappings()]

    def update_trial(self, trial_id: int, **values: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(sweep_trials).where(sweep_trials.c.id == trial_id).values(**values))

    def mark_running(self, trial_id: int, environment_id: int | None, engine_start_s: float | None,
                     engine_pid: int | None = None, queued_s: float | None = None) -> None:
        self.update_trial(trial_id, state="RUNNING", started_at=now(), environment_id=environment_id,
                          engine_start_s=engine_start_s, engine_pid=engine_pid, queued_s=queued_s, error=None)

    def set_pareto_front(self, sweep_id: int, trial_ids: Iterable[int]) -> None:
        ids = list(trial_ids)
        with self.engine.begin() as conn:
            conn.execute(update(sweep_trials).where(sweep_trials.c.sweep_id == sweep_id).values(on_pareto_front=False))
            if ids:
                conn.execute(update(sweep_trials).where(sweep_trials.c.sweep_id == sweep_id,
                                                        sweep_trials.c.id.in_(ids)).values(on_pareto_front=True))

    def fail_trials(self, trial_ids: Iterable[int], error: str) -> None:
        ids = list(trial_ids)
        if not ids:
            return
        with self.engine.begin() as conn:
            conn.execute(update(sweep_trials).where(sweep_trials.c.id.in_(ids)).values(
                state="FAIL", error=error, finished_at=now()))

    def requeue_trial(self, trial_id: int, note: str | None = None) -> None:
        """Put a trial back to PENDING for another attempt (a resumed sweep re-runs it). A trial that did not
        complete has no measurements (they are written only on completion), so nothing measured is lost.
        `note`: why the last attempt ended (kept in `error` until the trial runs again)."""
        self.requeue_trials([trial_id], note)

    def requeue_trials(self, trial_ids: Iterable[int], note: str | None = None) -> None:
        ids = list(trial_ids)
        if not ids:
            return
        with self.engine.begin() as conn:
            conn.execute(update(sweep_trials).where(sweep_trials.c.id.in_(ids)).values(
                state="PENDING", error=note, started_at=None, finished_at=None,
                attempt=sweep_trials.c.attempt + 1))

    def trial_states(self, sweep_id: int) -> dict[str, int]:
        """How many of the sweep's trials are in each state (PENDING, RUNNING, COMPLETE, FAIL)."""
        with self.engine.connect() as conn:
            return {state: int(n) for state, n in conn.execute(
                select(sweep_trials.c.state, func.count()).where(sweep_trials.c.sweep_id == sweep_id)
                .group_by(sweep_trials.c.state))}

    def complete_trial(self, trial_id: int, trial: CompletedTrial) -> None:
        """Write a trial's measurements, summary and request outputs, and mark it COMPLETE — in one
        transaction, so a crash leaves either all of it or none of it."""
        with self.engine.begin() as conn:
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
                mid = int(res.inserted_primary_key[0])
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
                state="COMPLETE", finished_at=now(), error=None, feasible=trial.feasible, warmup_s=trial.warmup_s,
                measure_s=trial.measure_s, flags=trial.flags, memory_kind=trial.memory_kind,
                engine_memory_mb=trial.engine_memory_mb, kv_cache_tokens=trial.kv_cache_tokens))

    # ---- capacity search --------------------------------------------------------------------------
    def save_capacity(self, sweep_id: int, row: dict[str, Any]) -> None:
        """Insert or replace one configuration's capacity (controller/capacity.py capacity_row)."""
        with self.engine.begin() as conn:
            conn.execute(delete(sweep_capacity).where(sweep_capacity.c.sweep_id == sweep_id,
                                                      sweep_capacity.c.config_key == row["config_key"]))
            conn.execute(insert(sweep_capacity).values(sweep_id=sweep_id, created_at=now(), **row))

    def capacity_results(self, sweep_name: str) -> list[dict]:
        """The capacity_results view of one sweep (empty unless it ran search.sampler capacity)."""
        with self.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(text(
                "SELECT * FROM capacity_results WHERE sweep = :s ORDER BY dataset, method <> 'baseline', label, "
                "num_speculative_tokens, capacity_id"), {"s": sweep_name}).mappings()]
        for r in rows:  # JSON through a view comes back as text on SQLite
            for key in ("slo", "probes"):
                if isinstance(r[key], str):
                    r[key] = json.loads(r[key])
        return rows

    # ---- recommendations (specsweep recommend) ----------------------------------------------------
    def save_recommendation(self, sweep_id: int, row: dict[str, Any]) -> None:
        """Insert or replace the recommendation of one (method label, dataset) of a sweep."""
        with self.engine.begin() as conn:
            conn.execute(delete(sweep_recommendations).where(
                sweep_recommendations.c.sweep_id == sweep_id, sweep_recommendations.c.method_label == row["label"],
                sweep_recommendations.c.dataset == row["dataset"]))
            conn.execute(insert(sweep_recommendations).values(
                sweep_id=sweep_id, method_label=row["label"], method=row["method"], dataset=row["dataset"],
                schedule=row["schedule"], speculative_config=row["speculative_config"],
                best_fixed_k=row["best_fixed_k"], evidence=row["evidence"], created_at=now()))

    def recommendations(self, sweep_id: int) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(select(sweep_recommendations).where(
                sweep_recommendations.c.sweep_id == sweep_id).order_by(
                sweep_recommendations.c.method_label, sweep_recommendations.c.dataset)).mappings()]

    # ---- paired baselines -------------------------------------------------------------------------
    def link_baseline(self, trial_id: int, baseline_trial_id: int) -> None:
        self.update_trial(trial_id, baseline_trial_id=baseline_trial_id)

    def save_comparison(self, trial_id: int, comparison: Comparison) -> None:
        """Insert or replace a trial's comparison with its baseline, and set the trial's flags to its own
        flags plus the pairing flags."""
        with self.engine.begin() as conn:
            conn.execute(sweep_trial_comparisons.delete().where(sweep_trial_comparisons.c.trial_id == trial_id))
            conn.execute(insert(sweep_trial_comparisons).values(trial_id=trial_id, created_at=now(), **comparison.row()))
            own = conn.execute(select(sweep_trial_metrics.c.trial_flags)
                               .where(sweep_trial_metrics.c.trial_id == trial_id)).scalar()
            flags = [f for f in (own or "").split(",") + (comparison.pairing_flags or "").split(",") if f]
            conn.execute(update(sweep_trials).where(sweep_trials.c.id == trial_id).values(
                flags=",".join(dict.fromkeys(flags)) or None))

    def comparison(self, trial_id: int) -> dict | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(sweep_trial_comparisons).where(
                sweep_trial_comparisons.c.trial_id == trial_id)).mappings().first()
            return dict(row) if row else None

    def environment(self, environment_id: int | None) -> dict[str, Any]:
        """A stored fingerprint as one dict (columns and details merged); {} for None."""
        if environment_id is None:
            return {}
        with self.engine.connect() as conn:
            row = conn.execute(select(sweep_environments).where(
                sweep_environments.c.id == environment_id)).mappings().first()
        if row is None:
            return {}
        out = {k: v for k, v in row.items() if k not in ("details", "id", "created_at", "fingerprint_hash")}
        out.update(row["details"] or {})
        return out

    def request_outputs(self, trial_id: int, repeat: int | None = 0) -> list[dict]:
        """A trial's request outputs of one window (`repeat`), or of every window (None), each with its
        measurement's `repeat`."""
        with self.engine.connect() as conn:
            q = (select(sweep_request_outputs, sweep_measurements.c.repeat)
                 .join(sweep_measurements, sweep_measurements.c.id == sweep_request_outputs.c.measurement_id)
                 .where(sweep_measurements.c.trial_id == trial_id)
                 .order_by(sweep_measurements.c.repeat, sweep_request_outputs.c.prompt_id))
            if repeat is not None:
                q = q.where(sweep_measurements.c.repeat == repeat)
            return [dict(r) for r in conn.execute(q).mappings()]

    def paired_trials(self, baseline_trial_id: int) -> list[dict]:
        """Trials whose paired baseline is `baseline_trial_id`."""
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(select(sweep_trials).where(
                sweep_trials.c.baseline_trial_id == baseline_trial_id)).mappings()]

    def trial(self, trial_id: int) -> dict | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(sweep_trials).where(sweep_trials.c.id == trial_id)).mappings().first()
            return dict(row) if row else None

    # ---- environments -----------------------------------------------------------------------------
    def environment_id(self, fingerprint: dict[str, Any]) -> int:
        """Id of the environment row for this fingerprint, inserted if new (safe when several controllers
        insert the same fingerprint at once: the loser of the insert reads the winner's row)."""
        from sqlalchemy.exc import IntegrityError

        h = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()
        cols = {c.name for c in sweep_environments.columns} - {"id", "fingerprint_hash", "details", "created_at"}
        find = select(sweep_environments.c.id).where(sweep_environments.c.fingerprint_hash == h)
        with self.engine.connect() as conn:
            found = conn.execute(find).scalar()
        if found is not None:
            return int(found)
        try:
            with self.engine.begin() as conn:
                res = conn.execute(insert(sweep_environments).values(
                    fingerprint_hash=h, created_at=now(), details={k: v for k, v in fingerprint.items() if k not in cols},
                    **{k: fingerprint.get(k) for k in cols}))
                return int(res.inserted_primary_key[0])
        except IntegrityError:
            with self.engine.connect() as conn:
                return int(conn.execute(find).scalar_one())

    # ---- nightly runs -----------------------------------------------------------------------------
    # ---- leases (one live owner per sweep / nightly suite; store/leases.py) ------------------------------
    def acquire_lease(self, name: str, owner: str, host: str, pid: int, stale_after_s: float,
                      force: bool = False, dead=lambda holder: False) -> LeaseResult:
        return leases.acquire(self.engine, name, owner, host, pid, stale_after_s, force, dead)

    def renew_lease(self, name: str, owner: str) -> bool:
        return leases.renew(self.engine, name, owner)

    def release_lease(self, name: str, owner: str) -> None:
        leases.release(self.engine, name, owner)

    def lease_holder(self, name: str) -> LeaseHolder | None:
        with self.engine.connect() as conn:
            return leases.holder(conn, name)

    def create_nightly_run(self, suite: str, history_nights: int, host: str) -> int:
        with self.engine.begin() as conn:
            res = conn.execute(insert(nightly_runs).values(suite=suite, status="running", started_at=now(),
                                                           history_nights=history_nights, host=host))
            return int(res.inserted_primary_key[0])

    def add_nightly_sweep(self, run_id: int, sweep_id: int, spec_name: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(insert(nightly_sweeps).values(run_id=run_id, sweep_id=sweep_id, spec_name=spec_name))

    def finish_nightly_run(self, run_id: int, status: str, regressions: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(nightly_runs).where(nightly_runs.c.id == run_id).values(
                status=status, regressions=regressions, finished_at=now()))

    def previous_nightly_sweeps(self, suite: str, spec_name: str, before_run: int, limit: int) -> list[int]:
        """Sweep ids of the same spec in the suite's last `limit` finished nights before `before_run`."""
        with self.engine.connect() as conn:
            q = (select(nightly_sweeps.c.sweep_id)
                 .join(nightly_runs, nightly_runs.c.id == nightly_sweeps.c.run_id)
                 .where(nightly_runs.c.suite == suite, nightly_sweeps.c.spec_name == spec_name,
                        nightly_runs.c.id < before_run, nightly_runs.c.status != "running")
                 .order_by(nightly_runs.c.id.desc()).limit(limit))
            return [int(r[0]) for r in conn.execute(q)]

    def add_verdicts(self, rows: list[dict]) -> None:
        if rows:
            with self.engine.begin() as conn:
                conn.execute(insert(nightly_verdicts), rows)

    def nightly_history(self, run_id: int) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(text(
                "SELECT * FROM nightly_history WHERE run_id = :r ORDER BY spec_name, label, concurrency, metric"),
                {"r": run_id}).mappings()]

    def trial_results_by_id(self, sweep_id: int) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(text(
                "SELECT * FROM trial_results WHERE sweep_id = :s ORDER BY trial"), {"s": sweep_id}).mappings()]

    # ---- reads ------------------------------------------------------------------------------------
    def trial_results(self, sweep_name: str) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(
                text("SELECT * FROM trial_results WHERE sweep = :s ORDER BY trial"), {"s": sweep_name}).mappings()]

    def request_acceptance(self, sweep_name: str) -> list[dict]:
        """request_acceptance rows of a sweep: one per successful request of its speculative trials."""
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(text(
                "SELECT trial_id, label, num_speculative_tokens, dataset, concurrency, request_al, decode_step_ms "
                "FROM request_acceptance WHERE sweep = :s ORDER BY trial_id, repeat, prompt_id"),
                {"s": sweep_name}).mappings()]

    def crossover(self, sweep_name: str) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(
                text("SELECT * FROM speedup_crossover WHERE sweep = :s ORDER BY label, num_speculative_tokens, dataset"),
                {"s": sweep_name}).mappings()]

    def trial_result(self, trial_id: int) -> dict:
        """The trial_results row of one trial."""
        with self.engine.connect() as conn:
            return dict(conn.execute(text("SELECT * FROM trial_results WHERE trial_id = :t"),
                                     {"t": trial_id}).mappings().one())

    def measurements(self, trial_id: int) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(select(sweep_measurements).where(
                sweep_measurements.c.trial_id == trial_id).order_by(sweep_measurements.c.repeat)).mappings()]
