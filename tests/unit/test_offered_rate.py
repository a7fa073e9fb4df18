"""Open-loop rows say what load they measured (issue 51), pure tier: the default schedule offers the nominal rate
(within 1 % for 16, 64 and 1,000 requests over several seeds), `raw` reproduces the earlier schedules, a window
stores the rate it really offered, and a window that strays from the nominal rate is flagged `rate_off`."""

from __future__ import annotations

import math
import random

import pytest

from orchestrator.load import RequestRecord, arrival_offsets
from orchestrator.metrics import summarize_window
from orchestrator.records import DraftCounters, OpenLoopLoad, WindowMetrics
from orchestrator.validity import trial_flags

pytestmark = pytest.mark.pure


def offered(offsets: list[float]) -> float:
    return (len(offsets) - 1) / (offsets[-1] - offsets[0])


def earlier_schedule(load: OpenLoopLoad, n: int) -> list[float]:
    """arrival_offsets as it was before issue 51 (cumulative sums of the drawn gaps)."""
    shape = 1.0 if load.arrival == "poisson" else load.burstiness
    rng = random.Random(f"{load.seed}/{load.request_rate!r}/{load.arrival}/{shape!r}/{n}")
    out, t = [0.0], 0.0
    for _ in range(n - 1):
        t += rng.gammavariate(shape, 1.0 / (load.request_rate * shape))
        out.append(t)
    return out


@pytest.mark.parametrize("n", [16, 64, 1000])
@pytest.mark.parametrize("arrival,burstiness", [("poisson", 1.0), ("gamma", 0.5), ("gamma", 4.0)])
def test_the_default_schedule_offers_the_nominal_rate(n, arrival, burstiness):
    for seed in range(5):
        for rate in (0.5, 1.5, 32.0):
            load = OpenLoopLoad(request_rate=rate, arrival=arrival, burstiness=burstiness, seed=seed)
            off = arrival_offsets(load, n)
            assert offered(off) == pytest.approx(rate, rel=0.01), (n, seed, rate)
            assert off[0] == 0.0 and off == sorted(off)
            raw = arrival_offsets(OpenLoopLoad(request_rate=rate, arrival=arrival, burstiness=burstiness, seed=seed,
                                               schedule="raw"), n)
            assert raw == earlier_schedule(load, n)  # raw: the draw as it was
            # the same draw, rescaled: its gaps keep their proportions (shape, burstiness, order)
            assert [a / raw[-1] for a in raw] == pytest.approx([a / off[-1] for a in off], abs=1e-12)


def test_the_issue_s_example():
    """64 requests, seed 0, 1.5 req/s: the raw draw's last send is due at 32.0 s (~1.97 req/s offered); the
    default's at 42.0 s = 63 / 1.5."""
    raw = arrival_offsets(OpenLoopLoad(request_rate=1.5, seed=0, schedule="raw"), 64)
    assert raw[-1] == pytest.approx(32.0, abs=0.05) and offered(raw) == pytest.approx(1.97, abs=0.01)
    assert arrival_offsets(OpenLoopLoad(request_rate=1.5, seed=0), 64)[-1] == pytest.approx(42.0)
    assert arrival_offsets(OpenLoopLoad(request_rate=math.inf), 4) == [0.0] * 4


def window(sends: list[float], due: bool = True) -> WindowMetrics:
    records = [RequestRecord(prompt_id=str(i), start=t, chunk_times=[t + 0.1], output_token_ids=[1, 2], end=t + 0.2,
                             due=t if due else None) for i, t in enumerate(sends)]
    return summarize_window(records, duration_s=max(sends) + 0.2, delta=DraftCounters())


def test_a_window_stores_the_rate_it_offered_and_strays_are_flagged():
    on_time = window([i / 2.0 for i in range(9)])  # 2 req/s
    assert on_time.offered_rate == pytest.approx(2.0)
    assert window([i / 2.0 for i in range(9)], due=False).offered_rate is None  # closed loop: no schedule
    assert window([0.0, 0.0, 0.0]).offered_rate is None  # rate inf: every request at once
    late = window([i / 1.8 for i in range(9)])  # 1.8 req/s offered where 2 were nominal: 10 % off

    def flags(w, nominal):
        return trial_flags(k=None, windows=[w], outputs=[], max_tokens=2, ignore_eos=False, prefix_caching=False,
                           cv=None, noisy_cv=0.1, nominal_rate=nominal)

    assert "rate_off" not in flags(on_time, 2.0) and "rate_off" not in flags(window([i / 1.96 for i in range(9)]), 2.0)
    assert "rate_off" in flags(late, 2.0)
    assert "rate_off" not in flags(late, None) and "rate_off" not in flags(late, math.inf)
