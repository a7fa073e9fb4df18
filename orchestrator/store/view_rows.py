"""The records of the store's views (store/views.py): a trial's result, the speedup crossover, per-request
acceptance, capacity and nightly history. Fields in the views' column order."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from ..records import MetricValues, TrialSummary
from ..states import TrialRole, TrialState
from .rows import Row, Timestamp


@dataclass(frozen=True, kw_only=True)
class TrialResult(Row):
    """A `trial_results` view row: a trial with its summary, comparison and environment (docs/src/reference/store.md).
    Fields in the view's column order (CSV and JSON output keep it)."""

    JSON_FIELDS: ClassVar[tuple[str, ...]] = ("params", "acceptance_per_pos", "al_by_position", "fingerprint_diff")
    ENUMS: ClassVar[dict[str, Any]] = {"state": TrialState, "role": TrialRole}

    sweep: str
    trial: int
    label: str
    method: str
    backend: str
    num_speculative_tokens: int | None
    dataset: str
    concurrency: int
    request_rate: float | None
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    params: dict[str, Any]
    output_tok_s: float | None
    req_s: float | None
    ttft_ms_p50: float | None
    ttft_ms_p99: float | None
    tpot_ms_p50: float | None
    tpot_ms_p99: float | None
    itl_ms_p50: float | None
    itl_ms_p99: float | None
    e2e_ms_p50: float | None
    e2e_ms_p99: float | None
    acceptance_length: float | None
    acceptance_rate: float | None
    goodput_req_s: float | None
    slo_attainment: float | None
    decode_step_ms: float | None
    decode_tokens_per_step: float | None
    engine_step_ms: float | None
    tokens_per_engine_step: float | None
    drafter_ms_per_step: float | None
    verify_ms_per_step: float | None
    other_ms_per_step: float | None
    request_al_p10: float | None
    request_al_p50: float | None
    request_al_p90: float | None
    offered_rate: float | None
    repeats: int | None
    failed_requests: int | None
    acceptance_per_pos: list[float] | None
    output_tok_s_cv: float | None
    speedup: float | None
    speedup_ci_low: float | None
    speedup_ci_high: float | None
    tpot_ratio: float | None
    ttft_ratio: float | None
    step_cost_ratio: float | None
    predicted_speedup: float | None
    identity_residual: float | None
    al_by_position: list[float | None] | None
    tps_var_share_acceptance: float | None
    tps_var_share_step_time: float | None
    greedy_match_rate: float | None
    common_prefix_frac: float | None
    departures: int | None
    near_tie_departures: int | None
    min_clear_margin: float | None
    flags: str | None
    role: TrialRole
    baseline_trial_id: int | None
    state: TrialState
    error: str | None
    feasible: bool | None
    on_pareto_front: bool
    optuna_trial_number: int | None
    model: str
    drafter: str | None
    engine_config_hash: str
    hostname: str | None
    cpu_model: str | None
    gpu_model: str | None
    vllm_version: str | None
    cpu_isa: str | None
    dtype: str | None
    queued_s: float | None
    engine_start_s: float | None
    warmup_s: float | None
    measure_s: float | None
    memory_kind: str | None
    engine_memory_mb: float | None
    kv_cache_tokens: int | None
    speedup_ci_method: str | None
    fingerprint_diff: list[str] | None
    started_at: Timestamp
    finished_at: Timestamp
    point_key: str
    environment_id: int | None
    trial_id: int
    sweep_id: int

    def summary(self) -> TrialSummary:
        """The trial's figures as the controller tells them to the sampler (the view has no trial_flags). Taken
        as stored: a trial without its metrics row gives None where TrialSummary has a default."""
        names = [f.name for f in fields(MetricValues)] + ["repeats", "failed_requests", "output_tok_s_cv",
                                                          "al_by_position", "tps_var_share_acceptance",
                                                          "tps_var_share_step_time"]
        values: dict[str, Any] = {n: self.column(n) for n in names}
        return TrialSummary(**values)

    def metric(self, name: str) -> Any:
        """A metric column by name (METRIC_COLUMNS, or speedup and the other ratios: nightly and compare
        thresholds name the metric they judge)."""
        return self.column(name)


@dataclass(frozen=True, kw_only=True)
class CrossoverRow(Row):
    """A `speedup_crossover` view row."""

    sweep: str
    label: str
    method: str
    num_speculative_tokens: int | None
    drafter: str | None
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    dataset: str
    crossover_concurrency: int | None
    min_concurrency: int | None
    max_concurrency: int | None
    best_speedup: float | None


@dataclass(frozen=True, kw_only=True)
class RequestAcceptanceRow(Row):
    """The columns of the `request_acceptance` view that Store.request_acceptance reads."""

    trial_id: int
    label: str
    num_speculative_tokens: int | None
    dataset: str
    concurrency: int
    request_al: float | None
    decode_step_ms: float | None


@dataclass(frozen=True, kw_only=True)
class CapacityResult(Row):
    """A `capacity_results` view row: one configuration's capacity beside its baseline's."""

    JSON_FIELDS: ClassVar[tuple[str, ...]] = ("slo", "probes")

    sweep: str
    label: str
    method: str | None
    num_speculative_tokens: int | None
    drafter: str | None
    dataset: str
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    status: str
    max_rate_within_slo: float | None
    first_failing_rate: float | None
    baseline_max_rate_within_slo: float | None
    baseline_first_failing_rate: float | None
    capacity_ratio: float | None
    target_attainment: float
    slo: dict[str, Any]
    probes: list[dict[str, Any]]
    sweep_id: int
    capacity_id: int


@dataclass(frozen=True, kw_only=True)
class NightlyHistoryRow(Row):
    """A `nightly_history` view row: one verdict with its night and point."""

    suite: str
    run_id: int
    night: Timestamp
    run_status: str
    spec_name: str
    sweep: str
    label: str
    method: str
    num_speculative_tokens: int | None
    dataset: str
    concurrency: int
    max_num_seqs: int | None
    metric: str
    value: float | None
    history_median: float | None
    history_n: int
    change: float | None
    threshold: float
    verdict: str
    note: str | None
    trial_id: int
