"""What the store takes to insert a row the caller decides: a planned trial, a capacity search's result, a
recommendation, a nightly verdict (the store adds ids, numbers, states and times)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..states import TrialRole


@dataclass(frozen=True, kw_only=True)
class NewTrial:
    """The columns of a PENDING sweep_trials row that the plan decides (the store adds ids, number, state)."""

    params: dict[str, Any]
    role: TrialRole
    point_key: str
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    method_label: str
    method: str
    backend: str
    num_speculative_tokens: int | None
    method_params: dict[str, Any]
    concurrency: int
    request_rate: float | None
    dataset: str
    chat_template_kwargs: dict[str, Any]
    engine_config: dict[str, Any]
    engine_config_hash: str
    model: str
    model_path: str | None
    drafter: str | None


@dataclass(frozen=True, kw_only=True)
class NewCapacity:
    """A sweep_capacity row: one configuration's capacity search (controller/capacity.py capacity_record)."""

    config_key: str
    method_label: str
    method: str | None
    num_speculative_tokens: int | None
    drafter: str | None
    dataset: str
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    engine_config_hash: str | None
    target_attainment: float
    slo: dict[str, Any]
    status: str
    max_rate_within_slo: float | None
    first_failing_rate: float | None
    probes: list[dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class NewRecommendation:
    """A sweep_recommendations row (recommend.py Recommendation.record)."""

    label: str
    method: str
    dataset: str
    schedule: str
    speculative_config: dict[str, Any] | None
    best_fixed_k: int | None
    evidence: list[dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class NewVerdict:
    """A nightly_verdicts row: one metric of one point tonight against the previous nights."""

    run_id: int
    trial_id: int
    spec_name: str
    point_key: str
    metric: str
    value: float | None
    history_median: float | None
    history_n: int
    change: float | None
    threshold: float
    verdict: str
    note: str | None
