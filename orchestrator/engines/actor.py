"""The Ray actor that hosts one engine (one EngineConfig) and runs measurement windows against it.

One actor = one process = one engine configuration. It is killed (ray.kill) when its configuration is
retired: vLLM does not reliably free accelerator memory in-process. The load generator runs inside the
actor, in the engine frontend's event loop, so token timestamps need no RPC hop.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..datasets import Prompt
from ..environment import collect_fingerprint
from ..load import run_closed_loop, run_warmup
from ..metrics import summarize_window
from .base import EngineConfig, EngineStartError, SamplingSettings
from .registry import make_backend


class EngineActor:
    """Plain class; the controller wraps it with ray.remote(...) and resource options."""

    def __init__(self, config: dict[str, Any], prompts: dict[str, list[Prompt]], sampling: SamplingSettings):
        # The workload is fixed for the sweep: sent once here, not with every measurement call.
        self.config = EngineConfig(**config)
        self.backend = make_backend(self.config)
        self.prompts = prompts  # dataset name -> prompts
        self.sampling = sampling
        self.windows = 0

    async def start(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            await self.backend.start()
        except EngineStartError:
            raise
        except Exception as e:
            raise EngineStartError(f"{type(e).__name__}: {e}") from e
        start_s = time.perf_counter() - t0
        describe = self.backend.describe()
        fingerprint = collect_fingerprint({"engine": describe, "backend": self.config.backend})
        return {"start_s": start_s, "describe": describe, "fingerprint": fingerprint, "pid": os.getpid()}

    async def measure(self, dataset: str, concurrency: int, warmup_requests: int,
                      request_timeout_s: float) -> dict[str, Any]:
        """Warm up (discarded), then one measurement window over `dataset`; returns its metrics and
        per-request outputs."""
        prompts, sampling = self.prompts[dataset], self.sampling
        tag = f"w{self.windows}"
        self.windows += 1
        t0 = time.perf_counter()
        warmup_failed = await run_warmup(self.backend, warmup_requests, sampling, concurrency, tag=tag + "-warm")
        t1 = time.perf_counter()
        before = self.backend.spec_counters()
        window = await run_closed_loop(self.backend, prompts, sampling, concurrency, tag=tag, timeout_s=request_timeout_s)
        delta = self.backend.spec_counters() - before
        t2 = time.perf_counter()
        metrics = summarize_window(window.records, window.duration, delta)
        metrics["warmup_failed"] = warmup_failed
        outputs = [
            {
                "prompt_id": r.prompt_id, "ok": r.ok, "error": r.error, "finish_reason": r.finish_reason,
                "output_tokens": r.num_output_tokens, "prompt_tokens": r.prompt_tokens,
                "ttft_ms": None if r.ttft is None else r.ttft * 1000, "e2e_ms": None if r.e2e is None else r.e2e * 1000,
                "output_text": r.output_text, "output_token_ids": r.output_token_ids,
            }
            for r in window.records
        ]
        return {"metrics": metrics, "outputs": outputs, "warmup_s": t1 - t0, "measure_s": t2 - t1}

    async def stop(self) -> None:
        await self.backend.stop()
