"""Run a sweep: prepare (every input checked before anything is written), reconcile with stored rows, then
one loop that hands a strategy's trials to the engine pool and records what comes back.

The pieces, each in its own module: plan.py (the search space), resume.py (stored rows -> work),
strategies.py (grid / rotated / adaptive scheduling), pool.py (engines in Ray actors), record.py (a finished
trial -> store -> Optuna), pairing.py (paired baselines), study.py (Optuna), events.py (what the caller hears).

One controller per sweep: the run holds the sweep's lease (lease.py) from before its first write to its
end; a second controller of the same sweep is refused (LeaseHeld), a dead one's lease is taken over.

Resume: running a sweep name that exists continues it. Completed trials are never re-run; trials a dead
controller left RUNNING, and trials an interrupted run was measuring, go back to PENDING and run again;
trials that failed on their own merit stay FAIL unless `retry_failed`. The sweep is `complete` only when
every trial is COMPLETE. A different spec under the same name is refused with the list of changed fields.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import StoreLeaseLost
from ..records import OpenLoopLoad, SloThresholds, TrialSummary
from ..spec import LoadedSpec
from ..spec.models import SweepSpec
from ..states import SweepStatus, TrialState
from ..store import Store
from . import events as ev
from .capacity import CapacityResult, CapacityStrategy, capacity_record
from .lease import Lease
from .pairing import Baselines, PairingSettings
from .pool import (
    EnginePool,
    EngineSlot,
    PoolEvent,
    RunDone,
    RunFailed,
    SlotFailed,
    SlotReady,
    SlotRetired,
    SlotStarting,
    TrialRun,
    WindowSettings,
    WindowStarted,
)
from .prepare import Prepared, prepare
from .ray_session import ensure_ray
from .record import TrialRecorder
from .resources import engine_actor_class, max_engines
from .resume import reconcile_adaptive, reconcile_grid, requeue_orphans, tell_untold
from .strategies import AdaptiveStrategy, GridStrategy
from .study import StudyBook, fail_stale_trials, open_study


class Interrupted(Exception):
    """SIGTERM or Ctrl-C during a sweep."""


class LeaseLost(Interrupted):
    """Another controller broke this run's lease: the sweep's rows are no longer ours to write."""


# why a rotated trial caught between rounds by search.timeout_s is PENDING again (its `error` until it runs)
TIMED_OUT_NOTE = "search.timeout_s reached between its windows; runs again"


@dataclass
class RunOutcome:
    sweep_id: int
    sweep: str = ""
    completed: int = 0
    failed: int = 0
    skipped: int = 0
    baselines: int = 0  # paired baselines measured (trials the controller added, not the sampler)
    reused: int = 0  # adaptive samplers: a point measured before, told again without running
    engine_starts: int = 0
    engine_start_s: float = 0.0  # part of wall_s spent waiting for engines to start (sum over starts)
    ray_init_s: float = 0.0  # part of wall_s spent connecting to / starting Ray
    interrupted: bool = False
    wall_s: float = 0.0
    states: dict[TrialState, int] = field(default_factory=dict)  # every trial of the sweep, by state, at the end

    @property
    def total(self) -> int:
        return sum(self.states.values())

    @property
    def all_complete(self) -> bool:
        """Every trial of the sweep is COMPLETE: the only outcome that exits 0."""
        return self.total == self.states.get(TrialState.COMPLETE, 0)


class _SignalGuard:
    """SIGTERM / SIGHUP / Ctrl-C during a sweep set a flag that the scheduling loop checks between waits (raising
    inside Ray's blocking calls corrupts them). A second Ctrl-C raises KeyboardInterrupt at once."""

    def __init__(self) -> None:
        self.why: str | None = None
        self.previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> "_SignalGuard":
        def handler(signum: int, frame: object) -> None:
            if self.why is not None and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.why = signal.Signals(signum).name

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            try:
                self.previous[sig] = signal.signal(sig, handler)
            except ValueError:  # not the main thread: leave signals alone
                pass
        return self

    def check(self, lease: Lease | None = None) -> None:
        if self.why is not None:
            raise Interrupted(self.why)
        if lease is not None and lease.lost.is_set():
            raise LeaseLost("the sweep's lease was taken by another controller (--break-lease): stopping")

    def __exit__(self, *exc: object) -> Literal[False]:
        for sig, prev in self.previous.items():
            signal.signal(sig, prev)
        return False


class SweepController:
    """One sweep's run: ties the strategy, the pool and the recorder together."""

    def __init__(self, loaded: LoadedSpec, store: Store, name: str, emit: ev.Listener, retry_failed: bool,
                 prepared: Prepared, t_start: float, lease: Lease):
        self.loaded, self.store, self.name, self.emit = loaded, store, name, emit
        self.spec, self.retry_failed, self.p, self.lease = loaded.spec, retry_failed, prepared, lease
        self.t_start = t_start  # wall_s and search.timeout_s count from before the checks
        study = open_study(loaded, store.url, f"specsweep:{name}")  # before the sweep row: nothing half-made
        fail_stale_trials(study)
        existing = store.get_sweep(name)
        if existing:
            self.sweep_id = existing.id
            store.set_sweep_status(self.sweep_id, SweepStatus.RUNNING)
        else:
            self.sweep_id = store.create_sweep(name, loaded.spec_hash, self.spec.model_dump(mode="json"), loaded.path)
        self.outcome = RunOutcome(sweep_id=self.sweep_id, sweep=name)
        orphans = requeue_orphans(store, self.sweep_id)
        if orphans:
            emit(ev.Note(f"{orphans} trials a dead controller left RUNNING go back to PENDING and run again"))
        warn = lambda message: emit(ev.SweepWarning(message))  # noqa: E731
        self.book = StudyBook(study, self.spec.search, prepared.space.distributions, retry=store.db.retry)
        self.baselines = Baselines(store, self.sweep_id, PairingSettings(
            prepared.sampling.temperature, self.spec.measurement, self.spec.search.seed), warn)
        self.recorder = TrialRecorder(store, self.spec, prepared.sampling.max_tokens, prepared.sampling.ignore_eos,
                                      self.book, self.baselines, warn)
        self.strategy = self._strategy()

    def _strategy(self) -> GridStrategy | AdaptiveStrategy | CapacityStrategy:
        s, m = self.spec.search, self.spec.measurement
        if s.sampler == "capacity":
            return CapacityStrategy(self.store, self.p.space, sweep_id=self.sweep_id, settings=s.capacity,
                                    repeats=m.repeats, with_baseline=m.paired_baseline,
                                    retry_failed=self.retry_failed, on_result=self._capacity_found)
        if s.sampler == "grid":
            grid = reconcile_grid(self.store, self.sweep_id, self.p.space, s.n_trials, m.paired_baseline,
                                  self.retry_failed)
            self.outcome.skipped = grid.skipped
            tell_untold(self.store, self.sweep_id, self.book, self._stored_summary)
            return GridStrategy(grid.runs, m.repeats, rotated=m.order == "rotated" and m.repeats > 1)
        work = reconcile_adaptive(self.store, self.sweep_id, s.n_trials, self.retry_failed)
        self.outcome.skipped = work.skipped
        deadline = self.t_start + s.timeout_s if s.timeout_s else None
        return AdaptiveStrategy(self.book, self.p.space, self.recorder, self.baselines, work, sweep_id=self.sweep_id,
                                repeats=m.repeats, paired_baseline=m.paired_baseline, deadline=deadline,
                                stored_summary=self._stored_summary)

    def _capacity_found(self, result: CapacityResult) -> None:
        """A configuration's capacity search ended: store it, say it."""
        s = self.spec
        planned = self.p.space.planned_trial({**result.config, "request_rate": result.probes[0].rate}) \
            if result.probes else None
        slo = s.measurement.slo
        assert slo is not None  # the capacity sampler needs measurement.slo (spec/models.py)
        self.store.save_capacity(self.sweep_id, capacity_record(result, planned, s.search.capacity.target_attainment,
                                                             slo.model_dump(exclude_none=True)))
        self.emit(ev.CapacityFound(label=result.config["method"], k=planned.point.num_speculative_tokens if planned else None,
                                   dataset=result.config["dataset"], status=result.status,
                                   max_rate_within_slo=result.max_rate_within_slo,
                                   first_failing_rate=result.first_failing_rate, probes=len(result.probes)))

    def _stored_summary(self, trial_id: int) -> TrialSummary:
        return self.store.trial_result(trial_id).summary()

    # ---- the loop ---------------------------------------------------------------------------------
    def run(self, ray_address: str | None) -> RunOutcome:
        self.emit(ev.SweepPlanned(sweep=self.name, sweep_id=self.sweep_id, sampler=self.spec.search.sampler,
                                  todo=self.strategy.todo, skipped=self.outcome.skipped,
                                  engines=self.strategy.engines, store=self.store.display_url))
        if self.strategy.todo == 0:
            return self._finish()
        t_ray = time.perf_counter()
        self.emit(ev.RayConnected(ensure_ray(ray_address)))
        self.outcome.ray_init_s = time.perf_counter() - t_ray
        pool = self._pool()
        self.emit(ev.PoolSized(pool.max_engines))
        try:
            with _SignalGuard() as guard:
                self._loop(pool, guard)
        except (LeaseLost, StoreLeaseLost) as e:
            pool.interrupt(str(e))  # engines killed; the rows belong to the controller that took the lease
            self.outcome.interrupted = True
            self.emit(ev.SweepInterrupted(str(e)))
            return self.outcome
        except (KeyboardInterrupt, Interrupted) as e:
            return self._interrupted(pool, str(e) or "Ctrl-C")
        except BaseException:  # a bug or a lost database: never leave the sweep saying `running`
            try:
                self.store.set_sweep_status(self.sweep_id, SweepStatus.INTERRUPTED)
            except Exception:
                pass
            raise
        finally:
            pool.shutdown()
        self.outcome.engine_starts = pool.engine_starts
        return self._finish()

    def _pool(self) -> EnginePool:
        import ray

        m = self.spec.measurement
        return EnginePool(
            engine_actor_class(self.loaded), max_engines=max_engines(self.loaded), repeats=m.repeats,
            start_timeout_s=self.spec.engine.start_timeout_s, trial_timeout_s=m.trial_timeout_s,
            window=window_settings(self.spec),
            actor_args=(ray.put(self.p.prompts), self.p.sampling))

    def _loop(self, pool: EnginePool, guard: _SignalGuard) -> None:
        timeout_s = self.spec.search.timeout_s
        deadline = self.t_start + timeout_s if timeout_s else None
        timed_out = False
        while True:
            guard.check(self.lease)
            if not timed_out:
                for run in self.strategy.next_runs(pool):
                    self._handle(pool.submit(run))
            if deadline is not None and not timed_out and time.perf_counter() >= deadline:
                # wall-clock budget spent: running trials finish, nothing new starts (a grid has submitted every
                # trial at once, so this is checked whether or not the strategy has more to give)
                timed_out = True
                self._time_is_up(pool)
            if self.strategy.exhausted(pool):
                pool.closing = True
            if not pool.busy:
                if timed_out:  # windows that finished after the deadline
                    self._requeue_between_rounds(pool, TIMED_OUT_NOTE)
                    self.strategy.waiting.clear()
                return
            self._handle(pool.step(wait_s=0.5))
            guard.check(self.lease)

    def _time_is_up(self, pool: EnginePool) -> None:
        """search.timeout_s: trials not yet dispatched stay PENDING; rotated trials between rounds (some windows
        measured) go back to PENDING and run whole on the next run."""
        left = len({run.trial_id for run in list(pool.pending) + self.strategy.waiting})
        if left:
            self.emit(ev.SweepWarning(f"search.timeout_s reached: {left} trials left PENDING (run again to continue)"))
        self._requeue_between_rounds(pool, TIMED_OUT_NOTE)
        self.strategy.waiting.clear()
        pool.pending.clear()
        pool.closing = True

    def _requeue_between_rounds(self, pool: EnginePool, note: str) -> None:
        """Rotated trials between rounds (RUNNING in the store, some windows measured) go back to PENDING: the
        windows are lost with them, the trial runs whole again."""
        for run in list(pool.pending) + self.strategy.waiting:
            if run.windows:
                self.store.requeue_trial(run.trial_id, note)

    def _interrupted(self, pool: EnginePool, why: str) -> RunOutcome:
        """Engines killed; trials being measured, and rotated trials between rounds, go back to PENDING (their
        windows are lost with them) and run again on resume; asked trials are told FAIL to Optuna."""
        measuring = [pe.run for pe in pool.interrupt(why) if isinstance(pe, RunFailed)]
        note = f"previous attempt interrupted ({why}); runs again"
        for run in measuring:
            self.store.requeue_trial(run.trial_id, note)
        self._requeue_between_rounds(pool, note)
        for run in measuring + pool.pending + self.strategy.waiting:
            if run.handle is not None:
                self.recorder.tell(run, None)
        self.outcome.interrupted = True
        self.outcome.engine_starts = pool.engine_starts
        self.store.set_sweep_status(self.sweep_id, SweepStatus.INTERRUPTED)
        self._count()
        self.emit(ev.SweepInterrupted(why))
        return self.outcome

    # ---- pool events ------------------------------------------------------------------------------
    def _handle(self, pool_events: list[PoolEvent]) -> None:
        for pe in pool_events:
            self._on_event(pe)

    def _on_event(self, pe: PoolEvent) -> None:
        match pe:
            case SlotStarting(slot):
                self.emit(ev.EngineStarting(slot.engine.method_label, slot.config_hash))
            case SlotReady(slot):
                self._engine_ready(slot)
            case SlotFailed(slot, error):
                self.emit(ev.EngineFailed(slot.engine.method_label, error))
            case SlotRetired(slot):
                self.emit(ev.EngineRetired(slot.engine.method_label, slot.served))
            case WindowStarted(run, slot):
                if not run.windows:
                    self.store.mark_running(run.trial_id, slot.environment_id, run.engine_start_s,
                                            slot.started.pid if slot.started else None,
                                            (run.dispatched_at or run.queued_at) - run.queued_at)
                self.emit(ev.TrialStarted(_ref(run), window=len(run.windows) + 1))
            case RunDone(run, _):
                if not self.strategy.window_done(run):  # rotated: more rounds to come
                    self.emit(ev.WindowDone(_ref(run), windows=len(run.windows)))
                    return
                summary, flags = self.recorder.completed(run)
                self.emit(ev.TrialDone(_ref(run), summary, tuple(flags)))
                self.strategy.finished(run, summary)
            case RunFailed(run, error, _):
                self.recorder.failed(run, error)
                self.emit(ev.TrialFailed(_ref(run), error))
                self.strategy.finished(run, None)

    def _engine_ready(self, slot: EngineSlot) -> None:
        started = slot.started
        assert started is not None and slot.start_wall_s is not None  # set by the pool before SlotReady
        slot.environment_id = self.store.environment_id({
            **started.fingerprint, "workload_hash": self.p.workload_hash,
            "spec_hash": self.loaded.spec_hash, "specsweep_commit": self.p.commit})
        fp = started.fingerprint
        self.outcome.engine_start_s += slot.start_wall_s
        self.emit(ev.EngineReady(slot.engine.method_label, slot.start_wall_s, fp.get("dtype"), fp.get("dtype_reason"),
                                 started.log_path))

    def _count(self) -> None:
        t = self.recorder.tally
        o = self.outcome
        o.completed, o.failed, o.baselines, o.reused = t.completed, t.failed, t.baselines, t.reused
        o.states = self.store.trial_states(self.sweep_id)
        o.wall_s = time.perf_counter() - self.t_start

    def _finish(self) -> RunOutcome:
        self.baselines.pair_missing(self.store.trials(self.sweep_id))
        rows = self.store.trials(self.sweep_id)
        stored_numbers = {r.optuna_trial_number: r.id for r in rows if r.optuna_trial_number is not None}
        self.store.set_pareto_front(self.sweep_id, self.book.best_rows(stored_numbers))
        self._count()
        states = self.outcome.states
        if self.outcome.all_complete:
            status = SweepStatus.COMPLETE
        elif states.get(TrialState.PENDING) or states.get(TrialState.RUNNING):
            status = SweepStatus.INCOMPLETE  # e.g. search.timeout_s reached: run again to continue
        else:
            status = SweepStatus.FAILED
        self.store.set_sweep_status(self.sweep_id, status)
        return self.outcome


def window_settings(spec: SweepSpec) -> WindowSettings:
    """How every window of the sweep is taken, from the spec's measurement and workload sections."""
    m, w = spec.measurement, spec.workload
    slo = None if m.slo is None else SloThresholds(ttft_ms=m.slo.ttft_ms, tpot_ms=m.slo.tpot_ms, e2e_ms=m.slo.e2e_ms)
    return WindowSettings(m.warmup_requests, m.request_timeout_s, m.discard_first_window, slo=slo,
                          arrival=OpenLoopLoad(request_rate=1.0, arrival=w.arrival, burstiness=w.burstiness,
                                               seed=w.seed, max_concurrency=w.max_concurrency,
                                               schedule=w.schedule))


def _ref(run: TrialRun) -> ev.TrialRef:
    return ev.TrialRef(trial_id=run.trial_id, label=run.planned.point.label,
                       k=run.planned.point.num_speculative_tokens, concurrency=run.planned.concurrency,
                       dataset=run.planned.dataset, request_rate=run.planned.request_rate)


def run_sweep(loaded: LoadedSpec, store: Store, *, ray_address: str | None = None, emit: ev.Listener = ev.ignore,
              retry_failed: bool = False, new_name: str | None = None, break_lease: bool = False,
              lease_timeout_s: float | None = None) -> RunOutcome:
    """Run (or resume) a sweep. Raises SpecError / ModelError before anything is written, LeaseHeld when
    another live controller runs the sweep."""
    t_start = time.perf_counter()
    name = new_name or loaded.spec.name
    prepared = prepare(loaded, store, name, emit)
    store.db.outage.listener = emit  # one line when the store becomes unreachable, one when it is back
    try:
        with Lease(store, f"sweep:{name}", f"sweep {name!r}", timeout_s=lease_timeout_s, force=break_lease,
                   note=lambda message: emit(ev.Note(message))) as lease:
            return SweepController(loaded, store, name, emit, retry_failed, prepared, t_start, lease).run(ray_address)
    finally:
        store.db.outage.listener = None  # the sweep's console is closed after it
