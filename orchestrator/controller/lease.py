"""One live controller per sweep (and one nightly run per suite): a lease row in the store, renewed by a
heartbeat thread while the owner runs.

A second owner is refused (LeaseHeld names the holder and since when). A lease whose heartbeat is older than
the timeout belongs to a controller that died: it is taken over, with a note; so is one whose owner ran on
this host and whose process is gone (no need to wait). `force` (--break-lease) takes
it whatever its age. An owner that finds its lease gone (broken by another) stops: `lost` is set and the
loop ends without writing to the sweep's rows, which are no longer its own."""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
import uuid
from typing import Callable, Literal

from ..errors import StoreLeaseLost
from ..settings import env_seconds
from ..store import Store
from ..store.leases import LeaseHolder, renew_on

DEFAULT_TIMEOUT_S = 120.0


class LeaseSettingError(ValueError):
    """SPECSWEEP_LEASE_TIMEOUT_S is not a positive number of seconds."""


def lease_timeout_s() -> float:
    """Seconds without a heartbeat after which a lease is stale: $SPECSWEEP_LEASE_TIMEOUT_S, default 120."""
    return env_seconds("SPECSWEEP_LEASE_TIMEOUT_S", DEFAULT_TIMEOUT_S, allow_zero=False, error=LeaseSettingError)


class LeaseHeld(Exception):
    """Another live owner holds the lease."""

    def __init__(self, what: str, holder: LeaseHolder, timeout_s: float):
        self.holder = holder
        since = dt.datetime.fromtimestamp(holder.acquired_at, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        super().__init__(
            f"{what} is being run by {holder.host} pid {holder.pid} (since {since}, last heartbeat "
            f"{holder.heartbeat_age_s:.0f} s ago). A lease without a heartbeat for {timeout_s:g} s is taken over "
            f"automatically; if that run is dead, take it now with --break-lease")


class Lease:
    def __init__(self, store: Store, name: str, what: str, *, timeout_s: float | None = None, force: bool = False,
                 note: Callable[[str], None] = lambda message: None):
        self.store, self.name, self.what, self.force, self.note = store, name, what, force, note
        self.timeout_s = timeout_s if timeout_s is not None else lease_timeout_s()
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.owner = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:8]}"
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Lease":
        res = self.store.acquire_lease(self.name, self.owner, self.host, self.pid, self.timeout_s, force=self.force,
                                       dead=self._dead)
        if not res.acquired:
            if res.holder is None:
                raise RuntimeError(f"could not take the lease of {self.what}: it changed hands repeatedly")
            raise LeaseHeld(self.what, res.holder, self.timeout_s)
        if res.taken_over and res.holder is not None:
            h = res.holder
            how = ("broken (--break-lease)" if self.force else "its process is gone" if self._dead(h)
                   else f"stale: no heartbeat for {h.heartbeat_age_s:.0f} s")
            self.note(f"took over the lease of {self.what} from {h.host} pid {h.pid} ({how})")
        # after a store outage, every retried write first checks on the new connection that the lease is still
        # ours: a controller whose lease was taken over meanwhile stops without writing (store/outage.py)
        self.store.db.outage.guard = lambda conn: renew_on(conn, self.name, self.owner)
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _dead(self, holder: LeaseHolder) -> bool:
        """A holder on this host whose process no longer exists (killed): no need to wait for the timeout."""
        if holder.host != self.host:
            return False
        try:
            os.kill(holder.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            return False
        return False

    def _beat(self) -> None:
        interval = max(0.2, self.timeout_s / 4)
        while not self._stop.wait(interval):
            try:
                if not self.store.renew_lease(self.name, self.owner):
                    self.lost.set()
                    return
            except StoreLeaseLost:
                self.lost.set()
                return
            except Exception:  # unreachable past the retry bound: the main loop stops on its own store error
                continue

    def __exit__(self, *exc: object) -> Literal[False]:
        self.store.db.outage.guard = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if not self.lost.is_set():
            try:
                self.store.release_lease(self.name, self.owner)
            except Exception:
                pass  # a lease that is not released goes stale and is taken over
        return False
