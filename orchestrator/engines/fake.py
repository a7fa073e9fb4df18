"""`fake` backend: a deterministic simulated engine for unit tests and overhead benchmarks ONLY.
Every row it writes says backend=fake.

It runs a step loop like a continuous-batching engine: every step serves up to `max_num_seqs` running
requests and lasts `step_seconds * (1 + token_cost * batch * (1 + K))` (verifying K drafts costs compute
in proportion to the tokens in the batch). In each step a request gets 1 bonus token plus its accepted
drafts: draft position i is accepted with probability `acceptance[i]` given position i-1 was. Random draws
come from a generator seeded by (seed, request id), so a run is deterministic for a seed whatever the
interleaving. Output tokens depend on the prompt only, so speculative and baseline outputs are identical
(lossless), as in vLLM. At temperature > 0 the first token is sampled from four candidates (a generator
seeded by the request id and prompt), the same distribution for every method; `output_fault: diverge`
makes an engine with K > 0 lossy (other tokens at temperature 0, other first-token candidates above it);
`output_fault: near_tie` makes it part from the baseline only where the simulated top two are nearly tied
(score_top3), as bfloat16 rounding does: numerics, not a loss.

Clock (`fake.clock`): `simulated` (the default) runs each measurement window on a SimulatedClockLoop
(load/clock.py), where a step's `asyncio.sleep` moves a simulated clock instead of waiting, so every latency and
throughput figure is the exact function of the knobs above whatever the machine's load, and a window takes
milliseconds. `real` sleeps for real (tests that must stop a sweep mid-window, overhead benchmarks). Engine start
(`start_seconds`) always waits for real: it runs in the actor's own loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import random
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from ..load.clock import block
from ..methods.schedule import k_at
from ..records import DraftCounters, RequestSpecStats, SamplingSettings, StepTiming, TokenChunk
from ..spec.models import FakeEngineSpec
from .base import EngineBackend, EngineStartError

NEAR_TIE_FIRST, NEAR_TIE_GAP, CLEAR_GAP = 3, 0.01, 6.0  # the simulated top-3 margins (score_top3)


def _text(prompt) -> str:
    return prompt.id + "\n" + "\n".join(str(m.get("content", "")) for m in prompt.messages)


@dataclass
class _Running:
    tokens: list[int]
    rng: random.Random
    produced: int = 0
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    histogram: list[int] = field(default_factory=list)  # per-request spec stats, as vLLM's `detailed` level
    step_accepted: list[int] = field(default_factory=list)
    step_drafted: list[int] = field(default_factory=list)

    def spec(self) -> RequestSpecStats | None:
        if not self.histogram:
            return None
        return RequestSpecStats(list(self.histogram), sum(self.step_drafted), list(self.step_accepted),
                                list(self.step_drafted))


class FakeBackend(EngineBackend):
    kind = "fake"

    def __init__(self, config):
        super().__init__(config)
        # The spec's FakeEngineSpec is the one source of the knobs' defaults.
        knobs = FakeEngineSpec(**config.fake)
        self.start_seconds = knobs.start_seconds
        self.step_seconds = knobs.step_seconds
        self.token_cost = knobs.token_cost
        self.acceptance = list(knobs.acceptance)
        self.seed = knobs.seed
        self.max_num_seqs = int(config.engine_args.get("max_num_seqs") or 256)
        spec = config.speculative_config or {}
        self.k = int(spec.get("num_speculative_tokens", 0))
        # vLLM's num_speculative_tokens_per_batch_size: K by the step's batch size (capped at num_speculative_tokens)
        self.schedule = tuple(tuple(e) for e in spec.get("num_speculative_tokens_per_batch_size") or ())
        self.counters = DraftCounters(accepted_per_pos=[0] * self.k)
        self.timing = StepTiming(clock="simulated")
        self._fail_start = knobs.fail_start or (
            f"simulated start failure of method {config.method_label!r} (fake: fail_start_methods)"
            if config.method_label in knobs.fail_start_methods else None)
        self._fail_warmup = knobs.fail_warmup
        self.start_output = knobs.start_output
        self.noise = knobs.noise
        self.noise_seed = knobs.noise_seed
        self.counter_fault = knobs.counter_fault
        self.block_loop_s = knobs.block_loop_ms / 1000.0
        self.clock = knobs.clock
        self.lossy = knobs.output_fault == "diverge" and self.k > 0
        self.near_tie = knobs.output_fault == "near_tie" and self.k > 0
        self.attention_backend = "simulated-other" if config.method_label in knobs.other_environment_methods else "none"
        self.slowdown = 1.0  # this window's noise factor (begin_window draws it)
        self._windows = 0
        self._waiting: list[_Running] = []
        self._running: list[_Running] = []
        self._wakeup: asyncio.Event | None = None
        self._loop_task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the step loop runs on

    async def start(self) -> None:
        if self.start_output:  # on fd 2, as a C library or a child process would write it
            os.write(2, (self.start_output + "\n").encode())
        if self._fail_start:
            raise EngineStartError(str(self._fail_start))
        await asyncio.sleep(self.start_seconds)
        self._serve_here()

    @property
    def simulated_clock(self) -> bool:
        """Whether measurement windows should run on a SimulatedClockLoop (engines/actor.py does so)."""
        return self.clock == "simulated"

    def _serve_here(self) -> None:
        """Run the step loop on the running event loop. A simulated-clock window brings its own loop: the step
        loop moves there (requests of an earlier loop cannot be waiting: a window ends when they have)."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        self._stop_step_loop()
        self._waiting, self._running = [], []
        self._wakeup = asyncio.Event()
        self._loop, self._loop_task = loop, loop.create_task(self._step_loop())

    def k_for(self, batch: int) -> int:
        return min(self.k, k_at(self.schedule, batch)) if self.schedule else self.k

    def step_duration(self, batch: int) -> float:
        return self.slowdown * self.step_seconds * (1.0 + self.token_cost * batch * (1 + self.k_for(batch)))

    def begin_window(self) -> None:
        """Draw this window's slowdown exp(N(0, noise)), seeded by (noise_seed, configuration, window)."""
        self._windows += 1
        if self.noise > 0:
            rng = random.Random(f"{self.noise_seed}/{self.config.config_hash}/{self._windows}")
            self.slowdown = math.exp(rng.gauss(0.0, self.noise))

    def _tokens_this_step(self, r: _Running, k: int) -> int:
        if k == 0:
            return 1
        accepted = 0
        for pos in range(k):
            p = self.acceptance[pos] if pos < len(self.acceptance) else 0.0
            if r.rng.random() >= p:
                break
            self.counters.accepted_per_pos[pos] += 1
            accepted += 1
        self.counters.num_drafts += 1
        self.counters.num_draft_tokens += k
        self.counters.num_accepted_tokens += accepted
        if not r.histogram:
            r.histogram = [0] * (self.k + 1)
        r.histogram[accepted] += 1
        r.step_accepted.append(accepted)
        r.step_drafted.append(k)
        return accepted + 1

    def _time_step(self, batch: int, k: int) -> None:
        """The simulated step split as the step_timing contract reports it: verifying 1 + K tokens per request is
        the target's forward (the step's base cost plus its per-token cost), drafting K per request the rest."""
        unit = self.slowdown * self.step_seconds
        verify, drafter = unit * (1.0 + self.token_cost * batch), unit * self.token_cost * batch * k
        t = self.timing
        self.timing = StepTiming(t.steps + 1, t.total_s + verify + drafter, t.verify_s + verify, t.drafter_s + drafter,
                                 t.clock)

    async def _step_loop(self) -> None:
        while True:
            while self._waiting and len(self._running) < self.max_num_seqs:
                self._running.append(self._waiting.pop(0))
            if not self._running:
                assert self._wakeup is not None  # made by the loop's start
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch = len(self._running)
            k = self.k_for(batch)
            await asyncio.sleep(self.step_duration(batch))
            self._time_step(batch, k)
            if self.block_loop_s:  # a saturated frontend: nothing else on this event loop runs meanwhile
                block(self.block_loop_s)
            still = []
            for r in self._running:
                first = r.produced == 0  # the first token comes from prefill: no verify step
                n = 1 if first else min(self._tokens_this_step(r, k), len(r.tokens) - r.produced)
                chunk = r.tokens[r.produced : r.produced + n]
                r.produced += n
                done = r.produced >= len(r.tokens)
                r.queue.put_nowait(TokenChunk(chunk, "".join(f" t{t}" for t in chunk), finished=done,
                                              finish_reason="length" if done else None,
                                              spec=r.spec() if done else None))
                if not done:
                    still.append(r)
            self._running = still

    async def generate(self, request_id: str, prompt, sampling: SamplingSettings) -> AsyncIterator[TokenChunk]:
        if self._fail_warmup and prompt.id.startswith("warmup-"):
            raise RuntimeError("simulated warm-up failure (fake: fail_warmup)")
        text = _text(prompt)
        tokens = self._answer(text, sampling)
        if sampling.temperature > 0:  # sampled first token: one of four, the same distribution for every method
            tokens[0] = 10_000 + random.Random(f"{request_id}/{text}").randrange(4) + (4 if self.lossy else 0)
        elif self.lossy:
            tokens[1:] = [t + 1 for t in tokens[1:]]
        elif self.near_tie and len(tokens) > NEAR_TIE_FIRST:  # the runner-up where the baseline's top two tie
            tokens[NEAR_TIE_FIRST:] = [t + 1 for t in tokens[NEAR_TIE_FIRST:]]
        req = _Running(tokens=tokens, rng=random.Random(f"{self.seed}/{request_id}/{text}"))
        self._serve_here()
        self._waiting.append(req)
        assert self._wakeup is not None
        self._wakeup.set()
        while True:
            chunk = await req.queue.get()
            yield chunk
            if chunk.finished:
                return

    async def score_top3(self, prompt, sampling: SamplingSettings) -> list[list[float]] | None:
        """The simulated baseline's top three at each position of its answer: its own token; that token + 1 (what
        `diverge` and `near_tie` answer), nearly tied (margin NEAR_TIE_GAP) at every 7th position from NEAR_TIE_FIRST
        and clearly apart (CLEAR_GAP) elsewhere; and that token + 2, clearly apart."""
        tokens = self._answer(_text(prompt), sampling)
        return [[t, t + 1, NEAR_TIE_GAP if i >= NEAR_TIE_FIRST and (i - NEAR_TIE_FIRST) % 7 == 0 else CLEAR_GAP,
                 t + 2, 2 * CLEAR_GAP] for i, t in enumerate(tokens)]

    @staticmethod
    def _answer(text: str, sampling: SamplingSettings) -> list[int]:
        """The greedy answer to a prompt (`_text`): it depends on the prompt (its length too, or max_tokens with
        ignore_eos), never on the method."""
        digest = hashlib.sha256(text.encode()).digest()
        n_out = sampling.max_tokens if sampling.ignore_eos else max(1, min(sampling.max_tokens, 8 + digest[0] % 120))
        return [digest[i % 32] * 7 + i for i in range(n_out)]

    def draft_counters(self) -> DraftCounters:
        c = self.counters
        if self.counter_fault == "inflate":  # more accepted than drafted: AL > K + 1
            return DraftCounters(c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens + (self.k + 1) * c.num_drafts,
                                list(c.accepted_per_pos))
        if self.counter_fault == "nan":  # accepted tokens without drafts: AL undefined
            return DraftCounters(0, 0, c.num_accepted_tokens + c.num_drafts, list(c.accepted_per_pos))
        return DraftCounters(c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, list(c.accepted_per_pos))

    async def step_timing(self) -> StepTiming:
        return self.timing

    def describe(self) -> dict[str, Any]:
        return {"backend": "fake", "attention_backend": self.attention_backend, "clock": self.clock,
                "note": "simulated engine; not a measurement"}

    def _stop_step_loop(self) -> None:
        """Cancel the step loop on the loop it runs on (this thread's, or a simulated window's that still runs)."""
        loop, task = self._loop, self._loop_task
        if loop is None or task is None or task.done() or loop.is_closed():
            return
        if loop is asyncio.get_running_loop():
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)

    async def stop(self) -> None:
        self._stop_step_loop()
