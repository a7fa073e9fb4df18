"""`dtype: auto` from the CPU's flags (faked here: the choice logic for CPUs this machine is not), the
engine's fingerprint, and the drafter trainer's data dtype."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.engines.dtype import resolve_dtype
from orchestrator.environment import cpu_flags, cpu_isa

AVX2_EPYC = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse sse2 avx avx2 fma bmi2\n"
SPR = "flags\t\t: avx2 avx512f avx512_bf16 avx512_fp16 amx_tile amx_bf16\n"


def test_cpu_flags_and_isa_from_cpuinfo():
    assert {"avx2", "fma"} <= cpu_flags(AVX2_EPYC) and "avx512f" not in cpu_flags(AVX2_EPYC)
    assert cpu_isa(cpu_flags(AVX2_EPYC)) == "avx2"
    assert cpu_isa(cpu_flags(SPR)) == "avx2 avx512f avx512_bf16 avx512_fp16 amx_tile amx_bf16"
    assert cpu_isa(set()).startswith("none of")


@pytest.mark.parametrize("flags,expected", [
    ({"avx2"}, "float32"),  # AVX2 only: bf16 would be emulated
    ({"avx2", "avx512f"}, "float32"),  # AVX-512 without BF16: still emulated
    ({"avx2", "avx512f", "avx512_bf16"}, "bfloat16"),
    ({"avx2", "amx_bf16", "amx_tile"}, "bfloat16"),
])
def test_auto_on_a_cpu_follows_native_bf16(flags, expected):
    c = resolve_dtype("auto", on_gpu=False, flags=flags)
    assert (c.dtype, c.requested) == (expected, "auto")
    assert ("natively" in c.reason) == (expected == "bfloat16") and c.reason.startswith("auto:")


def test_an_explicit_dtype_is_never_changed_and_gpu_auto_is_vllms():
    c = resolve_dtype("bfloat16", on_gpu=False, flags={"avx2"})
    assert c.dtype == "bfloat16" and "emulated" in c.reason  # kept, and said to be slow
    assert resolve_dtype("float32", on_gpu=False, flags={"avx512_bf16"}).dtype == "float32"
    assert resolve_dtype("bfloat16", on_gpu=False, flags={"avx512_bf16"}).reason == "as the spec says"
    c = resolve_dtype("auto", on_gpu=True, flags=set())
    assert c.dtype == "auto" and "GPU" in c.reason


@pytest.mark.parametrize("flags,expected", [({"avx2"}, "float32"), ({"avx2", "avx512_bf16"}, "bfloat16")])
def test_the_engine_resolves_auto_on_its_own_machine(monkeypatch, flags, expected):
    """The actor (plain class, fake backend, no Ray) starts with the resolved dtype and records the choice."""
    from orchestrator.engines import actor as actor_mod
    from orchestrator.engines.base import EngineConfig
    from orchestrator.records import SamplingSettings

    monkeypatch.setattr(actor_mod, "cpu_flags", lambda: flags)
    cfg = EngineConfig(backend="fake", model="fake-model", model_path="fake-model", revision=None, dtype="auto",
                       max_model_len=2048, method_label="baseline", method="baseline", speculative_config=None)
    a = actor_mod.EngineActor(cfg, {}, SamplingSettings(max_tokens=8))
    started = asyncio.run(a.start())
    fp = started.fingerprint
    assert (fp["dtype"], fp["dtype_requested"]) == (expected, "auto") and a.config.dtype == expected
    assert fp["dtype_reason"] == resolve_dtype("auto", on_gpu=False, flags=flags).reason


def test_drafter_training_data_dtype_follows_the_cpu(monkeypatch):
    from orchestrator.drafters.train import settings as run

    monkeypatch.setattr(run, "cpu_flags", lambda: {"avx2"})
    avx2 = run.TrainSettings()
    assert avx2.resolved_dtype().dtype == "float32" and avx2.autocast is False
    k_avx2 = (avx2.key(), avx2.data_key())
    monkeypatch.setattr(run, "cpu_flags", lambda: {"avx2", "avx512_bf16"})
    bf = run.TrainSettings()
    assert bf.resolved_dtype().dtype == "bfloat16" and bf.autocast is True
    assert bf.key() != k_avx2[0] and bf.data_key() != k_avx2[1]  # fp32 data is other data, never mixed in a cache
    assert run.TrainSettings(dtype="float32").autocast is False
    with pytest.raises(run.TrainError, match="allowed auto, bfloat16, float32"):
        run.TrainSettings(dtype="float16")


@pytest.mark.parametrize("env,cap", [
    ({}, None),
    ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "ONEDNN_MAX_CPU_ISA=AVX2"),
    ({"DNNL_MAX_CPU_ISA": "avx512_core"}, "DNNL_MAX_CPU_ISA=avx512_core"),  # AVX-512 without BF16
    ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, None),  # bf16 still allowed
    ({"ONEDNN_MAX_CPU_ISA": "ALL"}, None),
    ({"ATEN_CPU_CAPABILITY": "avx2"}, "ATEN_CPU_CAPABILITY=avx2"),
    ({"ATEN_CPU_CAPABILITY": "avx512"}, None),
])
def test_an_isa_cap_is_read_from_the_environment(env, cap):
    from orchestrator.environment import isa_cap

    assert isa_cap(env) == cap


def test_auto_under_an_isa_cap_is_float32_and_the_rows_say_why():
    """A CPU with AVX512-BF16 run under ONEDNN_MAX_CPU_ISA=AVX2 (how this project measures the AVX2-only path on
    such a machine) emulates bf16 like an AVX2-only CPU: auto picks float32, an explicit bf16 is kept and said to
    be emulated, and cpu_isa records the cap (a compared field: capped rows are not compared with uncapped)."""
    flags = {"avx2", "avx512f", "avx512_bf16"}
    c = resolve_dtype("auto", on_gpu=False, flags=flags, cap="ONEDNN_MAX_CPU_ISA=AVX2")
    assert c.dtype == "float32" and "ONEDNN_MAX_CPU_ISA=AVX2" in c.reason and "native bfloat16 (avx512_bf16)" in c.reason
    c = resolve_dtype("bfloat16", on_gpu=False, flags=flags, cap="ONEDNN_MAX_CPU_ISA=AVX2")
    assert c.dtype == "bfloat16" and "emulated" in c.reason
    assert resolve_dtype("auto", on_gpu=False, flags={"avx2"}, cap="ATEN_CPU_CAPABILITY=avx2").dtype == "float32"
    assert cpu_isa(flags, "ONEDNN_MAX_CPU_ISA=AVX2") == "avx2 avx512f avx512_bf16 cap ONEDNN_MAX_CPU_ISA=AVX2"
    assert cpu_isa(flags, None) == "avx2 avx512f avx512_bf16"


def test_the_engine_and_its_fingerprint_follow_the_cap(monkeypatch):
    """Through the real actor class (fake backend, no Ray): the cap in the process environment decides."""
    from orchestrator.engines import actor as actor_mod
    from orchestrator.engines.base import EngineConfig
    from orchestrator.records import SamplingSettings

    monkeypatch.setattr(actor_mod, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16"})
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    cfg = EngineConfig(backend="fake", model="fake-model", model_path="fake-model", revision=None, dtype="auto",
                       max_model_len=2048, method_label="baseline", method="baseline", speculative_config=None)
    a = actor_mod.EngineActor(cfg, {}, SamplingSettings(max_tokens=8))
    fp = asyncio.run(a.start()).fingerprint
    assert fp["dtype"] == "float32" and "ONEDNN_MAX_CPU_ISA=AVX2" in fp["dtype_reason"]
    assert fp["cpu_isa"].endswith("cap ONEDNN_MAX_CPU_ISA=AVX2")
