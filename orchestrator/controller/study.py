"""The Optuna study behind a sweep: sampler choice, objectives, SLO constraints, stale-trial cleanup.

The study lives in the same database as the results (Optuna's own tables beside ours), named after the
sweep. Known Optuna 5.0 traps handled here: heartbeats do not work with ask/tell, so trials left RUNNING by
a dead controller are failed by us on resume; GridSampler's last `tell` raises, so grids are enqueued
trials under a RandomSampler instead.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import optuna
from optuna.trial import TrialState

from ..spec import LoadedSpec
from ..spec.models import SearchSpec

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def make_sampler(search: SearchSpec) -> optuna.samplers.BaseSampler:
    s = search.sampler
    if s in ("grid", "random"):
        return optuna.samplers.RandomSampler(seed=search.seed)
    if s == "tpe":
        return optuna.samplers.TPESampler(seed=search.seed, multivariate=True, group=True, constant_liar=True)
    if s == "gp":
        # GP has no conditional spaces: a method's own parameters are drawn at random when the method
        # changes between trials (Optuna warns on each); the method, batch settings and load are modelled.
        return optuna.samplers.GPSampler(seed=search.seed, warn_independent_sampling=False)
    if s == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=search.seed)
    raise ValueError(f"unknown sampler {s!r}")


def open_study(loaded: LoadedSpec, storage_url: str, study_name: str) -> optuna.Study:
    search = loaded.spec.search
    return optuna.create_study(
        storage=storage_url, study_name=study_name, load_if_exists=True, sampler=make_sampler(search),
        directions=[o.direction for o in search.objectives],
    )


def fail_stale_trials(study: optuna.Study) -> int:
    """Trials a previous controller left RUNNING (it was killed): mark them FAIL in Optuna."""
    n = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        n += 1
    return n


def objective_values(search: SearchSpec, summary: dict[str, Any]) -> list[float] | None:
    """Objective values of a completed trial, or None when one is missing (then told FAIL)."""
    values = []
    for o in search.objectives:
        v = summary.get(o.metric)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return None
        values.append(float(v))
    return values


def constraint_values(search: SearchSpec, summary: dict[str, Any]) -> dict[str, float]:
    """SLO constraints as Optuna wants them: feasible when <= 0. A missing metric counts as violated."""
    out = {}
    for c in search.constraints:
        v = summary.get(c.metric)
        key = f"{c.metric}<={c.max}" if c.max is not None else f"{c.metric}>={c.min}"
        if v is None:
            out[key] = 1.0
        else:
            out[key] = float(v) - c.max if c.max is not None else c.min - float(v)
    return out


def feasible(search: SearchSpec, summary: dict[str, Any]) -> bool:
    return all(v <= 0 for v in constraint_values(search, summary).values())
