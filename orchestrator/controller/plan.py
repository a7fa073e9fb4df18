"""Split a spec into trials: engine configuration (fixed at engine start) x load point (per request)."""

from __future__ import annotations

import json
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from ..engines.base import EngineConfig, SamplingSettings
from ..methods import MethodPoint, get_method
from ..spec import LoadedSpec


@dataclass(frozen=True)
class PlannedTrial:
    point: MethodPoint
    engine: EngineConfig
    concurrency: int
    dataset: str
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    def row(self, params: dict[str, Any], role: str = "search") -> dict[str, Any]:
        """Columns of the sweep_trials row for this trial (`params`: its Optuna parameters; `role`: search,
        or paired_baseline for a baseline the controller added to pair with speculative trials)."""
        return {
            "params": params,
            "role": role,
            "point_key": point_key(params),
            "max_num_seqs": self.engine.engine_args.get("max_num_seqs"),
            "max_num_batched_tokens": self.engine.engine_args.get("max_num_batched_tokens"),
            "method_label": self.point.label,
            "method": self.point.method,
            "backend": self.engine.backend,
            "num_speculative_tokens": self.point.num_speculative_tokens,
            "method_params": {**self.point.params, **self.point.derived, **self.point.facts},
            "concurrency": self.concurrency,
            "dataset": self.dataset,
            "chat_template_kwargs": self.chat_template_kwargs,
            "engine_config": self.engine.to_dict(),
            "engine_config_hash": self.engine.config_hash,
            "model": self.engine.model,
            "model_path": self.engine.model_path,
            "drafter": self.point.params.get("model"),
        }


def point_key(params: dict[str, Any]) -> str:
    """Canonical identity of a search point (same params -> same key, across runs and machines)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def engine_config(loaded: LoadedSpec, point: MethodPoint, model_path: str,
                  overrides: dict[str, Any] | None = None) -> EngineConfig:
    """The engine configuration of one method point; `overrides` are swept engine settings (space.*)."""
    s = loaded.spec
    e = s.engine
    overrides = overrides or {}
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
            "max_num_seqs": overrides.get("max_num_seqs", e.max_num_seqs),
            "max_num_batched_tokens": overrides.get("max_num_batched_tokens", e.max_num_batched_tokens),
            "gpu_memory_utilization": e.gpu_memory_utilization if s.resources.gpus_per_engine > 0 else None,
            "tensor_parallel_size": e.tensor_parallel_size,
            "seed": e.seed,
            "extra_args": dict(e.extra_args),
        },
        fake=e.fake.model_dump() if e.backend == "fake" else {},
    )


def build_plan(loaded: LoadedSpec, model_path: str) -> list[PlannedTrial]:
    """Every grid point as a trial, grouped by engine configuration, then by load."""
    from .space import SearchSpace

    space = SearchSpace(loaded, model_path)
    return [space.planned_trial(p) for p in space.grid()]


def chat_template_kwargs(loaded: LoadedSpec) -> dict[str, Any]:
    """The target's chat-template arguments, with Qwen3's thinking mode OFF unless the spec says otherwise:
    the published Qwen3 drafters were trained without thinking traces (acceptance halves with it on)."""
    kwargs = dict(loaded.spec.target.chat_template_kwargs)
    if is_qwen3(loaded.spec.target.model):
        kwargs.setdefault("enable_thinking", False)
    return kwargs


def is_qwen3(model: str) -> bool:
    """A Qwen3 target: from a local folder's config.json, else from the hub id's name."""
    cfg_file = Path(model).expanduser() / "config.json"
    if cfg_file.is_file():
        try:
            cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return False
        return str(cfg.get("model_type", "")).startswith("qwen3") or any(
            a.startswith("Qwen3") for a in cfg.get("architectures") or [])
    return model.rstrip("/").split("/")[-1].lower().startswith("qwen3")


def sampling_settings(loaded: LoadedSpec) -> SamplingSettings:
    w = loaded.spec.workload
    return SamplingSettings(max_tokens=w.max_tokens, temperature=w.temperature, top_p=w.top_p, seed=w.seed,
                            ignore_eos=w.ignore_eos, chat_template_kwargs=chat_template_kwargs(loaded))
