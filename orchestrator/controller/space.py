"""The search space of a sweep, in Optuna terms, and its mapping back to engine configs and load points.

Optuna parameters:
  method                      categorical over method labels
  <label>:<param>             categorical over a method's swept values (only for swept parameters)
  max_num_seqs, max_num_batched_tokens   categorical, when swept in `space`
  dataset                     categorical over workload.dataset (a load point: no engine restart)
  concurrency                 categorical over space.concurrency
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from ..methods import MethodPoint
from ..spec import LoadedSpec
from .plan import PlannedTrial, chat_template_kwargs, engine_config

ENGINE_KEYS = ("max_num_seqs", "max_num_batched_tokens")


@dataclass(frozen=True)
class SearchSpace:
    loaded: LoadedSpec
    model_path: str

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
        return list(self.loaded.spec.space.concurrency)

    @property
    def datasets(self) -> list[str]:
        return self.loaded.spec.workload.datasets

    def suggest(self, trial) -> dict[str, Any]:
        """Ask an Optuna trial for one point (define-by-run; conditional on the method)."""
        params: dict[str, Any] = {"method": trial.suggest_categorical("method", self.labels)}
        for k, vals in self.swept_method_params(params["method"]).items():
            name = f"{params['method']}:{k}"
            params[name] = trial.suggest_categorical(name, vals)
        for k, vals in self.engine_choices.items():
            params[k] = trial.suggest_categorical(k, vals)
        params["dataset"] = trial.suggest_categorical("dataset", self.datasets)
        params["concurrency"] = trial.suggest_categorical("concurrency", self.concurrencies)
        return params

    def grid(self) -> list[dict[str, Any]]:
        """Every point once, ordered so that points sharing an engine configuration are adjacent."""
        out = []
        engine_combos = [dict(zip(self.engine_choices, c)) for c in itertools.product(*self.engine_choices.values())]
        for point in self.loaded.method_points:
            swept = self.swept_method_params(point.label)
            method_params = {f"{point.label}:{k}": point.params[k] for k in swept}
            for eng in engine_combos:
                for ds in self.datasets:
                    for conc in self.concurrencies:
                        out.append({"method": point.label, **method_params, **eng, "dataset": ds, "concurrency": conc})
        return out

    def distributions(self, params: dict[str, Any]) -> dict[str, Any]:
        """Optuna distributions of the parameters of one point (for trials added without ask())."""
        from optuna.distributions import CategoricalDistribution

        choices: dict[str, list[Any]] = {"method": self.labels, "concurrency": self.concurrencies,
                                         "dataset": self.datasets, **self.engine_choices}
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
        return {"method": self.baseline_label, **{k: params[k] for k in ENGINE_KEYS if k in params},
                "dataset": params["dataset"], "concurrency": params["concurrency"]}

    def grid_baselines(self, points: list[dict[str, Any]], add_missing: bool) -> tuple[dict[str, str], list[dict]]:
        """(speculative point key -> its baseline's key, baseline points the grid lacks). Without
        `add_missing`, only points whose baseline is already in the grid are paired."""
        from .plan import point_key

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
        return PlannedTrial(point=point, engine=cfg, concurrency=int(params["concurrency"]), dataset=params["dataset"],
                            chat_template_kwargs=chat_template_kwargs(self.loaded))
