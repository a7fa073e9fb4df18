"""Closed-loop load: N workers each keep one request in flight until the prompt list is used up.

Runs in the same process (event loop) as the engine frontend, so per-token timestamps are taken
without an RPC hop; the engine core itself runs in its own process (vLLM V1 multiprocessing). Times are the
running loop's clock (load/clock.py): the wall clock, or simulated time when the fake backend's window runs on a
SimulatedClockLoop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..datasets import Prompt
from ..records import RequestSpecStats, SamplingSettings
from .clock import now

if TYPE_CHECKING:
    from ..engines.base import EngineBackend

# Warm-up prompts are distinct from every dataset prompt so that warm-up never seeds a prefix cache
# with measured prompts.
WARMUP_MESSAGES = [
    [{"role": "user", "content": "Count from one to ten in words."}],
    [{"role": "user", "content": "Name four colours of the rainbow."}],
    [{"role": "user", "content": "Say hello in three languages."}],
    [{"role": "user", "content": "List the days of the week."}],
]


@dataclass
class RequestRecord:
    prompt_id: str
    start: float  # clock.now() when the request was sent (the running loop's clock: simulated for the fake backend)
    chunk_times: list[float] = field(default_factory=list)  # arrival of each streamed chunk
    chunk_sizes: list[int] = field(default_factory=list)  # tokens in each chunk
    output_token_ids: list[int] = field(default_factory=list)
    output_text: str = ""
    end: float | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    error: str | None = None
    # open loop: when the request was due (its scheduled send time, or when a slot freed under
    # max_concurrency if later); None in closed loop
    due: float | None = None
    spec: "RequestSpecStats | None" = None  # the engine's per-request speculative decoding (finishing chunk)

    @property
    def accepted_drafts(self) -> int:
        return self.spec.accepted if self.spec is not None else 0

    @property
    def send_lag(self) -> float | None:
        """How late the generator sent the request against when it was due (open loop only)."""
        return None if self.due is None else max(0.0, self.start - self.due)

    @property
    def ok(self) -> bool:
        return self.error is None and self.end is not None

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.start if self.chunk_times else None

    @property
    def e2e(self) -> float | None:
        return self.end - self.start if self.end is not None else None

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first: (e2e - ttft) / (tokens - 1)."""
        e2e, ttft = self.e2e, self.ttft
        if not self.ok or self.num_output_tokens < 2 or e2e is None or ttft is None:
            return None
        return (e2e - ttft) / (self.num_output_tokens - 1)

    @property
    def itls(self) -> list[float]:
        """Gaps between consecutive streamed chunks (a chunk may hold several accepted tokens)."""
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]


@dataclass
class LoadWindow:
    """The requests of one window as the load generator saw them (metrics.summarize_window reads it)."""

    records: list[RequestRecord]
    start: float
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start


async def one_request(engine: "EngineBackend", request_id: str, prompt: Prompt, sampling: SamplingSettings,
                      timeout_s: float, due: float | None = None) -> RequestRecord:
    rec = RequestRecord(prompt_id=prompt.id, start=now(), due=due)

    async def consume():
        async for chunk in engine.generate(request_id, prompt, sampling):
            t = now()
            if chunk.token_ids:
                rec.chunk_times.append(t)
                rec.chunk_sizes.append(len(chunk.token_ids))
                rec.output_token_ids.extend(chunk.token_ids)
            rec.output_text += chunk.text
            if rec.prompt_tokens is None and chunk.prompt_tokens is not None:
                rec.prompt_tokens = chunk.prompt_tokens
            if chunk.spec is not None:
                rec.spec = chunk.spec
            if chunk.finished:
                rec.finish_reason = chunk.finish_reason

    try:
        await asyncio.wait_for(consume(), timeout=timeout_s)
        rec.end = now()
    except asyncio.TimeoutError:
        rec.error = f"request timed out after {timeout_s:g} s"
    except Exception as e:  # a failed request is recorded, never silently dropped
        rec.error = f"{type(e).__name__}: {e}"
    return rec


async def run_closed_loop(engine: "EngineBackend", prompts: list[Prompt], sampling: SamplingSettings, concurrency: int,
                          *, tag: str = "m", timeout_s: float = 600.0) -> LoadWindow:
    """Send every prompt once with at most `concurrency` requests in flight; return per-request records."""
    queue: asyncio.Queue[tuple[int, Prompt]] = asyncio.Queue()
    for i, p in enumerate(prompts):
        queue.put_nowait((i, p))
    records: list[RequestRecord | None] = [None] * len(prompts)

    async def worker():
        while True:
            try:
                i, p = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            records[i] = await one_request(engine, f"{tag}-{i}", p, sampling, timeout_s)

    start = now()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(prompts)))))
    end = now()
    return LoadWindow(records=[r for r in records if r is not None], start=start, end=end)


async def run_warmup(engine: "EngineBackend", n: int, sampling: SamplingSettings, concurrency: int, tag: str = "w") -> int:
    """Send `n` warm-up requests (distinct prompts, results discarded). Returns how many failed."""
    if n <= 0:
        return 0
    prompts = [Prompt(id=f"warmup-{i}", messages=tuple(WARMUP_MESSAGES[i % len(WARMUP_MESSAGES)])) for i in range(n)]
    result = await run_closed_loop(engine, prompts, sampling, concurrency, tag=tag)
    return sum(1 for r in result.records if not r.ok)
