"""What the store returns: one frozen record per table or view row that leaves `store/`. Each record's fields are
exactly the columns of its table or view (tests/unit/test_store_rows.py checks that against a real database),
so a renamed column fails there, not as a missing key in a report. JSON read through a view comes back as text
on SQLite and decoded on PostgreSQL: `from_mapping` decodes it, so both stores give the same objects."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Mapping, TypeVar

from ..states import SweepStatus, TrialRole, TrialState

R = TypeVar("R", bound="Row")

# Timestamps: datetimes from tables; through a view SQLite gives the text it stored.
Timestamp = dt.datetime | str | None


@dataclass(frozen=True, kw_only=True)
class Row:
    """Base of the store's read records."""

    JSON_FIELDS: ClassVar[tuple[str, ...]] = ()
    ENUMS: ClassVar[dict[str, Any]] = {}

    @classmethod
    def from_mapping(cls: type[R], m: Mapping[Any, Any]) -> R:
        names = [f.name for f in fields(cls)]
        unknown = set(m) - set(names)
        if unknown:  # a view or table gained a column the record does not declare
            raise TypeError(f"{cls.__name__}: columns without a field: {sorted(unknown)}")
        values = {}
        for n in names:
            v = m[n]
            if n in cls.JSON_FIELDS and isinstance(v, str):
                v = json.loads(v)
            elif n in cls.ENUMS and v is not None:
                v = cls.ENUMS[n](v)
            values[n] = v
        return cls(**values)

    def column(self, column: str) -> Any:
        """A column by name, for what is named at run time (a table's columns, a configured metric); a name
        that is not a column of this record raises AttributeError instead of reading as None."""
        if column not in self._names():
            raise AttributeError(f"{type(self).__name__} has no column {column!r}")
        return getattr(self, column)

    def as_dict(self) -> dict[str, Any]:
        """Columns in order, for JSON and CSV output."""
        return {n: getattr(self, n) for n in self._names()}

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True, kw_only=True)
class SweepRow(Row):
    """A `sweeps` row."""

    ENUMS: ClassVar[dict[str, Any]] = {"status": SweepStatus}

    id: int
    name: str
    spec_hash: str
    spec: dict[str, Any]
    spec_path: str | None
    status: SweepStatus
    created_at: Timestamp
    finished_at: Timestamp


@dataclass(frozen=True, kw_only=True)
class TrialRow(Row):
    """A `sweep_trials` row: one planned or measured point."""

    ENUMS: ClassVar[dict[str, Any]] = {"state": TrialState, "role": TrialRole}

    id: int
    sweep_id: int
    trial_number: int
    method_label: str
    method: str
    backend: str
    num_speculative_tokens: int | None
    method_params: dict[str, Any]
    params: dict[str, Any]
    point_key: str
    optuna_trial_number: int | None
    concurrency: int
    request_rate: float | None
    dataset: str
    chat_template_kwargs: dict[str, Any] | None
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    engine_config: dict[str, Any]
    engine_config_hash: str
    model: str
    model_path: str | None
    drafter: str | None
    role: TrialRole
    baseline_trial_id: int | None
    flags: str | None
    state: TrialState
    error: str | None
    environment_id: int | None
    engine_pid: int | None
    attempt: int
    feasible: bool | None
    on_pareto_front: bool
    queued_s: float | None
    engine_start_s: float | None
    warmup_s: float | None
    measure_s: float | None
    memory_kind: str | None
    engine_memory_mb: float | None
    kv_cache_tokens: int | None
    created_at: Timestamp
    started_at: Timestamp
    finished_at: Timestamp


@dataclass(frozen=True, kw_only=True)
class MeasurementRow(Row):
    """A `sweep_measurements` row: one window of a trial."""

    id: int
    trial_id: int
    repeat: int
    window_s: float
    num_requests: int
    failed_requests: int
    output_tokens: int
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
    num_drafts: int | None
    num_draft_tokens: int | None
    num_accepted_tokens: int | None
    acceptance_per_pos: list[float] | None
    environment_id: int | None
    client_cpu_frac: float | None
    prefix_cache_hit_rate: float | None
    memory_mb: float | None
    started_at: Timestamp
    created_at: Timestamp
    warmup_failed_requests: int | None
    discarded_window: bool | None
    send_lag_ms_p99: float | None
    send_lag_ms_max: float | None
    engine_steps: int | None
    position_acceptance: list[list[int]] | None


@dataclass(frozen=True, kw_only=True)
class RequestOutputRow(Row):
    """A `sweep_request_outputs` row with its window's `repeat`."""

    id: int
    measurement_id: int
    prompt_id: str
    ok: bool
    error: str | None
    finish_reason: str | None
    output_tokens: int
    prompt_tokens: int | None
    ttft_ms: float | None
    e2e_ms: float | None
    output_text: str | None
    output_token_ids: list[int] | None
    spec_steps: int | None
    spec_draft_tokens: int | None
    spec_accepted_tokens: int | None
    spec_accept_histogram: list[int] | None
    spec_step_accepted: str | None
    spec_step_drafted: str | None
    top3: list[list[float]] | None
    repeat: int


# The stored fingerprint's own columns (sweep_environments); everything else it holds is in `details`.
ENVIRONMENT_COLUMNS = ("hostname", "cpu_model", "cpu_count", "cpu_isa", "dtype", "gpu_model", "gpu_count",
                       "gpu_driver", "cuda_version", "python_version", "vllm_version", "torch_version",
                       "transformers_version", "ray_version", "optuna_version", "specsweep_version", "platform")


@dataclass(frozen=True, kw_only=True)
class EnvironmentRow(Row):
    """A stored environment fingerprint: the `sweep_environments` columns and the `details` they do not hold."""

    id: int
    fingerprint_hash: str
    hostname: str | None
    cpu_model: str | None
    cpu_count: int | None
    cpu_isa: str | None
    dtype: str | None
    gpu_model: str | None
    gpu_count: int | None
    gpu_driver: str | None
    cuda_version: str | None
    python_version: str | None
    vllm_version: str | None
    torch_version: str | None
    transformers_version: str | None
    ray_version: str | None
    optuna_version: str | None
    specsweep_version: str | None
    platform: str | None
    details: dict[str, Any] | None
    created_at: Timestamp

    def fact(self, name: str) -> Any:
        """One fact of the fingerprint by name: a column, else a key of `details` (None: not recorded)."""
        if name in ENVIRONMENT_COLUMNS:
            return getattr(self, name)
        return (self.details or {}).get(name)

    def facts(self) -> dict[str, Any]:
        """The whole fingerprint as it was collected (columns and details in one mapping), for display."""
        out = {n: getattr(self, n) for n in ENVIRONMENT_COLUMNS}
        out.update(self.details or {})
        return out


@dataclass(frozen=True, kw_only=True)
class RecommendationRow(Row):
    """A `sweep_recommendations` row."""

    id: int
    sweep_id: int
    method_label: str
    method: str
    dataset: str
    schedule: str
    speculative_config: dict[str, Any] | None
    best_fixed_k: int | None
    evidence: dict[str, Any] | list[Any]
    created_at: Timestamp
