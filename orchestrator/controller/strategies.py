"""Scheduling strategies: which trials go to the engine pool, and when. Each has

  next_runs(pool)     the trials to submit now (a generator: the loop submits each before the next is made,
                      so an adaptive strategy sees the pool fill up as it asks)
  window_done(run)    a dispatch of `run` finished; False when the trial needs more windows later
  exhausted(pool)     nothing more will be submitted (the pool may retire idle engines)
  finished(run, summary)  a trial was recorded (summary None: it failed); the capacity search steers by it
  waiting             trials held back for a later round (failed or released on interrupt)

Grid: every point at once, so an engine serves all load points of its configuration; with rotated repeats
each round measures one window of every trial (warm engine's configuration first) before the next round.
Adaptive (random/tpe/gp/nsga2): one trial per free engine slot, asked from Optuna, with its paired baseline.
Capacity: capacity.py.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator

from ..records import TrialSummary
from ..states import TrialRole
from .pairing import Baselines
from .plan import SearchSpace, point_key
from .pool import EnginePool, TrialRun
from .record import TrialRecorder
from .resume import AdaptiveWork
from .study import StudyBook


def _in_pool(pool: EnginePool) -> list[TrialRun]:
    return list(pool.pending) + [s.run for s in pool.slots if s.run is not None]


class GridStrategy:
    def __init__(self, runs: list[TrialRun], repeats: int, rotated: bool):
        self.runs, self.repeats, self.rotated = runs, repeats, rotated
        self.todo = len(runs)
        self.engines = len({r.config_hash for r in runs})
        self.waiting: list[TrialRun] = []  # rotated: trials waiting for the next round of windows
        self._submitted = False

    def next_runs(self, pool: EnginePool) -> Iterator[TrialRun]:
        if not self._submitted:
            self._submitted = True
            for run in self.runs:
                run.windows_wanted = 1 if self.rotated else self.repeats
                yield run
        elif self.rotated and self.waiting and not pool.pending and not any(s.state == "busy" for s in pool.slots):
            # a round is over: every trial's next window
            batch, self.waiting = self.waiting, []
            for run in batch:
                run.windows_wanted = len(run.windows) + 1
                yield run

    def window_done(self, run: TrialRun) -> bool:
        if len(run.windows) < self.repeats:
            self.waiting.append(run)
            return False
        return True

    def finished(self, run: TrialRun, summary: TrialSummary | None) -> None:
        pass

    def exhausted(self, pool: EnginePool) -> bool:
        return self._submitted and not (self.rotated and (self.waiting or any(
            (r.windows_wanted or 0) < self.repeats for r in _in_pool(pool))))


class AdaptiveStrategy:
    def __init__(self, book: StudyBook, space: SearchSpace, recorder: TrialRecorder, baselines: Baselines,
                 work: AdaptiveWork, *, sweep_id: int, repeats: int, paired_baseline: bool, deadline: float | None,
                 stored_summary: Callable[[int], TrialSummary]):
        self.book, self.space, self.recorder, self.baselines = book, space, recorder, baselines
        self.work, self.sweep_id, self.repeats = work, sweep_id, repeats
        self.paired_baseline, self.deadline, self.stored_summary = paired_baseline, deadline, stored_summary
        self.store = recorder.store
        self.todo = work.target
        self.engines = None  # not known up front
        self.waiting: list[TrialRun] = []
        self.asked = 0
        self._queued_rows = list(work.retry_rows)
        for params in work.retry_params:  # retried points go first, through ask()
            book.enqueue(params)
        for key, (rid, state) in work.baseline_rows.items():
            baselines.known(key, rid, state)

    def next_runs(self, pool: EnginePool) -> Iterator[TrialRun]:
        while self.work.leftover_baselines:  # a resumed sweep's unmeasured baselines: their trials wait for them
            row = self.work.leftover_baselines.pop(0)
            yield TrialRun(trial_id=row.id, planned=self.space.planned_trial(row.params), params=row.params,
                           role=TrialRole.PAIRED_BASELINE, windows_wanted=self.repeats)
        while self.asked < self.work.target and (self.deadline is None or time.perf_counter() < self.deadline) \
                and pool.in_flight < pool.max_engines:
            trial = self.book.ask()
            params = self.space.suggest(trial)
            self.asked += 1
            row_id = self._queued_rows.pop(0) if self._queued_rows else None
            stored = self.work.completed.get(point_key(params))
            if row_id is None and stored is not None:
                # measured before: tell the stored result instead of spending engine time
                self.recorder.tell(TrialRun(trial_id=stored.id, planned=self.space.planned_trial(params),
                                            params=params, handle=trial), self.stored_summary(stored.id))
                self.recorder.tally.reused += 1
                continue
            planned = self.space.planned_trial(params)
            if row_id is None:
                (row_id,) = self.store.add_trials(self.sweep_id, [planned.new_trial(params)])
            self.store.update_trial(row_id, optuna_trial_number=trial.number)
            run = TrialRun(trial_id=row_id, planned=planned, params=params, handle=trial, windows_wanted=self.repeats)
            yield run
            yield from self._baseline_for(run)

    def _baseline_for(self, run: TrialRun) -> Iterator[TrialRun]:
        """The asked trial's paired baseline is measured too (once per load point)."""
        bp = self.space.baseline_params(run.params)
        if bp is None or not self.paired_baseline:
            return
        planned = self.space.planned_trial(bp)
        rid, measure = self.baselines.claim(
            point_key(bp), lambda: self.store.add_trials(self.sweep_id, [planned.new_trial(bp, TrialRole.PAIRED_BASELINE)])[0])
        self.store.link_baseline(run.trial_id, rid)
        if measure:
            yield TrialRun(trial_id=rid, planned=planned, params=bp, role=TrialRole.PAIRED_BASELINE,
                           windows_wanted=self.repeats)

    def window_done(self, run: TrialRun) -> bool:
        return len(run.windows) >= self.repeats

    def finished(self, run: TrialRun, summary: TrialSummary | None) -> None:
        pass  # Optuna hears of it through the recorder

    def exhausted(self, pool: EnginePool) -> bool:
        return self.asked >= self.work.target
