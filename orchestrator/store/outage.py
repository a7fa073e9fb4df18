"""Riding through store outages: one policy for every read and write of a store (store/db.py) and for Optuna's
storage on the same database (controller/study.py).

A connection-level error (the server restarting or failing over: connections dropped, new ones refused for a
while) is retried with backoff (0.5 s doubling to 10 s) for up to SPECSWEEP_STORE_RETRY_S seconds (default 300).
The listener hears one StoreUnreachable when an operation first fails and one StoreReachable when one succeeds
again. Whole operations are retried (a repository method, an Optuna call), so a write whose commit outcome is
unknown runs again: the store's writes are idempotent by trial and window (store/trials.py), never a row twice.
Before the retried operation runs, `guard` (set by a controller that holds a lease) checks on the new
connection that the lease is still its own; if another controller took it over meanwhile, StoreLeaseLost is
raised and nothing is written. Past the bound, StoreUnavailable names the store (password masked); the process
stops (exit 4) and makes no further attempts on its way out (`gave_up`).

Errors that are not about the connection (a constraint, a syntax error, permission denied) are never retried.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from ..errors import StoreLeaseLost, StoreUnavailable
from ..settings import env_seconds

DEFAULT_RETRY_S = 300.0
T = TypeVar("T")


class RetrySettingError(ValueError):
    """SPECSWEEP_STORE_RETRY_S is not a number of seconds >= 0."""


def retry_bound_s() -> float:
    """How long a store operation is retried through an outage: $SPECSWEEP_STORE_RETRY_S, default 300 s."""
    return env_seconds("SPECSWEEP_STORE_RETRY_S", DEFAULT_RETRY_S, allow_zero=True, error=RetrySettingError)


@dataclass(frozen=True)
class StoreUnreachable:
    store: str  # display URL, password masked
    reason: str  # the driver's first line
    retry_s: float


@dataclass(frozen=True)
class StoreReachable:
    store: str
    after_s: float  # how long it was unreachable


StoreOutageEvent = StoreUnreachable | StoreReachable


def connection_error(e: BaseException) -> DBAPIError | None:
    """The driver error behind `e` (itself or its cause) when it is about the connection, else None."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, DBAPIError) and (seen.connection_invalidated
                                             or isinstance(seen, OperationalError | InterfaceError)):
            return seen
        seen = seen.__cause__
    return None


def driver_reason(e: BaseException) -> str:
    """The driver's own words where there are some (its first line), else the exception's type."""
    orig = getattr(e, "orig", None)
    lines = str(orig if orig is not None else e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


class OutagePolicy:
    """The retry loop around one store's operations (one per Database)."""

    def __init__(self, display_url: str, bound_s: float | None = None):
        self.display_url = display_url
        self.bound_s = retry_bound_s() if bound_s is None else bound_s
        self.listener: Callable[[StoreOutageEvent], None] | None = None
        self.guard: Callable[[Connection], bool] | None = None  # True while this process may still write
        self.gave_up = False
        self.reached = False  # an operation has succeeded: from then on outages are ridden through
        self._lock = threading.Lock()
        self._down_since: float | None = None  # shared by the threads of this process (main, lease heartbeat)

    def run(self, operation: Callable[[], T], check_guard: Callable[[], bool] | None = None) -> T:
        """`operation()`, retried through connection errors; `check_guard()` runs before each retry."""
        delay, start, failures = 0.5, time.monotonic(), 0
        while True:
            try:
                result = operation()
            except Exception as e:
                err = connection_error(e)
                if err is None:
                    raise
                if self.gave_up:  # on the way out: no more waiting, the same answer
                    raise StoreUnavailable(self._gave_up_message(err)) from None
                failures += 1
                if failures == 1:  # a pooled connection the server dropped earlier: a fresh one may just work
                    continue
                self._down(err)
                if time.monotonic() - start >= self.bound_s:
                    self.gave_up = True
                    raise StoreUnavailable(self._gave_up_message(err)) from None
                time.sleep(min(delay, max(0.0, self.bound_s - (time.monotonic() - start)) + 0.01))
                delay = min(delay * 2, 10.0)
                if check_guard is not None:
                    try:
                        allowed = check_guard()
                    except Exception as ge:
                        if connection_error(ge) is None:
                            raise
                        continue  # still down: the guard is checked again before the next try
                    if not allowed:
                        raise StoreLeaseLost(
                            "another controller took over this sweep's lease while the store was unreachable: "
                            "stopped without writing") from None
                continue
            self._up()
            return result

    def _gave_up_message(self, err: DBAPIError) -> str:
        return (f"store {self.display_url} unreachable (bound SPECSWEEP_STORE_RETRY_S={self.bound_s:g} s): "
                f"{driver_reason(err)}. Stopped; run the same command again once the store is back (interrupted "
                f"trials run again)")

    def _down(self, err: DBAPIError) -> None:
        with self._lock:
            if self._down_since is not None:
                return
            self._down_since = time.monotonic()
        if self.listener is not None:
            self.listener(StoreUnreachable(self.display_url, driver_reason(err), self.bound_s))

    def _up(self) -> None:
        with self._lock:
            if self._down_since is None:
                return
            after, self._down_since = time.monotonic() - self._down_since, None
        if self.listener is not None:
            self.listener(StoreReachable(self.display_url, after))
