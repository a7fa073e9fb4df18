"""`fake` backend: a deterministic simulated engine for unit tests and overhead benchmarks ONLY.

It batches requests in steps of `step_seconds`; with a speculative_config it accepts draft position i
with probability `acceptance[i]` (given i-1 accepted), plus one bonus token per step. Output tokens are a
function of the prompt only, so speculative and baseline outputs are identical (lossless), as in vLLM.
Every row it writes says backend=fake.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from typing import Any, AsyncIterator

from .base import EngineBackend, EngineStartError, SamplingSettings, SpecCounters, TokenChunk


class FakeBackend(EngineBackend):
    kind = "fake"

    def __init__(self, config):
        super().__init__(config)
        knobs = config.fake
        self.start_seconds = float(knobs.get("start_seconds", 0.0))
        self.step_seconds = float(knobs.get("step_seconds", 0.001))
        self.acceptance = list(knobs.get("acceptance", [0.6, 0.4, 0.25]))
        self.rng = random.Random(knobs.get("seed", 0))
        spec = config.speculative_config or {}
        self.k = int(spec.get("num_speculative_tokens", 0))
        self.counters = SpecCounters(accepted_per_pos=[0] * self.k)
        self._fail_start = knobs.get("fail_start")  # test hook: error text raised at start

    async def start(self) -> None:
        if self._fail_start:
            raise EngineStartError(str(self._fail_start))
        await asyncio.sleep(self.start_seconds)

    def _tokens_per_step(self) -> int:
        if self.k == 0:
            return 1
        accepted = 0
        for pos in range(self.k):
            p = self.acceptance[pos] if pos < len(self.acceptance) else 0.0
            if self.rng.random() >= p:
                break
            self.counters.accepted_per_pos[pos] += 1
            accepted += 1
        self.counters.num_drafts += 1
        self.counters.num_draft_tokens += self.k
        self.counters.num_accepted_tokens += accepted
        return accepted + 1

    async def generate(self, request_id: str, messages: list[dict], sampling: SamplingSettings) -> AsyncIterator[TokenChunk]:
        text = "\n".join(str(m.get("content", "")) for m in messages)
        digest = hashlib.sha256(text.encode()).digest()
        # Output length depends on the prompt (or max_tokens with ignore_eos), never on the method.
        n_out = sampling.max_tokens if sampling.ignore_eos else max(1, min(sampling.max_tokens, 8 + digest[0] % 120))
        tokens = [int.from_bytes(digest[i % 32 : i % 32 + 1], "little") * 7 + i for i in range(n_out)]
        produced = 0
        while produced < n_out:
            await asyncio.sleep(self.step_seconds)
            n = min(self._tokens_per_step(), n_out - produced)
            chunk = tokens[produced : produced + n]
            produced += n
            done = produced >= n_out
            yield TokenChunk(chunk, "".join(f" t{t}" for t in chunk), finished=done, finish_reason="length" if done else None)

    def spec_counters(self) -> SpecCounters:
        return SpecCounters(self.counters.num_drafts, self.counters.num_draft_tokens,
                            self.counters.num_accepted_tokens, list(self.counters.accepted_per_pos))

    def describe(self) -> dict[str, Any]:
        return {"backend": "fake", "attention_backend": "none", "note": "simulated engine; not a measurement"}
