"""Engine pool and scheduler: Ray actors keyed by engine configuration, at most `max_engines` at once.

Policy (GPU time goes to measurement, not engine starts):
- a warm engine serves every pending trial of its configuration before it is retired;
- a free slot starts the configuration with the most pending trials (longest work first);
- an idle engine whose configuration has nothing pending is retired only when another configuration needs
  its slot, or when the controller says no more trials will come (an adaptive sampler may ask again);
- an engine that fails to start fails every trial of its configuration, and later trials of it at once;
- an actor that dies mid-trial fails that trial; the configuration's other trials get a fresh actor;
- a trial running past its timeout is failed and its engine killed.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import ray

from ..engines.base import EngineConfig
from ..records import EngineStarted, MeasureRequest, OpenLoopLoad, SloThresholds, WindowResult
from ..states import TrialRole
from .plan import PlannedTrial, rate_value


@dataclass
class TrialRun:
    trial_id: int  # row id in sweep_trials
    planned: PlannedTrial
    params: dict[str, Any] = field(default_factory=dict)  # the point's Optuna parameters
    handle: Any = None  # the Optuna trial when it came from ask(); None for grid points
    queued_at: float = field(default_factory=time.perf_counter)
    dispatched_at: float | None = None
    windows: list[WindowResult] = field(default_factory=list)
    engine_start_s: float | None = None
    role: TrialRole = TrialRole.SEARCH  # or PAIRED_BASELINE: added by the controller, never told to Optuna
    windows_wanted: int | None = None  # windows to measure in this dispatch (default: the pool's repeats)
    engine: EngineStarted | None = None  # the engine that served the last window

    @property
    def config_hash(self) -> str:
        return self.planned.engine.config_hash

    @property
    def warmup_s(self) -> float:
        return sum(w.warmup_s for w in self.windows)

    @property
    def measure_s(self) -> float:
        return sum(w.measure_s for w in self.windows)

    def measure_request(self, window: "WindowSettings") -> MeasureRequest:
        rate = self.planned.request_rate
        open_loop = None if rate is None else replace(window.arrival, request_rate=rate_value(rate))
        return MeasureRequest(dataset=self.planned.dataset, concurrency=self.planned.concurrency, open_loop=open_loop,
                              slo=window.slo, warmup_requests=window.warmup_requests,
                              request_timeout_s=window.request_timeout_s,
                              discard_first_window=window.discard_first_window,
                              # a baseline's first window: its top three per position, for the lossless check
                              score_top3=not self.windows and not self.planned.engine.speculative_config)


@dataclass(frozen=True)
class WindowSettings:
    """How every window of the sweep is taken (the spec's `measurement` section)."""

    warmup_requests: int = 0
    request_timeout_s: float = 600.0
    discard_first_window: bool = False
    slo: SloThresholds | None = None  # measurement.slo: goodput and attainment of every window
    # open-loop windows: the workload's arrival process (request_rate is each trial's own)
    arrival: OpenLoopLoad = field(default_factory=lambda: OpenLoopLoad(request_rate=1.0))


@dataclass
class EngineSlot:
    engine: EngineConfig
    actor: Any
    state: str  # starting | idle | busy | stopping (still holds its resources until killed)
    started_at: float
    start_ref: Any = None
    started: EngineStarted | None = None  # what the actor reported once its engine was up
    start_wall_s: float | None = None  # what the start cost as seen from here: spawn + imports + model load
    environment_id: int | None = None  # set by the controller when the engine is ready
    run: TrialRun | None = None
    measure_ref: Any = None
    stop_ref: Any = None
    deadline: float | None = None
    served: int = 0

    @property
    def config_hash(self) -> str:
        return self.engine.config_hash


# What the pool did or saw, as objects (the runner turns them into store writes and controller/events.py events).
@dataclass(frozen=True)
class SlotStarting:
    """An engine actor was created for the slot's configuration; its start is under way."""

    slot: EngineSlot


@dataclass(frozen=True)
class SlotReady:
    slot: EngineSlot


@dataclass(frozen=True)
class SlotFailed:
    """The engine failed to start (or timed out starting): its configuration's trials fail with it."""

    slot: EngineSlot
    error: str


@dataclass(frozen=True)
class SlotRetired:
    slot: EngineSlot


@dataclass(frozen=True)
class WindowStarted:
    """A trial's next window was handed to a ready engine."""

    run: TrialRun
    slot: EngineSlot


@dataclass(frozen=True)
class RunDone:
    """A trial's windows (all it wanted from this dispatch) were measured."""

    run: TrialRun
    slot: EngineSlot


@dataclass(frozen=True)
class RunFailed:
    run: TrialRun
    error: str
    slot: EngineSlot | None = None  # None: failed before reaching an engine


PoolEvent = SlotStarting | SlotReady | SlotFailed | SlotRetired | WindowStarted | RunDone | RunFailed


class EnginePool:
    def __init__(self, actor_cls: Any, *, max_engines: int, repeats: int, start_timeout_s: float,
                 trial_timeout_s: float, window: WindowSettings, actor_args: tuple[Any, ...] = ()):
        self.actor_cls = actor_cls
        self.actor_args = actor_args  # passed to every actor after its engine config (the workload)
        self.max_engines = max_engines
        self.repeats = repeats
        self.start_timeout_s = start_timeout_s
        self.trial_timeout_s = trial_timeout_s
        self.window = window
        self.slots: list[EngineSlot] = []
        self.pending: list[TrialRun] = []
        self.failed_configs: dict[str, str] = {}
        self.closing = False  # no more trials will be submitted: idle engines retire at once
        self.engine_starts = 0

    # ---- public -----------------------------------------------------------------------------------
    def submit(self, run: TrialRun) -> list[PoolEvent]:
        cause = self.failed_configs.get(run.config_hash)
        if cause is not None:
            return [RunFailed(run, f"engine failed to start: {cause}")]
        self.pending.append(run)
        return []

    @property
    def busy(self) -> bool:
        return bool(self.pending) or any(s.state in ("starting", "busy") for s in self.slots)

    @property
    def in_flight(self) -> int:
        """Trials pending or being measured (what an adaptive controller compares with max_engines)."""
        return len(self.pending) + sum(1 for s in self.slots if s.state == "busy")

    def step(self, wait_s: float = 1.0) -> list[PoolEvent]:
        """Dispatch what can be dispatched, wait up to `wait_s` for one result, handle what finished."""
        events = self._dispatch()
        refs = {}
        for s in self.slots:
            if s.state == "starting":
                refs[s.start_ref] = s
            elif s.state == "busy":
                refs[s.measure_ref] = s
            elif s.state == "stopping":
                refs[s.stop_ref] = s
        if refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=wait_s)
            for ref in ready:
                events += self._handle(refs[ref], ref)
        events += self._check_deadlines()
        # Hand the next trial to a freed engine now, before the caller's bookkeeping (store, Optuna).
        events += self._dispatch()
        return events

    def interrupt(self, why: str) -> list[PoolEvent]:
        """Fail running trials with `why` and kill every engine (Ctrl-C / SIGTERM)."""
        events: list[PoolEvent] = []
        for s in list(self.slots):
            if s.state == "busy" and s.run is not None:
                events.append(RunFailed(s.run, why, s))
            self._kill(s)
        return events

    def shutdown(self) -> None:
        for s in list(self.slots):
            self._kill(s)

    # ---- scheduling -------------------------------------------------------------------------------
    def _dispatch(self) -> list[PoolEvent]:
        events: list[PoolEvent] = []
        # 1. idle engines take pending trials of their configuration
        for s in self.slots:
            if s.state == "idle":
                run = next((r for r in self.pending if r.config_hash == s.config_hash), None)
                if run is not None:
                    self.pending.remove(run)
                    events.append(self._start_trial(s, run))
        # 2. configurations with pending trials and no engine: largest pending work first
        served = {s.config_hash for s in self.slots}
        waiting = Counter(r.config_hash for r in self.pending if r.config_hash not in served)
        for cfg_hash, _ in sorted(waiting.items(), key=lambda kv: -kv[1]):
            if len(self.slots) >= self.max_engines:
                # full: retire an idle engine nobody waits for; its slot frees once its stop returns
                victim = next((s for s in self.slots if s.state == "idle"
                               and not any(r.config_hash == s.config_hash for r in self.pending)), None)
                if victim is not None:
                    events.append(SlotRetired(victim))
                    self._retire(victim)
                break
            engine = next(r.planned.engine for r in self.pending if r.config_hash == cfg_hash)
            events.append(self._start_engine(engine))
        # 3. idle engines with nothing left to serve retire once no more trials will come
        if self.closing:
            for s in list(self.slots):
                if s.state == "idle" and not any(r.config_hash == s.config_hash for r in self.pending):
                    events.append(SlotRetired(s))
                    self._retire(s)
        return events

    def _start_engine(self, engine: EngineConfig) -> PoolEvent:
        actor = self.actor_cls.remote(engine, *self.actor_args)
        slot = EngineSlot(engine=engine, actor=actor, state="starting", started_at=time.perf_counter(),
                          deadline=time.perf_counter() + self.start_timeout_s)
        slot.start_ref = actor.start.remote()
        self.slots.append(slot)
        self.engine_starts += 1
        return SlotStarting(slot)

    def _start_trial(self, slot: EngineSlot, run: TrialRun) -> PoolEvent:
        run.dispatched_at = time.perf_counter()
        run.engine_start_s = slot.start_wall_s
        run.engine = slot.started
        slot.state, slot.run = "busy", run
        slot.deadline = run.dispatched_at + self.trial_timeout_s
        slot.measure_ref = slot.actor.measure.remote(run.measure_request(self.window))
        return WindowStarted(run, slot)

    def _handle(self, slot: EngineSlot, ref: Any) -> list[PoolEvent]:
        if slot.state == "stopping":
            self._kill(slot)
            return []
        if slot.state == "starting":
            try:
                slot.started = ray.get(ref)
            except Exception as e:
                return self._engine_failed(slot, error_text(e))
            slot.state, slot.start_ref, slot.deadline = "idle", None, None
            slot.start_wall_s = time.perf_counter() - slot.started_at
            return [SlotReady(slot)]
        run = slot.run
        assert run is not None  # a busy slot measures a run
        try:
            res = ray.get(ref)
        except Exception as e:  # actor died (RayActorError) or measure raised (RayTaskError)
            self._kill(slot)
            return [RunFailed(run, error_text(e), slot)]
        run.windows.append(replace(res, environment_id=slot.environment_id))
        if len(run.windows) < (run.windows_wanted or self.repeats):
            slot.measure_ref = slot.actor.measure.remote(run.measure_request(self.window))
            return []
        slot.state, slot.run, slot.measure_ref, slot.deadline = "idle", None, None, None
        slot.served += 1
        return [RunDone(run, slot)]

    def _engine_failed(self, slot: EngineSlot, cause: str) -> list[PoolEvent]:
        self.failed_configs[slot.config_hash] = cause
        self._kill(slot)
        events: list[PoolEvent] = [SlotFailed(slot, cause)]
        for run in [r for r in self.pending if r.config_hash == slot.config_hash]:
            self.pending.remove(run)
            events.append(RunFailed(run, f"engine failed to start: {cause}"))
        return events

    def _check_deadlines(self) -> list[PoolEvent]:
        now = time.perf_counter()
        events: list[PoolEvent] = []
        for s in list(self.slots):
            if s.deadline is None or now < s.deadline:
                continue
            if s.state == "starting":
                events += self._engine_failed(s, f"engine start timed out after {self.start_timeout_s:g} s")
            elif s.state == "stopping":
                self._kill(s)
            elif s.state == "busy" and s.run is not None:
                self._kill(s)
                events.append(RunFailed(s.run, f"trial timed out after {self.trial_timeout_s:g} s (engine killed)", s))
        return events

    def _retire(self, slot: EngineSlot) -> None:
        """Stop an idle engine without blocking the loop: it keeps its slot (and its GPU) until the stop
        returns or times out, then its process is killed."""
        slot.state = "stopping"
        slot.stop_ref = slot.actor.stop.remote()
        slot.deadline = time.perf_counter() + 30.0

    def _kill(self, slot: EngineSlot) -> None:
        if slot in self.slots:
            self.slots.remove(slot)
        try:
            ray.kill(slot.actor)  # a fresh process per configuration: vLLM does not free memory in-process
        except Exception:
            pass


def error_text(e: BaseException) -> str:
    if isinstance(e, ray.exceptions.RayTaskError):
        inner = getattr(e, "cause", None) or e
        return f"{type(inner).__name__}: {inner}".strip()[:4000]
    if isinstance(e, ray.exceptions.RayActorError):
        return f"engine actor died: {str(e).splitlines()[0] if str(e) else type(e).__name__}"[:4000]
    return f"{type(e).__name__}: {e}"[:4000]
