"""The load generators' clock, and a simulated one for the `fake` backend.

Every time a load generator records (send, due, token, end, window start and end) is `now()`: the running event
loop's clock. On a normal loop that is `time.monotonic()`, the wall clock. On a `SimulatedClockLoop` time stands
still while callbacks run and jumps to the next timer when nothing is ready, so a fake engine's steps
(`asyncio.sleep(step)`) take exactly their simulated duration whatever the machine's load, and a window of
minutes of simulated time runs in milliseconds. The fake backend's figures are then exact functions of its knobs
(issue 49: no verdict of a test rides the wall clock).

A simulated loop has no wall clock to wait on: it serves coroutines that only wait on its own timers and on
each other (the fake engine and the load generators). Waiting on real I/O or another thread is still possible
(the selector blocks as usual when no timer is pending) but a timer pending beside it fires first.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


def now() -> float:
    """The running loop's clock in seconds (monotonic; simulated on a SimulatedClockLoop)."""
    return asyncio.get_running_loop().time()


def simulated() -> bool:
    """Whether the running loop keeps simulated time."""
    return isinstance(asyncio.get_running_loop(), SimulatedClockLoop)


def block(seconds: float) -> None:
    """Hold the running loop for `seconds` without letting anything else on it run (a saturated frontend):
    `time.sleep` on a real loop; on a simulated one the clock moves on by `seconds` at once."""
    loop = asyncio.get_running_loop()
    if isinstance(loop, SimulatedClockLoop):
        loop.advance(seconds)
    else:
        time.sleep(seconds)


class _JumpingSelector(selectors.DefaultSelector):
    """Polls file descriptors without blocking; a wait for the next timer is done by moving the clock."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: SimulatedClockLoop | None = None

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        if ready or timeout is not None and timeout <= 0:
            return ready
        if timeout is None:  # no timer pending: only I/O (another thread's call_soon_threadsafe) can wake us
            return super().select(None)
        assert self.loop is not None
        self.loop.advance(timeout)
        return []


class SimulatedClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose `time()` starts at 0 and advances only to the next due timer (or by `advance`)."""

    def __init__(self) -> None:
        selector = _JumpingSelector()
        super().__init__(selector)
        selector.loop = self
        self._now = 0.0

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds


def run_simulated(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on a fresh SimulatedClockLoop in this thread (which must have no running loop);
    tasks it leaves behind are cancelled, as asyncio.run does."""
    loop = SimulatedClockLoop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        try:
            left = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
