"""What a running sweep tells its caller, as objects. `orchestrator.render` turns them into console lines;
tests and other callers can collect them. Every event the controller emits is defined here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..records import TrialSummary
from ..store.outage import StoreReachable as StoreReachable  # the store's outage events (store/outage.py)
from ..store.outage import StoreUnreachable as StoreUnreachable


@dataclass(frozen=True)
class TrialRef:
    """Which trial an event is about, in the words a user reads."""

    trial_id: int
    label: str
    k: int | None
    concurrency: int
    dataset: str
    request_rate: float | str | None = None  # open loop: requests/s ("inf"); None: closed loop at `concurrency`

    @property
    def load(self) -> str:
        """`concurrency 4` or `rate 2/s`."""
        from .plan import load_text

        return load_text(self.concurrency, self.request_rate)


@dataclass(frozen=True)
class Note:
    message: str


@dataclass(frozen=True)
class SweepWarning:
    message: str


@dataclass(frozen=True)
class SweepPlanned:
    sweep: str
    sweep_id: int
    sampler: str
    todo: int  # trials this run will measure
    skipped: int  # trials done before (resume)
    engines: int | None  # engine configurations (known up front for grids)
    store: str  # the store's URL, credentials masked


@dataclass(frozen=True)
class RayConnected:
    description: str


@dataclass(frozen=True)
class PoolSized:
    max_engines: int


@dataclass(frozen=True)
class EngineStarting:
    label: str
    config_hash: str


@dataclass(frozen=True)
class EngineReady:
    label: str
    start_s: float
    dtype: str | None = None  # what the engine runs (`auto` resolved on its machine) ...
    dtype_reason: str | None = None  # ... and why
    log_path: str | None = None  # the engine's own output (None: on the console)


@dataclass(frozen=True)
class EngineFailed:
    label: str
    error: str


@dataclass(frozen=True)
class EngineRetired:
    label: str
    served: int


@dataclass(frozen=True)
class TrialStarted:
    trial: TrialRef
    window: int  # 1-based window number of this dispatch


@dataclass(frozen=True)
class WindowDone:
    """Rotated repeats: one window of a trial is measured; the next comes in the next round."""

    trial: TrialRef
    windows: int


@dataclass(frozen=True)
class TrialDone:
    trial: TrialRef
    summary: TrialSummary
    flags: tuple[str, ...]


@dataclass(frozen=True)
class TrialFailed:
    trial: TrialRef
    error: str


@dataclass(frozen=True)
class SweepInterrupted:
    why: str


@dataclass(frozen=True)
class NightlySweepStarted:
    spec: str
    sweep: str


@dataclass(frozen=True)
class CapacityFound:
    """search.sampler capacity: one configuration's search ended."""

    label: str
    k: int | None
    dataset: str
    status: str  # bracketed | above_max | below_min | probe_limit | failed | non_monotone | stalled
    max_rate_within_slo: float | None
    first_failing_rate: float | None
    probes: int


Event = (Note | SweepWarning | SweepPlanned | RayConnected | PoolSized | EngineStarting | EngineReady | EngineFailed
         | EngineRetired | TrialStarted | WindowDone | TrialDone | TrialFailed | SweepInterrupted | NightlySweepStarted
         | CapacityFound | StoreUnreachable | StoreReachable)
Listener = Callable[[Event], None]


def ignore(event: Event) -> None:
    """The default listener."""
