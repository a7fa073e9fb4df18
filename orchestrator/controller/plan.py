"""Split a spec into trials: engine configuration (fixed at engine start) x load point (per request)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..engines.base import EngineConfig, SamplingSettings
from ..methods import MethodPoint, get_method
from ..spec import LoadedSpec


@dataclass(frozen=True)
class PlannedTrial:
    point: MethodPoint
    engine: EngineConfig
    concurrency: int

    def row(self) -> dict[str, Any]:
        """Columns of the sweep_trials row for this trial."""
        return {
            "method_label": self.point.label,
            "method": self.point.method,
            "backend": self.engine.backend,
            "num_speculative_tokens": self.point.num_speculative_tokens,
            "method_params": self.point.params,
            "concurrency": self.concurrency,
            "engine_config": self.engine.to_dict(),
            "engine_config_hash": self.engine.config_hash,
            "model": self.engine.model,
            "model_path": self.engine.model_path,
            "drafter": self.point.params.get("model"),
        }


def engine_config(loaded: LoadedSpec, point: MethodPoint, model_path: str) -> EngineConfig:
    s = loaded.spec
    e = s.engine
    return EngineConfig(
        backend=e.backend,
        model=s.target.model,
        model_path=model_path,
        revision=s.target.revision,
        dtype=s.target.dtype,
        max_model_len=s.target.max_model_len,
        method_label=point.label,
        method=point.method,
        speculative_config=get_method(point.method).speculative_config(point),
        engine_args={
            "tokenizer": s.target.tokenizer,
            "enforce_eager": e.enforce_eager,
            "enable_prefix_caching": e.enable_prefix_caching,
            "max_num_seqs": e.max_num_seqs,
            "max_num_batched_tokens": e.max_num_batched_tokens,
            "gpu_memory_utilization": e.gpu_memory_utilization if e.num_gpus > 0 else None,
            "tensor_parallel_size": e.tensor_parallel_size,
            "seed": e.seed,
            "extra_args": dict(e.extra_args),
        },
        fake=e.fake.model_dump() if e.backend == "fake" else {},
    )


def build_plan(loaded: LoadedSpec, model_path: str) -> list[PlannedTrial]:
    """Trials in run order: grouped by engine configuration (each engine started once), then by load."""
    trials = []
    for point in loaded.method_points:
        cfg = engine_config(loaded, point, model_path)
        for conc in loaded.spec.space.concurrency:
            trials.append(PlannedTrial(point=point, engine=cfg, concurrency=conc))
    return trials


def sampling_settings(loaded: LoadedSpec) -> SamplingSettings:
    w = loaded.spec.workload
    return SamplingSettings(max_tokens=w.max_tokens, temperature=w.temperature, top_p=w.top_p, seed=w.seed,
                            ignore_eos=w.ignore_eos, chat_template_kwargs=dict(loaded.spec.target.chat_template_kwargs))
