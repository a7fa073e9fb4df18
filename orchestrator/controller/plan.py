"""A sweep's plan: the search space in Optuna terms, and each point as a trial = engine configuration (fixed
at engine start) x load point (per request).

Optuna parameters:
  method                      categorical over method labels
  <label>:<param>             categorical over a method's swept values (only for swept parameters)
  max_num_seqs, max_num_batched_tokens   categorical, when swept in `space`
  dataset                     categorical over workload.dataset (a load point: no engine restart)
  concurrency                 categorical over space.concurrency (closed loop), or
  request_rate                categorical over space.request_rate (open loop; `inf` is the string "inf").
                              A point has one of the two; a grid with both lists measures each.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engines.base import EngineConfig
from ..methods import MethodPoint, get_method
from ..records import SamplingSettings
from ..spec import LoadedSpec
from ..states import TrialRole
from ..store.inserts import NewTrial

if TYPE_CHECKING:
    import optuna


def rate_value(rate: float | str) -> float:
    """A request rate as a number (`inf` -> math.inf)."""
    return math.inf if rate == "inf" else float(rate)


def load_text(concurrency: int, request_rate: float | str | None) -> str:
    """A load point in words: `concurrency 4`, `rate 2/s`, `rate inf`."""
    if request_rate is None:
        return f"concurrency {concurrency}"
    return "rate inf" if rate_value(request_rate) == math.inf else f"rate {rate_value(request_rate):g}/s"


@dataclass(frozen=True)
class PlannedTrial:
    point: MethodPoint
    engine: EngineConfig
    concurrency: int  # closed loop: requests in flight; open loop: the most in flight (the cap, else the prompts)
    dataset: str
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    request_rate: float | str | None = None  # open loop: requests/s ("inf": all at once); None: closed loop

    def new_trial(self, params: dict[str, Any], role: TrialRole = TrialRole.SEARCH) -> NewTrial:
        """The sweep_trials row for this trial (`params`: its Optuna parameters; `role`: search, or
        paired_baseline for a baseline the controller added to pair with speculative trials)."""
        return NewTrial(
            params=params,
            role=TrialRole(role),
            point_key=point_key(params),
            max_num_seqs=self.engine.engine_args.get("max_num_seqs"),
            max_num_batched_tokens=self.engine.engine_args.get("max_num_batched_tokens"),
            method_label=self.point.label,
            method=self.point.method,
            backend=self.engine.backend,
            num_speculative_tokens=self.point.num_speculative_tokens,
            method_params={**self.point.params, **self.point.derived, **self.point.facts},
            concurrency=self.concurrency,
            request_rate=None if self.request_rate is None else rate_value(self.request_rate),
            dataset=self.dataset,
            chat_template_kwargs=self.chat_template_kwargs,
            engine_config=self.engine.to_dict(),
            engine_config_hash=self.engine.config_hash,
            model=self.engine.model,
            model_path=self.engine.model_path,
            drafter=self.point.params.get("model"),
        )


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


ENGINE_KEYS = ("max_num_seqs", "max_num_batched_tokens")


@dataclass(frozen=True)
class SearchSpace:
    loaded: LoadedSpec
    model_path: str

    def __post_init__(self) -> None:
        unchecked = sorted({p.label for p in self.loaded.method_points if get_method(p.method).needs_check
                            and not p.checked})
        if unchecked:  # their engine configs depend on facts read from the drafter
            raise RuntimeError(f"method points {', '.join(unchecked)} were not checked: run "
                               f"methods.checks.check_methods before planning")

    @property
    def labels(self) -> list[str]:
        return list(dict.fromkeys(p.label for p in self.loaded.method_points))

    def swept_method_params(self, label: str) -> dict[str, list[Any]]:
        """Parameters of a method entry that take more than one value, with their values in spec order."""
        values: dict[str, list[Any]] = {}
        for p in self.loaded.method_points:
            if p.label == label:
                for k, v in p.params.items():
                    values.setdefault(k, [])
                    if v not in values[k]:
                        values[k].append(v)
        return {k: v for k, v in values.items() if len(v) > 1}

    @property
    def engine_choices(self) -> dict[str, list[int]]:
        return {k: getattr(self.loaded.spec.space, k) for k in ENGINE_KEYS if getattr(self.loaded.spec.space, k)}

    @property
    def concurrencies(self) -> list[int]:
        """Closed-loop load points (none when the spec gives only request rates)."""
        space = self.loaded.spec.space
        if space.request_rate is not None and "concurrency" not in space.model_fields_set:
            return []
        return list(space.concurrency)

    @property
    def request_rates(self) -> list[float | str]:
        """Open-loop load points (requests/s; "inf")."""
        return list(self.loaded.spec.space.request_rate or [])

    @property
    def datasets(self) -> list[str]:
        return self.loaded.spec.workload.datasets

    def suggest(self, trial: "optuna.Trial") -> dict[str, Any]:
        """Ask an Optuna trial for one point (define-by-run; conditional on the method)."""
        params: dict[str, Any] = {"method": trial.suggest_categorical("method", self.labels)}
        for k, vals in self.swept_method_params(params["method"]).items():
            name = f"{params['method']}:{k}"
            params[name] = trial.suggest_categorical(name, vals)
        for k, vals in self.engine_choices.items():
            params[k] = trial.suggest_categorical(k, vals)
        params["dataset"] = trial.suggest_categorical("dataset", self.datasets)
        if self.concurrencies:  # adaptive samplers take one load dimension (spec validation)
            params["concurrency"] = trial.suggest_categorical("concurrency", self.concurrencies)
        else:
            params["request_rate"] = trial.suggest_categorical("request_rate", self.request_rates)
        return params

    def configurations(self, with_baseline: bool = False) -> list[dict[str, Any]]:
        """Every (method point, engine settings, dataset) once, without a load point; `with_baseline` adds the
        automatic baseline's when the spec has no plain baseline entry."""
        out = []
        engine_combos = [dict(zip(self.engine_choices, c)) for c in itertools.product(*self.engine_choices.values())]
        labels_points = [(p.label, {f"{p.label}:{k}": p.params[k] for k in self.swept_method_params(p.label)})
                         for p in self.loaded.method_points]
        if with_baseline and self.baseline_label not in self.labels:
            labels_points.append((self.baseline_label, {}))
        for label, method_params in labels_points:
            for eng in engine_combos:
                for ds in self.datasets:
                    out.append({"method": label, **method_params, **eng, "dataset": ds})
        return out

    def grid(self) -> list[dict[str, Any]]:
        """Every point once, ordered so that points sharing an engine configuration are adjacent."""
        out = []
        for config in self.configurations():
            out += [{**config, "concurrency": c} for c in self.concurrencies]
            out += [{**config, "request_rate": r} for r in self.request_rates]
        return out

    def distributions(self, params: dict[str, Any]) -> dict[str, Any]:
        """Optuna distributions of the parameters of one point (for trials added without ask())."""
        from optuna.distributions import CategoricalDistribution

        choices: dict[str, list[Any]] = {"method": self.labels, "concurrency": self.concurrencies,
                                         "request_rate": self.request_rates, "dataset": self.datasets,
                                         **self.engine_choices}
        label = params["method"]
        for k, vals in self.swept_method_params(label).items():
            choices[f"{label}:{k}"] = vals
        return {k: CategoricalDistribution(choices[k]) for k in params}

    @property
    def baseline_label(self) -> str:
        """Label of the no-speculation baseline that speculative trials pair with: the spec's own plain
        `baseline` entry when it has one, else an automatic one."""
        for p in self.loaded.method_points:
            if p.method == "baseline":
                return p.label
        taken = set(self.labels)
        return "baseline" if "baseline" not in taken else "paired-baseline"

    def baseline_params(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The paired baseline's point for a speculative point (same engine settings and load point);
        None for a point that is itself a baseline."""
        if self.method_point(params).method == "baseline":
            return None
        load: dict[str, Any] = {k: params[k] for k in ("concurrency", "request_rate") if k in params}
        return {"method": self.baseline_label, **{k: params[k] for k in ENGINE_KEYS if k in params},
                "dataset": params["dataset"], **load}

    def grid_baselines(self, points: list[dict[str, Any]],
                       add_missing: bool) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """(speculative point key -> its baseline's key, baseline points the grid lacks). Without
        `add_missing`, only points whose baseline is already in the grid are paired."""
        keys = {point_key(p) for p in points}
        pairs, extra = {}, []
        for p in points:
            bp = self.baseline_params(p)
            if bp is None:
                continue
            bk = point_key(bp)
            if bk not in keys:
                if not add_missing:
                    continue
                keys.add(bk)
                extra.append(bp)
            pairs[point_key(p)] = bk
        return pairs, extra

    def method_point(self, params: dict[str, Any]) -> MethodPoint:
        label = params["method"]
        if label == self.baseline_label and label not in self.labels:
            return MethodPoint(label=label, method="baseline")
        swept = self.swept_method_params(label)
        for p in self.loaded.method_points:
            if p.label == label and all(p.params[k] == params[f"{label}:{k}"] for k in swept):
                return p
        raise KeyError(f"no method point for {params}")

    def planned_trial(self, params: dict[str, Any]) -> PlannedTrial:
        point = self.method_point(params)
        overrides = {k: params[k] for k in ENGINE_KEYS if k in params}
        cfg = engine_config(self.loaded, point, self.model_path, overrides)
        rate = params.get("request_rate")
        w = self.loaded.spec.workload
        concurrency = int(params["concurrency"]) if rate is None else (w.max_concurrency or w.num_prompts)
        return PlannedTrial(point=point, engine=cfg, concurrency=concurrency, dataset=params["dataset"],
                            chat_template_kwargs=chat_template_kwargs(self.loaded), request_rate=rate)


def build_plan(loaded: LoadedSpec, model_path: str) -> list[PlannedTrial]:
    """Every grid point as a trial, grouped by engine configuration, then by load."""
    space = SearchSpace(loaded, model_path)
    return [space.planned_trial(p) for p in space.grid()]


@dataclass(frozen=True)
class PlanSummary:
    """What `specsweep validate` says about a spec: the size of its space and of its grid."""

    points: int  # points of the search space (a grid runs each once)
    paired_baselines: int  # baseline trials a grid adds to pair with its speculative points
    engine_configs: int  # distinct engine configurations, baselines included
    capacity_configs: int = 0  # search.sampler capacity: configurations searched (the baseline's included)


def plan_summary(loaded: LoadedSpec, model_path: str) -> PlanSummary:
    space = SearchSpace(loaded, model_path)
    points = space.grid()
    _, baselines = space.grid_baselines(points, loaded.spec.measurement.paired_baseline)
    configs = {space.planned_trial(p).engine.config_hash for p in points + baselines}
    return PlanSummary(points=len(points), paired_baselines=len(baselines), engine_configs=len(configs),
                       capacity_configs=len(space.configurations(with_baseline=loaded.spec.measurement.paired_baseline)))
