"""What the store keeps about a sweep beyond its trials: capacity searches and draft-length recommendations."""

from __future__ import annotations

from dataclasses import asdict

from sqlalchemy import delete, insert, select

from .db import Database
from .inserts import NewCapacity, NewRecommendation
from .rows import RecommendationRow
from .schema import sweep_capacity, sweep_recommendations
from .sweeps import now


class DecisionRepository:
    db: Database

    def save_capacity(self, sweep_id: int, row: NewCapacity) -> None:
        """Insert or replace one configuration's capacity."""
        with self.db.write(f"storing the capacity of {row.method_label} in sweep id {sweep_id}") as conn:
            conn.execute(delete(sweep_capacity).where(sweep_capacity.c.sweep_id == sweep_id,
                                                      sweep_capacity.c.config_key == row.config_key))
            conn.execute(insert(sweep_capacity).values(sweep_id=sweep_id, created_at=now(), **asdict(row)))

    def save_recommendation(self, sweep_id: int, row: NewRecommendation) -> None:
        """Insert or replace the recommendation of one (method label, dataset) of a sweep."""
        with self.db.write(f"storing the recommendation for {row.label} on {row.dataset}") as conn:
            conn.execute(delete(sweep_recommendations).where(
                sweep_recommendations.c.sweep_id == sweep_id, sweep_recommendations.c.method_label == row.label,
                sweep_recommendations.c.dataset == row.dataset))
            conn.execute(insert(sweep_recommendations).values(
                sweep_id=sweep_id, method_label=row.label, method=row.method, dataset=row.dataset,
                schedule=row.schedule, speculative_config=row.speculative_config,
                best_fixed_k=row.best_fixed_k, evidence=row.evidence, created_at=now()))

    def recommendations(self, sweep_id: int) -> list[RecommendationRow]:
        with self.db.read(f"reading the recommendations of sweep id {sweep_id}") as conn:
            return [RecommendationRow.from_mapping(r) for r in conn.execute(select(sweep_recommendations).where(
                sweep_recommendations.c.sweep_id == sweep_id).order_by(
                sweep_recommendations.c.method_label, sweep_recommendations.c.dataset)).mappings()]
