"""Open-loop load: requests sent on their own clock (a seeded arrival schedule), whatever is in flight.

The schedule is a pure function of (request rate, arrival process, burstiness, seed, number of prompts), so
the baseline and every method at one load point get identical send times, in the same prompt order, and so
does every repeat. Gaps between sends are drawn from a gamma distribution with mean 1 / rate and shape
`burstiness` (shape 1 is the exponential: a Poisson process), as `vllm bench serve --burstiness` does; the
first request is sent at once. Rate inf sends every request at once.

Offered rate: a finite draw's realised rate scatters by about 1/sqrt(n) around the nominal one (at 64 requests
seed 0 and 1.5 req/s the last send was due at 32.0 s where 1.5 req/s means 42.0 s: ~2.0 req/s offered). By
default (`workload.schedule: exact`) the drawn gaps are rescaled so the schedule spans exactly (n - 1) / rate:
the window offers the nominal rate, with the draw's shape and burstiness. `raw` keeps the draw as it is (the
process's natural scatter; the schedules of earlier versions). Either way each window stores the rate it
really offered, from its send times (`offered_rate`), and a window straying from the nominal rate by more than
5 % is flagged `rate_off` (send lag, a max_concurrency cap, or a raw draw).

Lateness: each request records when it was due (its scheduled time, or when a slot freed under
max_concurrency if that came later) and when it was actually sent; the difference is the generator's own
lag (an event loop busy with the engine frontend, a starved process). summarize_window reports it, and a
window whose sends lagged is flagged `send_lag` (validity/flags.py) rather than reported as the target rate.
"""

from __future__ import annotations

import asyncio
import math
import random
from typing import TYPE_CHECKING

from ..datasets import Prompt
from ..records import OpenLoopLoad, SamplingSettings
from .clock import now
from .closed_loop import LoadWindow, RequestRecord, one_request

if TYPE_CHECKING:
    from ..engines.base import EngineBackend


def arrival_offsets(load: OpenLoopLoad, n: int) -> list[float]:
    """Send times of `n` requests in seconds after the first (non-decreasing, starting at 0)."""
    if n <= 0:
        return []
    if math.isinf(load.request_rate):
        return [0.0] * n
    if load.request_rate <= 0:
        raise ValueError(f"request rate must be > 0, got {load.request_rate}")
    shape = 1.0 if load.arrival == "poisson" else load.burstiness
    # seeded by everything the schedule depends on (a string seed is hashed stably by random.Random)
    rng = random.Random(f"{load.seed}/{load.request_rate!r}/{load.arrival}/{shape!r}/{n}")
    scale = 1.0 / (load.request_rate * shape)  # mean gap = shape * scale = 1 / rate
    out, t = [0.0], 0.0
    for _ in range(n - 1):
        t += rng.gammavariate(shape, scale)
        out.append(t)
    if load.schedule == "exact" and t > 0:
        # a finite draw's span scatters by ~1/sqrt(n) around (n - 1) / rate (+-12 % at 64 requests): rescale the
        # gaps so the window offers the nominal rate, keeping their shape (burstiness) and order
        factor = (n - 1) / load.request_rate / t
        out = [x * factor for x in out]
    return out


async def run_open_loop(engine: "EngineBackend", prompts: list[Prompt], sampling: SamplingSettings,
                        load: OpenLoopLoad, *, tag: str = "m", timeout_s: float = 600.0) -> LoadWindow:
    """Send prompt i at offset i of the arrival schedule (at most `load.max_concurrency` in flight when set);
    return per-request records with their due and send times."""
    offsets = arrival_offsets(load, len(prompts))
    slots = asyncio.Semaphore(load.max_concurrency) if load.max_concurrency else None
    start = now()

    async def send(i: int, prompt: Prompt) -> RequestRecord:
        due = start + offsets[i]
        delay = due - now()
        if delay > 0:
            await asyncio.sleep(delay)
        if slots is None:
            return await one_request(engine, f"{tag}-{i}", prompt, sampling, timeout_s, due=due)
        if slots.locked():  # full: time spent waiting for a free slot is queueing by design, not lag
            await slots.acquire()
            due = max(due, now())
        else:
            await slots.acquire()
        try:
            return await one_request(engine, f"{tag}-{i}", prompt, sampling, timeout_s, due=due)
        finally:
            slots.release()

    records = await asyncio.gather(*(send(i, p) for i, p in enumerate(prompts)))
    return LoadWindow(records=list(records), start=start, end=now())
