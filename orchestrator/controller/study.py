"""The Optuna study behind a sweep: sampler choice, objectives, SLO constraints, stale-trial cleanup.

The study lives in the same database as the results (Optuna's own tables beside ours), named after the
sweep. Known Optuna 5.0 traps handled here: heartbeats do not work with ask/tell, so trials left RUNNING by
a dead controller are failed by us on resume; GridSampler's last `tell` raises, so grid points are added as
finished trials under a RandomSampler instead. Only Optuna's public API is used.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import optuna
from optuna.trial import TrialState

from ..records import TrialSummary
from ..spec import LoadedSpec
from ..spec.models import SearchSpec

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def make_sampler(search: SearchSpec) -> optuna.samplers.BaseSampler:
    s = search.sampler
    if s in ("grid", "random", "capacity"):  # grid and capacity choose their own points: never asked
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
    stale = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for t in stale:
        study.tell(t.number, state=TrialState.FAIL)
    return len(stale)


def objective_values(search: SearchSpec, summary: TrialSummary) -> list[float] | None:
    """Objective values of a completed trial, or None when one is missing (then told FAIL)."""
    values = []
    for o in search.objectives:
        v = summary.metric(o.metric)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return None
        values.append(float(v))
    return values


def constraint_values(search: SearchSpec, summary: TrialSummary) -> dict[str, float]:
    """SLO constraints as Optuna wants them: feasible when <= 0. A missing metric counts as violated."""
    out = {}
    for c in search.constraints:
        v = summary.metric(c.metric)
        key = f"{c.metric}<={c.max}" if c.max is not None else f"{c.metric}>={c.min}"
        if v is None:
            out[key] = 1.0
        else:
            out[key] = float(v) - c.max if c.max is not None else float(c.min or 0.0) - float(v)
    return out


def feasible(search: SearchSpec, summary: TrialSummary) -> bool:
    return all(v <= 0 for v in constraint_values(search, summary).values())


class StudyBook:
    """The sweep's Optuna study and the mapping between its trial numbers and sweep_trials rows.

    Asked trials are told; grid points (never asked) are added as finished trials with `Study.add_trial`.
    Trial numbers are sequential per study, and one controller at a time writes a sweep's study, so the
    number of an added trial is the count of trials before it (no private storage call needed)."""

    def __init__(self, study: optuna.Study, search: SearchSpec, distributions: Callable[[dict[str, Any]], dict[str, Any]],
                 retry: Callable[[Callable[[], Any]], Any] = lambda operation: operation()):
        self.study, self.search, self.distributions = study, search, distributions
        self.retry = retry  # the store's outage policy (store/outage.py): Optuna's storage is the same database
        self.row_of_number: dict[int, int] = {}  # Optuna trial number -> sweep_trials row id
        self._next_number = len(self._trials())

    def _trials(self) -> list[optuna.trial.FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    def ask(self) -> optuna.Trial:
        trial: optuna.Trial = self.retry(self.study.ask)
        self._next_number = trial.number + 1
        return trial

    def enqueue(self, params: dict[str, Any]) -> None:
        self.retry(lambda: self.study.enqueue_trial(params, skip_if_exists=False))

    def tell(self, handle: optuna.Trial | None, params: dict[str, Any], row_id: int,
             summary: TrialSummary | None) -> int:
        """Report a finished trial (asked: `handle`; a grid point: None) and return its trial number.
        A failed or objective-less trial is FAIL."""
        values = objective_values(self.search, summary) if summary is not None else None
        constraints = constraint_values(self.search, summary) if summary is not None else {}
        if handle is not None:
            asked = handle

            def tell() -> None:
                for key, value in constraints.items():
                    asked.set_constraint(key, value)
                if values is None:
                    self.study.tell(asked, state=TrialState.FAIL)
                else:
                    self.study.tell(asked, values if len(values) > 1 else values[0])

            self._write_once(tell, done=lambda: self._trials()[asked.number].state.is_finished())
            number = handle.number
        else:
            frozen = optuna.trial.create_trial(
                state=TrialState.COMPLETE if values is not None else TrialState.FAIL, values=values, params=params,
                distributions=self.distributions(params), constraints=constraints or None)
            number = self._next_number
            self._write_once(lambda: self.study.add_trial(frozen), done=lambda: len(self._trials()) > number)
            self._next_number += 1
        self.row_of_number[number] = row_id
        return number

    def told_number(self, params: dict[str, Any]) -> int | None:
        """The number of a finished trial of the study with exactly these parameters (grid points are unique)."""
        trials = self.retry(self._trials)
        return next((t.number for t in trials if t.state.is_finished() and t.params == params), None)

    def _write_once(self, write: Callable[[], None], done: Callable[[], bool]) -> None:
        """`write()` through the store's outage policy. Only a retry reads the study first: an attempt whose commit
        was not acknowledged may have written already (`done()`), and then nothing is written twice."""
        attempts = 0

        def attempt() -> None:
            nonlocal attempts
            attempts += 1
            if attempts == 1 or not done():
                write()

        self.retry(attempt)

    def best_rows(self, stored_numbers: dict[int, int]) -> list[int]:
        """Row ids of the study's best trials (the Pareto front with several objectives). `stored_numbers`:
        trial number -> row id as stored (this run's own numbers take precedence)."""
        try:
            front = self.retry(lambda: self.study.best_trials)
        except Exception:  # e.g. no completed trial yet
            front = []
        rows = {**stored_numbers, **self.row_of_number}
        return [rows[t.number] for t in front if t.number in rows]
