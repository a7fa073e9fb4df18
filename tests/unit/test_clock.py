"""The simulated clock (load/clock.py) and the fake engine on it (issue 49): a window's figures are exact functions
of the fake engine's knobs, whatever the machine's load, through the same actor code a sweep runs."""

from __future__ import annotations

import asyncio
import math

import pytest

from orchestrator.datasets import Prompt
from orchestrator.engines import actor as actor_mod
from orchestrator.engines.base import EngineConfig
from orchestrator.load.clock import SimulatedClockLoop, block, now, run_simulated, simulated
from orchestrator.records import MeasureRequest, OpenLoopLoad, SamplingSettings, SloThresholds


def test_time_jumps_to_the_next_timer_and_stands_still_while_code_runs():
    async def go():
        t0 = now()
        await asyncio.sleep(3600)  # an hour of simulated time
        t1 = now()
        sum(range(200_000))  # work takes no simulated time
        t2 = now()
        order = []

        async def after(s, name):
            await asyncio.sleep(s)
            order.append((name, now()))

        await asyncio.gather(after(0.3, "b"), after(0.1, "a"), after(0.2, "c"))
        block(0.25)  # a blocked loop: time moves on, nothing else ran
        return t0, t1, t2, order, now(), simulated()

    t0, t1, t2, order, end, sim = run_simulated(go())
    assert (t0, t1, t2, sim) == (0.0, 3600.0, 3600.0, True)
    assert [n for n, _ in order] == ["a", "c", "b"]
    assert [t for _, t in order] == pytest.approx([3600.1, 3600.2, 3600.3], abs=1e-9)
    assert end == pytest.approx(3600.55, abs=1e-9)


def test_a_normal_loop_keeps_the_wall_clock():
    async def go():
        return simulated(), now() - asyncio.get_running_loop().time()

    sim, delta = asyncio.run(go())
    assert sim is False and abs(delta) < 1.0


def test_left_over_tasks_are_cancelled_and_the_loop_closed():
    seen = {}

    async def forever():
        try:
            await asyncio.sleep(math.inf)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise

    async def go():
        seen["loop"] = asyncio.get_running_loop()
        asyncio.get_running_loop().create_task(forever())
        await asyncio.sleep(0)
        return 7

    assert run_simulated(go()) == 7
    assert seen["cancelled"] and seen["loop"].is_closed() and isinstance(seen["loop"], SimulatedClockLoop)


def _actor(**fake) -> actor_mod.EngineActor:
    cfg = EngineConfig(backend="fake", model="m", model_path="m", revision=None, dtype="float32", max_model_len=512,
                       method_label="baseline", method="baseline", speculative_config=None,
                       engine_args={"max_num_seqs": 4}, fake={"step_seconds": 0.05, **fake})
    prompts = {"d": [Prompt(id=f"p{i}", messages=({"role": "user", "content": f"question {i}"},)) for i in range(8)]}
    return actor_mod.EngineActor(cfg, prompts, SamplingSettings(max_tokens=10, ignore_eos=True))


def _measure(actor, req: MeasureRequest, windows: int = 1):
    async def go():
        await actor.start()
        out = [await actor.measure(req) for _ in range(windows)]
        await actor.stop()
        return out

    return asyncio.run(go())


def test_the_fake_engine_measures_exact_figures_through_the_actor():
    """8 requests of 10 tokens, 4 at a time, 50 ms steps (token_cost 0): two rounds of 10 steps. Every figure is
    known in advance; two windows (and a warm-up, and the discarded first window) give the same ones."""
    req = MeasureRequest(dataset="d", concurrency=4, warmup_requests=3, discard_first_window=True)
    first, second = (r.metrics for r in _measure(_actor(), req, windows=2))
    for m in (first, second):
        assert m.window_s == pytest.approx(1.0, abs=1e-9)  # 2 rounds x 10 steps x 50 ms
        assert m.output_tok_s == pytest.approx(80.0, rel=1e-9)
        assert m.ttft_ms_p50 == pytest.approx(50.0, abs=1e-6)  # the prefill step
        assert m.tpot_ms_p50 == pytest.approx(50.0, abs=1e-6)
        assert m.e2e_ms_p50 == pytest.approx(500.0, abs=1e-6)
        assert m.client_cpu_frac is None  # CPU seconds are not a share of simulated ones
        assert m.engine_steps == 20


def test_an_open_loop_window_offers_exactly_its_rate_and_its_figures_repeat():
    """At 2 req/s, far below what 4 slots of 10 x 50 ms serve, no request queues: each one's e2e is its 10 steps
    plus the wait for the step in progress when it arrived (< one step). Sent on schedule to the simulated
    nanosecond, and a second run gives the same figures."""
    load = OpenLoopLoad(request_rate=2.0, seed=3)

    def window(e2e_ms: float):
        req = MeasureRequest(dataset="d", concurrency=4, open_loop=load, slo=SloThresholds(e2e_ms=e2e_ms))
        (res,) = _measure(_actor(), req)
        return res

    res = window(550 + 1e-6)
    m = res.metrics
    assert m.offered_rate == pytest.approx(2.0, rel=1e-12) and m.send_lag_ms_p99 == pytest.approx(0.0, abs=1e-6)
    assert all(500 - 1e-6 <= o.e2e_ms <= 550 + 1e-6 for o in res.outputs) and m.slo_attainment == 1.0
    assert window(500 - 1e-6).metrics.slo_attainment == 0.0
    again = window(550 + 1e-6)
    assert [o.e2e_ms for o in again.outputs] == pytest.approx([o.e2e_ms for o in res.outputs], abs=1e-6)


def test_the_real_clock_stays_available():
    """`clock: real` runs the window on the actor's own loop, in wall-clock time (tests that stop a sweep
    mid-window): the figures are then at least the simulated ones (sleeps never end early)."""
    (res,) = _measure(_actor(clock="real", step_seconds=0.01), MeasureRequest(dataset="d", concurrency=4))
    assert res.metrics.window_s >= 0.2 and res.metrics.client_cpu_frac is not None
