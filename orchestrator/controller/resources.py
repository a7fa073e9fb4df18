"""What a sweep asks of the Ray cluster: the engine actor class with its resources and process environment
(the backend says which environment), and how many engines may run at once."""

from __future__ import annotations

from typing import Any

from ..engines.engine_log import ENV as ENGINE_LOG_ENV
from ..engines.engine_log import engine_log_mode
from ..engines.registry import backend_class
from ..paths import cache_dir
from ..spec import LoadedSpec


def engine_actor_class(loaded: LoadedSpec) -> Any:
    import ray

    from ..engines.actor import EngineActor

    e, r = loaded.spec.engine, loaded.spec.resources
    env = backend_class(e.backend).process_env(e, str(cache_dir()))
    opts: dict[str, Any] = {
        # vLLM keeps its own threads; the reservation is for Ray's scheduling of engines at once.
        "num_cpus": r.cpus_per_engine if e.backend == "vllm" else 0.01,
        "num_gpus": r.gpus_per_engine,
        "max_restarts": 0,
    }
    if r.accelerator_type:
        opts["accelerator_type"] = r.accelerator_type
    env = {**env, ENGINE_LOG_ENV: engine_log_mode()}
    opts["runtime_env"] = {"env_vars": env}
    return ray.remote(EngineActor).options(**opts)


def max_engines(loaded: LoadedSpec) -> int:
    """How many engines at once: the spec's setting, else what the cluster's resources allow."""
    import ray

    r = loaded.spec.resources
    if r.max_parallel_engines:
        return r.max_parallel_engines
    if loaded.spec.engine.backend == "fake":
        return 1
    total = ray.cluster_resources()
    by_gpu = int(total.get("GPU", 0) // r.gpus_per_engine) if r.gpus_per_engine > 0 else None
    by_cpu = int(total.get("CPU", 1) // r.cpus_per_engine) if r.cpus_per_engine > 0 else None
    if r.gpus_per_engine == 0:
        return 1  # CPU engines compete for the same cores: one at a time unless the spec says otherwise
    return max(1, min(x for x in (by_gpu, by_cpu) if x is not None))
