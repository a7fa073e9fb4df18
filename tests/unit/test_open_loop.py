"""Open-loop load (issue 16), pure tier: arrival schedules, SLO attainment and goodput, the send-lag flag, the
capacity search's bracketing on constructed attainment curves, and spec validation of the new keys. The one
test that runs the fake engine does so in-process (no Ray)."""

from __future__ import annotations

import math
import statistics

import pytest
from pydantic import ValidationError

from orchestrator.controller.capacity import CapacitySearch, round_rate
from orchestrator.controller.plan import SearchSpace
from orchestrator.controller.pool import TrialRun
from orchestrator.controller.runner import window_settings
from orchestrator.datasets import Prompt
from orchestrator.engines.base import EngineConfig
from orchestrator.engines.fake import FakeBackend
from orchestrator.load import RequestRecord, arrival_offsets, run_open_loop
from orchestrator.load.clock import run_simulated
from orchestrator.metrics import summarize_window
from orchestrator.records import DraftCounters, OpenLoopLoad, SamplingSettings, SloThresholds, WindowMetrics
from orchestrator.spec.models import CapacitySpec, SloSpec, SweepSpec
from orchestrator.validity import trial_flags


def gaps(offsets: list[float]) -> list[float]:
    return [b - a for a, b in zip(offsets, offsets[1:])]


# ---- arrival schedules ----------------------------------------------------------------------------------
def test_schedule_is_seeded_and_starts_at_once():
    load = OpenLoopLoad(request_rate=4.0, seed=3)
    a, b = arrival_offsets(load, 50), arrival_offsets(load, 50)
    assert a == b and a[0] == 0.0 and all(y >= x for x, y in zip(a, a[1:]))
    assert arrival_offsets(OpenLoopLoad(request_rate=4.0, seed=4), 50) != a
    assert arrival_offsets(OpenLoopLoad(request_rate=8.0, seed=3), 50) != a
    assert arrival_offsets(OpenLoopLoad(request_rate=math.inf), 5) == [0.0] * 5


def test_schedule_identical_for_baseline_and_every_method(write_spec):
    """The schedule a window uses comes from the trial's load point and the workload only: the baseline and a
    speculative method at one rate get the same MeasureRequest load, so the same send times."""
    from orchestrator.spec import load_spec

    loaded = load_spec(write_spec("""
name: s
target: {model: fake-model}
engine: {backend: fake}
workload: {dataset: smoke, num_prompts: 8, arrival: gamma, burstiness: 0.5, seed: 7, max_concurrency: 3}
methods: {baseline: {}, ngram: {num_speculative_tokens: [2, 4]}}
space: {request_rate: [2, inf]}
measurement: {slo: {ttft_ms: 500}}
"""))
    space = SearchSpace(loaded, "fake-model")
    points = space.grid()
    assert {p.get("request_rate") for p in points} == {2.0, "inf"} and all("concurrency" not in p for p in points)
    settings = window_settings(loaded.spec)
    loads = {}
    for p in points:
        req = TrialRun(trial_id=0, planned=space.planned_trial(p), params=p).measure_request(settings)
        loads.setdefault(p["request_rate"], set()).add(req.open_loop)
        assert req.concurrency == 3 and req.slo == SloThresholds(ttft_ms=500)
    assert all(len(v) == 1 for v in loads.values())  # one load (so one schedule) per rate across methods
    (two,) = loads[2.0]
    assert (two.arrival, two.burstiness, two.seed, two.max_concurrency, two.request_rate) == ("gamma", 0.5, 7, 3, 2.0)
    (inf,) = loads["inf"]
    assert inf.request_rate == math.inf


def test_poisson_mean_and_dispersion():
    rate, n = 4.0, 20000
    off = arrival_offsets(OpenLoopLoad(request_rate=rate, seed=1), n)
    g = gaps(off)
    assert statistics.fmean(g) == pytest.approx(1 / rate, rel=0.03)
    assert statistics.pstdev(g) / statistics.fmean(g) == pytest.approx(1.0, abs=0.05)  # exponential gaps: CV 1
    # counts per 1 s bin of a Poisson process: variance / mean (index of dispersion) ~ 1
    counts = [0] * int(off[-1])
    for t in off:
        if int(t) < len(counts):
            counts[int(t)] += 1
    assert statistics.fmean(counts) == pytest.approx(rate, rel=0.05)
    assert statistics.pvariance(counts) / statistics.fmean(counts) == pytest.approx(1.0, abs=0.15)


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_burstiness_keeps_the_rate_and_changes_dispersion(burstiness):
    g = gaps(arrival_offsets(OpenLoopLoad(request_rate=2.0, arrival="gamma", burstiness=burstiness, seed=2), 20000))
    assert statistics.fmean(g) == pytest.approx(0.5, rel=0.04)
    assert statistics.pstdev(g) / statistics.fmean(g) == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


# ---- SLO attainment and goodput ---------------------------------------------------------------------------
def rec(pid, start, ttft, end, tokens, error=None, due=None):
    r = RequestRecord(prompt_id=pid, start=start, chunk_times=[start + ttft] if ttft is not None else [],
                      output_token_ids=list(range(tokens)), end=end, error=error, due=due)
    return r


def test_goodput_and_attainment_hand_computed():
    # a: ttft 0.1, e2e 1.0, 10 tokens -> tpot 0.1   meets ttft<=200 ms, tpot<=150 ms
    # b: ttft 0.3 -> misses ttft                     c: tpot (2.1-0.1)/9 = 0.222 -> misses tpot
    # d: one token (no TPOT): ttft 0.05 -> meets     e: failed -> misses
    records = [rec("a", 0.0, 0.1, 1.0, 10), rec("b", 0.0, 0.3, 1.2, 10), rec("c", 0.0, 0.1, 2.1, 10),
               rec("d", 0.0, 0.05, 0.05, 1), rec("e", 0.0, None, None, 0, error="boom")]
    slo = SloThresholds(ttft_ms=200, tpot_ms=150)
    m = summarize_window(records, duration_s=4.0, delta=DraftCounters(), slo=slo)
    assert m.slo_attainment == pytest.approx(2 / 5) and m.goodput_req_s == pytest.approx(2 / 4.0)
    m = summarize_window(records, duration_s=4.0, delta=DraftCounters(), slo=SloThresholds(e2e_ms=1100))
    assert m.slo_attainment == pytest.approx(2 / 5)  # a (1.0 s) and d (0.05 s)
    m = summarize_window(records, duration_s=4.0, delta=DraftCounters())
    assert m.slo_attainment is None and m.goodput_req_s is None and m.send_lag_ms_p99 is None


def test_send_lag_measured_and_flagged():
    records = [rec(str(i), 1.0 + i * 0.01, 0.1, 2.0, 4, due=1.0) for i in range(11)]  # sent 0..100 ms late
    m = summarize_window(records, duration_s=2.0, delta=DraftCounters())
    assert m.send_lag_ms_max == pytest.approx(100.0) and m.send_lag_ms_p99 == pytest.approx(99.0)
    common = dict(k=None, outputs=[], max_tokens=4, ignore_eos=False, prefix_caching=False, cv=None, noisy_cv=0.1)
    assert "send_lag" in trial_flags(windows=[m], max_send_lag_ms=50, **common)
    assert "send_lag" not in trial_flags(windows=[m], max_send_lag_ms=120, **common)
    assert "send_lag" not in trial_flags(windows=[WindowMetrics()], max_send_lag_ms=50, **common)


def _fake(**fake) -> FakeBackend:
    cfg = EngineConfig(backend="fake", model="m", model_path="m", revision=None, dtype="float32", max_model_len=512,
                       method_label="baseline", method="baseline", speculative_config=None,
                       engine_args={"max_num_seqs": 64}, fake=fake)
    return FakeBackend(cfg)


def _open_loop_window(load: OpenLoopLoad, **fake):
    async def go():
        engine = _fake(**fake)
        await engine.start()
        prompts = [Prompt(id=f"p{i}", messages=({"role": "user", "content": f"q{i}"},)) for i in range(40)]
        window = await run_open_loop(engine, prompts, SamplingSettings(max_tokens=8, ignore_eos=True), load)
        await engine.stop()
        return window

    return run_simulated(go())  # the fake engine's simulated clock (load/clock.py): exact whatever the load


def test_open_loop_follows_its_schedule_and_a_starved_generator_lags():
    load = OpenLoopLoad(request_rate=100.0, seed=0)
    w = _open_loop_window(load, step_seconds=0.002)
    sends = [r.start - w.start for r in w.records]
    due = arrival_offsets(load, 40)
    assert all(r.ok for r in w.records)
    assert max(abs(s - d) for s, d in zip(sends, due)) < 1e-9  # sent on schedule, in prompt order
    m = summarize_window(w.records, w.duration, DraftCounters())
    assert m.send_lag_ms_p99 < 1e-6
    # every engine step blocks the event loop for 60 ms: sends due meanwhile go out late
    w = _open_loop_window(load, step_seconds=0.002, block_loop_ms=60)
    m = summarize_window(w.records, w.duration, DraftCounters())
    assert m.send_lag_ms_p99 > 50


def test_max_concurrency_caps_in_flight_without_counting_as_lag():
    w = _open_loop_window(OpenLoopLoad(request_rate=math.inf, max_concurrency=4), step_seconds=0.002)
    spans = sorted((r.start, r.end) for r in w.records)
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most == 4
    assert summarize_window(w.records, w.duration, DraftCounters()).send_lag_ms_p99 < 1e-6


# ---- capacity search ----------------------------------------------------------------------------------------
def test_the_bracket_and_the_capacity_are_offered_rates():
    """Probes placed at nominal rates whose windows offered 20 % more (a raw draw): the search brackets on what
    was offered, so the capacity figure is the engine's (10 req/s), not the nominal rate that happened to
    carry it (8.33)."""
    s = CapacitySearch(CapacitySpec(start_rate=1, resolution=0.05, target_attainment=0.9))
    while (rate := s.next_rate()) is not None:
        offered = rate * 1.2
        s.observe(rate, 1.0 if offered <= 10 else 0.0, offered_rate=offered)
    # (offered rates count at three significant digits, as probe rates: 10.04 offered is 10.0)
    assert s.status == "bracketed" and s.passing <= 10 <= s.failing and s.failing / s.passing <= 1.05 + 1e-9
    assert all(p.load == round_rate(p.rate * 1.2) for p in s.probes)
    # without an offered rate (a failed probe, an older row) a probe counts at its nominal rate
    assert CapacitySearch(CapacitySpec()).probes == [] and \
        next(iter([p for p in search_on(lambda r: 1.0).probes])).load == 1.0


def search_on(curve, **settings) -> CapacitySearch:
    s = CapacitySearch(CapacitySpec(**settings))
    while (rate := s.next_rate()) is not None:
        s.observe(rate, curve(rate))
    return s


def test_capacity_brackets_a_step():
    s = search_on(lambda r: 1.0 if r <= 7.3 else 0.5, start_rate=1.0, resolution=0.1, max_probes=20)
    assert s.status == "bracketed" and s.passing <= 7.3 < s.failing and s.failing / s.passing <= 1.1
    assert [p.rate for p in s.probes][:4] == [1.0, 2.0, 4.0, 8.0]  # doubling, then bisection
    s = search_on(lambda r: 1.0 if r <= 0.7 else 0.0, start_rate=4.0, max_probes=20)
    assert s.status == "bracketed" and s.passing <= 0.7 < s.failing
    assert [p.rate for p in s.probes][:4] == [4.0, 2.0, 1.0, 0.5]  # halving first


def test_capacity_target_is_inclusive_and_configurable():
    s = search_on(lambda r: 0.9 if r <= 3 else 0.85, max_probes=20)
    assert s.passing is not None and s.passing <= 3 < s.failing
    s = search_on(lambda r: 0.9 if r <= 3 else 0.85, target_attainment=0.95, min_rate=0.5, max_probes=20)
    assert (s.status, s.passing, s.failing) == ("below_min", None, 0.5)


def test_capacity_edges():
    s = search_on(lambda r: 1.0, max_rate=10)
    assert (s.status, s.passing, s.failing, s.probes[-1].rate) == ("above_max", 10, None, 10)
    s = search_on(lambda r: 1.0 if r < 100 else 0.0, max_probes=3)
    assert (s.status, len(s.probes), s.passing) == ("probe_limit", 3, 4.0)
    s = CapacitySearch(CapacitySpec())
    s.observe(s.next_rate(), None)
    assert s.status == "failed" and s.next_rate() is None
    assert round_rate(3.14159) == 3.14 and round_rate(1234.5) == 1230.0


# ---- spec ---------------------------------------------------------------------------------------------------
BASE = dict(name="s", target={"model": "m"}, methods={"baseline": {}})


def test_spec_refusals_say_what_to_do():
    with pytest.raises(ValidationError, match="needs measurement.slo"):
        SweepSpec(**BASE, search={"sampler": "capacity"})
    with pytest.raises(ValidationError, match="chooses the request rates itself"):
        SweepSpec(**BASE, search={"sampler": "capacity"}, space={"request_rate": [1]},
                  measurement={"slo": {"ttft_ms": 100}})
    with pytest.raises(ValidationError, match="takes one load dimension"):
        SweepSpec(**BASE, search={"sampler": "tpe"}, space={"request_rate": [1], "concurrency": [1, 2]})
    with pytest.raises(ValidationError, match="goodput_req_s needs measurement.slo"):
        SweepSpec(**BASE, search={"objectives": [{"metric": "goodput_req_s", "direction": "maximize"}]})
    with pytest.raises(ValidationError, match="write ttft_ms, not ttft_ms_p99"):
        SloSpec(ttft_ms_p99=200)
    with pytest.raises(ValidationError, match="at least one of"):
        SloSpec()
    with pytest.raises(ValidationError, match="needs arrival: gamma"):
        SweepSpec(**BASE, workload={"burstiness": 0.5})
    with pytest.raises(ValidationError, match="numbers > 0 or inf"):
        SweepSpec(**BASE, space={"request_rate": ["fast"]})
    with pytest.raises(ValidationError, match="must be > 0"):
        SweepSpec(**BASE, space={"request_rate": [0]})
    ok = SweepSpec(**BASE, space={"request_rate": [2, ".inf", float("inf")][:2]})
    assert ok.space.request_rate == [2.0, "inf"] and ok.model_dump(mode="json")["space"]["request_rate"] == [2.0, "inf"]


def test_grid_with_both_load_dimensions_measures_each(write_spec):
    from orchestrator.spec import load_spec

    loaded = load_spec(write_spec("""
name: s
target: {model: fake-model}
engine: {backend: fake}
methods: {baseline: {}}
space: {concurrency: [1, 4], request_rate: [3]}
"""))
    points = SearchSpace(loaded, "fake-model").grid()
    assert [(p.get("concurrency"), p.get("request_rate")) for p in points] == [(1, None), (4, None), (None, 3.0)]


def test_offered_rates_that_cross_are_reported_not_bracketed():
    """A probe placed inside the bracket may offer more than the failing rate and still pass (noise): the
    search says so (non_monotone) instead of reporting a bracket whose ends are inverted."""
    s = CapacitySearch(CapacitySpec(start_rate=4, resolution=0.05))
    s.observe(4.0, 1.0, offered_rate=4.0)
    s.observe(8.0, 0.0, offered_rate=8.0)
    assert s.next_rate() == round_rate(math.sqrt(32))
    s.observe(s.rate, 1.0, offered_rate=9.0)  # placed at ~5.66, it offered 9 and passed
    assert s.status == "non_monotone" and s.next_rate() is None
