"""Metric math on hand-computed inputs."""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest

from orchestrator.load import RequestRecord
from orchestrator.metrics import acceptance_metrics, median_over_repeats, percentile, summarize_window
from orchestrator.records import DraftCounters as SpecCounters
from orchestrator.records import WindowMetrics


def rec(start, chunks, sizes, end=None, error=None, pid="p"):
    """A request sent at `start` whose chunks arrived at `chunks` carrying `sizes` tokens each."""
    r = RequestRecord(prompt_id=pid, start=start, chunk_times=list(chunks), chunk_sizes=list(sizes),
                      output_token_ids=list(range(sum(sizes))), end=chunks[-1] if end is None and chunks else end,
                      error=error)
    return r


def test_percentile_linear_interpolation():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10], 99) == 10
    assert percentile([0, 100], 99) == pytest.approx(99.0)
    assert percentile([], 50) is None
    assert percentile([None, float("nan"), 4.0], 50) == 4.0


def test_request_record_timings():
    r = rec(0.0, [0.5, 0.6, 0.8, 1.0], [1, 3, 1, 2])  # 7 tokens
    assert r.ttft == 0.5 and r.e2e == 1.0 and r.num_output_tokens == 7
    assert r.tpot == pytest.approx((1.0 - 0.5) / 6)
    assert r.itls == pytest.approx([0.1, 0.2, 0.2])


def test_acceptance_metrics_counts_bonus_token():
    # 10 drafting steps with K=3: 30 draft tokens, 12 accepted (6 at pos 0, 4 at pos 1, 2 at pos 2)
    m = acceptance_metrics(SpecCounters(10, 30, 12, [6, 4, 2]))
    assert m["acceptance_length"] == pytest.approx(2.2)  # 1 + 12/10
    assert m["acceptance_rate"] == pytest.approx(0.4)
    assert m["acceptance_per_pos"] == pytest.approx([0.6, 0.4, 0.2])


def test_acceptance_metrics_without_drafts_is_none():
    m = acceptance_metrics(SpecCounters())
    assert m["acceptance_length"] is None and m["acceptance_rate"] is None and m["acceptance_per_pos"] == []


def test_counter_delta():
    d = SpecCounters(15, 45, 20, [10, 6, 4]) - SpecCounters(10, 30, 12, [6, 4])
    assert (d.num_drafts, d.num_draft_tokens, d.num_accepted_tokens, d.accepted_per_pos) == (5, 15, 8, [4, 2, 4])


def test_summarize_window_hand_computed():
    a = rec(0.0, [0.2, 0.4, 0.6], [1, 1, 1])           # 3 tokens, ttft .2, e2e .6, tpot .2
    b = rec(0.1, [0.5, 0.7, 1.1, 1.3], [1, 2, 1, 1])   # 5 tokens, ttft .4, e2e 1.2, tpot .2
    c = rec(0.2, [], [], end=None, error="boom")        # failed
    m = asdict(summarize_window([a, b, c], duration_s=2.0, delta=SpecCounters(4, 8, 2, [2, 0])))
    assert m["num_requests"] == 3 and m["failed_requests"] == 1
    assert m["output_tokens"] == 8
    assert m["output_tok_s"] == pytest.approx(4.0)
    assert m["req_s"] == pytest.approx(1.0)
    assert m["ttft_ms_p50"] == pytest.approx(300.0)
    assert m["e2e_ms_p50"] == pytest.approx(900.0)
    assert m["tpot_ms_p50"] == pytest.approx(200.0)
    # ITLs pooled: a: .2,.2  b: .2,.4,.2 -> sorted .2,.2,.2,.2,.4 -> p50 .2
    assert m["itl_ms_p50"] == pytest.approx(200.0)
    assert m["acceptance_length"] == pytest.approx(1.5)
    assert m["acceptance_rate"] == pytest.approx(0.25)


def test_median_over_repeats():
    base = {c: None for c in ("req_s", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99", "itl_ms_p50",
                              "itl_ms_p99", "e2e_ms_p50", "e2e_ms_p99", "acceptance_rate")}
    ws = [WindowMetrics(**dict(base, output_tok_s=v, acceptance_length=al, acceptance_per_pos=pp, failed_requests=f))
          for v, al, pp, f in [(10, 2.0, [0.5, 0.2], 0), (30, 1.5, [0.3, 0.1], 1), (20, 1.0, [0.4], 0)]]
    s = asdict(median_over_repeats(ws))
    assert s["output_tok_s"] == 20 and s["acceptance_length"] == 1.5
    assert s["acceptance_per_pos"] == pytest.approx([0.4, 0.15])
    assert s["repeats"] == 3 and s["failed_requests"] == 1 and s["req_s"] is None
    assert not math.isnan(s["output_tok_s"])
