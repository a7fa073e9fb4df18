"""The store's nightly runs: which sweeps ran in each night and the verdicts against previous nights."""

from __future__ import annotations

from dataclasses import asdict

from sqlalchemy import delete, insert, select, text, update

from .db import Database, new_id
from .inserts import NewVerdict
from .schema import nightly_runs, nightly_sweeps, nightly_verdicts
from .sweeps import now
from .view_rows import NightlyHistoryRow


class NightlyRepository:
    db: Database

    def create_nightly_run(self, suite: str, history_nights: int, host: str) -> int:
        with self.db.write(f"starting a nightly run of {suite!r}") as conn:
            res = conn.execute(insert(nightly_runs).values(suite=suite, status="running", started_at=now(),
                                                           history_nights=history_nights, host=host))
            return new_id(res)

    def add_nightly_sweep(self, run_id: int, sweep_id: int, spec_name: str) -> None:
        with self.db.write(f"recording a sweep of nightly run {run_id}") as conn:
            if conn.execute(select(nightly_sweeps.c.run_id).where(
                    nightly_sweeps.c.run_id == run_id, nightly_sweeps.c.sweep_id == sweep_id)).first() is not None:
                return  # recorded by an attempt whose commit was not acknowledged
            conn.execute(insert(nightly_sweeps).values(run_id=run_id, sweep_id=sweep_id, spec_name=spec_name))

    def finish_nightly_run(self, run_id: int, status: str, regressions: int) -> None:
        with self.db.write(f"finishing nightly run {run_id}") as conn:
            conn.execute(update(nightly_runs).where(nightly_runs.c.id == run_id).values(
                status=status, regressions=regressions, finished_at=now()))

    def previous_nightly_sweeps(self, suite: str, spec_name: str, before_run: int, limit: int) -> list[int]:
        """Sweep ids of the same spec in the suite's last `limit` finished nights before `before_run`."""
        with self.db.read(f"reading previous nights of {suite!r}") as conn:
            q = (select(nightly_sweeps.c.sweep_id)
                 .join(nightly_runs, nightly_runs.c.id == nightly_sweeps.c.run_id)
                 .where(nightly_runs.c.suite == suite, nightly_sweeps.c.spec_name == spec_name,
                        nightly_runs.c.id < before_run, nightly_runs.c.status != "running")
                 .order_by(nightly_runs.c.id.desc()).limit(limit))
            return [int(r[0]) for r in conn.execute(q)]

    def add_verdicts(self, rows: list[NewVerdict]) -> None:
        if rows:
            with self.db.write(f"storing the verdicts of nightly run {rows[0].run_id}") as conn:
                # replaces the same trials' verdicts of this run: a retried write never stores them twice
                conn.execute(delete(nightly_verdicts).where(nightly_verdicts.c.run_id == rows[0].run_id,
                                                            nightly_verdicts.c.trial_id.in_({r.trial_id for r in rows})))
                conn.execute(insert(nightly_verdicts), [asdict(r) for r in rows])

    def nightly_history(self, run_id: int) -> list[NightlyHistoryRow]:
        with self.db.read(f"reading the verdicts of nightly run {run_id}") as conn:
            return [NightlyHistoryRow.from_mapping(r) for r in conn.execute(text(
                "SELECT * FROM nightly_history WHERE run_id = :r ORDER BY spec_name, label, concurrency, metric"),
                {"r": run_id}).mappings()]
