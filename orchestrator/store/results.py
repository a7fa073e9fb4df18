"""Reads of the store's views (store/views.py), each row as its record (store/rows.py)."""

from __future__ import annotations

from sqlalchemy import text

from .db import Database
from .view_rows import CapacityResult, CrossoverRow, RequestAcceptanceRow, TrialResult


class ResultRepository:
    db: Database

    def trial_results(self, sweep_name: str) -> list[TrialResult]:
        with self.db.read(f"reading the results of sweep {sweep_name!r}") as conn:
            return [TrialResult.from_mapping(r) for r in conn.execute(
                text("SELECT * FROM trial_results WHERE sweep = :s ORDER BY trial"), {"s": sweep_name}).mappings()]

    def trial_results_by_id(self, sweep_id: int) -> list[TrialResult]:
        with self.db.read(f"reading the results of sweep id {sweep_id}") as conn:
            return [TrialResult.from_mapping(r) for r in conn.execute(text(
                "SELECT * FROM trial_results WHERE sweep_id = :s ORDER BY trial"), {"s": sweep_id}).mappings()]

    def trial_result(self, trial_id: int) -> TrialResult:
        """The trial_results row of one trial."""
        with self.db.read(f"reading the result of trial row {trial_id}") as conn:
            return TrialResult.from_mapping(conn.execute(text("SELECT * FROM trial_results WHERE trial_id = :t"),
                                                         {"t": trial_id}).mappings().one())

    def request_acceptance(self, sweep_name: str) -> list[RequestAcceptanceRow]:
        """request_acceptance rows of a sweep: one per successful request of its speculative trials."""
        with self.db.read(f"reading the request acceptance of sweep {sweep_name!r}") as conn:
            return [RequestAcceptanceRow.from_mapping(r) for r in conn.execute(text(
                "SELECT trial_id, label, num_speculative_tokens, dataset, concurrency, request_al, decode_step_ms "
                "FROM request_acceptance WHERE sweep = :s ORDER BY trial_id, repeat, prompt_id"),
                {"s": sweep_name}).mappings()]

    def crossover(self, sweep_name: str) -> list[CrossoverRow]:
        with self.db.read(f"reading the speedup crossover of sweep {sweep_name!r}") as conn:
            return [CrossoverRow.from_mapping(r) for r in conn.execute(
                text("SELECT * FROM speedup_crossover WHERE sweep = :s ORDER BY label, num_speculative_tokens, dataset"),
                {"s": sweep_name}).mappings()]

    def capacity_results(self, sweep_name: str) -> list[CapacityResult]:
        """The capacity_results view of one sweep (empty unless it ran search.sampler capacity)."""
        with self.db.read(f"reading the capacity results of sweep {sweep_name!r}") as conn:
            return [CapacityResult.from_mapping(r) for r in conn.execute(text(
                "SELECT * FROM capacity_results WHERE sweep = :s ORDER BY dataset, method <> 'baseline', label, "
                "num_speculative_tokens, capacity_id"), {"s": sweep_name}).mappings()]
