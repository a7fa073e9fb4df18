"""Reconciling a sweep's plan with the rows already stored (resume): which points run now, which were done
before, which rows are re-queued, which paired baselines exist, which finished trials Optuna was never told.
Nothing here talks to Ray; Optuna only through the StudyBook."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..records import TrialSummary
from ..states import QUEUED, BaselineState, TrialRole, TrialState
from ..store import Store, TrialRow
from .plan import SearchSpace, point_key
from .pool import TrialRun
from .study import StudyBook


def requeue_orphans(store: Store, sweep_id: int) -> int:
    """Rows a dead controller left RUNNING go back to PENDING (attempt + 1) and run again: they never
    finished, through no fault of their own. Only the sweep's lease holder calls this, so no live controller
    is running them."""
    running = [r.id for r in store.trials(sweep_id) if r.state == TrialState.RUNNING]
    store.requeue_trials(running, "previous attempt interrupted (its controller died); runs again")
    return len(running)


@dataclass
class GridWork:
    runs: list[TrialRun]  # every point to run now, each planned once
    skipped: int  # points done before


def reconcile_grid(store: Store, sweep_id: int, space: SearchSpace, n_trials: int | None, paired_baseline: bool,
                   retry_failed: bool) -> GridWork:
    """Rows for every grid point (and the paired baselines it lacks), PENDING ones and failed ones (with
    `retry_failed`) queued again, and each speculative point linked to its baseline."""
    rows = store.trials(sweep_id)
    by_key = {r.point_key: r for r in rows}
    points = space.grid()
    if n_trials:
        points = points[:n_trials]
    pairs, baselines = space.grid_baselines(points, paired_baseline)
    roles = {point_key(p): TrialRole.PAIRED_BASELINE for p in baselines}
    queue: list[tuple[dict[str, Any], int | None]] = []  # (params, existing row id)
    skipped = 0
    for params in points + baselines:
        row = by_key.get(point_key(params))
        if row is None:
            queue.append((params, None))
        elif row.state == TrialState.PENDING or (row.state == TrialState.FAIL and retry_failed):
            if row.state == TrialState.FAIL:
                store.requeue_trial(row.id)
            queue.append((params, row.id))
        else:
            skipped += 1
    planned = [space.planned_trial(p) for p, _ in queue]
    new_ids = iter(store.add_trials(sweep_id, [pl.new_trial(p, roles.get(point_key(p), TrialRole.SEARCH))
                                               for (p, rid), pl in zip(queue, planned) if rid is None]))
    runs = [TrialRun(trial_id=rid if rid is not None else next(new_ids), planned=pl, params=p,
                     role=roles.get(point_key(p), TrialRole.SEARCH))
            for (p, rid), pl in zip(queue, planned)]
    ids = {r.point_key: r.id for r in store.trials(sweep_id)}
    for key, base_key in pairs.items():
        stored = by_key.get(key)
        if key in ids and base_key in ids and (stored is None or stored.baseline_trial_id != ids[base_key]):
            store.link_baseline(ids[key], ids[base_key])
    return GridWork(runs=runs, skipped=skipped)


@dataclass
class AdaptiveWork:
    target: int  # trials to ask for in this run
    skipped: int  # trials done before
    retry_params: list[dict[str, Any]] = field(default_factory=list)  # failed points asked again first (enqueued)
    retry_rows: list[int] = field(default_factory=list)  # their rows, in the same order
    completed: dict[str, TrialRow] = field(default_factory=dict)  # point key -> COMPLETE row (answered from the store)
    baseline_rows: dict[str, tuple[int, BaselineState]] = field(default_factory=dict)  # baseline key -> (row id, state)
    leftover_baselines: list[TrialRow] = field(default_factory=list)  # PENDING paired baselines: measured first


def reconcile_adaptive(store: Store, sweep_id: int, n_trials: int | None, retry_failed: bool) -> AdaptiveWork:
    rows = store.trials(sweep_id)
    done = sum(1 for r in rows if r.state in (TrialState.COMPLETE, TrialState.FAIL))
    retry = [r for r in rows if r.state == TrialState.FAIL and r.role == TrialRole.SEARCH] if retry_failed else []
    for r in retry:
        store.requeue_trial(r.id)
    # asked before but never finished (interrupted, or left by a dead controller): asked again first
    pending = [r for r in rows if r.state == TrialState.PENDING and r.role == TrialRole.SEARCH]
    again = retry + pending
    work = AdaptiveWork(target=max(len(pending), (n_trials or 20) - done) + len(retry), skipped=done - len(retry),
                        retry_params=[r.params for r in again], retry_rows=[r.id for r in again],
                        completed={r.point_key: r for r in rows if r.state == TrialState.COMPLETE})
    for r in rows:  # paired baselines left over (their trials were asked before): measured first
        if r.role != TrialRole.PAIRED_BASELINE:
            continue
        if r.state == TrialState.PENDING or (r.state == TrialState.FAIL and retry_failed):
            if r.state == TrialState.FAIL:
                store.requeue_trial(r.id)
            work.baseline_rows[r.point_key] = (r.id, QUEUED)
            work.leftover_baselines.append(r)
        else:
            work.baseline_rows[r.point_key] = (r.id, r.state)
    return work


def tell_untold(store: Store, sweep_id: int, book: StudyBook, stored_summary: Callable[[int], TrialSummary]) -> None:
    """Grid trials a stopped controller finished but never told Optuna (it stopped between the two writes:
    killed, or the store became unreachable): told now, so no finished trial is missing from the study."""
    for r in store.trials(sweep_id):
        if r.role != TrialRole.SEARCH or r.optuna_trial_number is not None or r.state not in (
                TrialState.COMPLETE, TrialState.FAIL):
            continue
        number = book.told_number(r.params)  # told, but its number not stored
        if number is None:
            number = book.tell(None, r.params, r.id, stored_summary(r.id) if r.state == TrialState.COMPLETE else None)
        store.update_trial(r.id, optuna_trial_number=number)
