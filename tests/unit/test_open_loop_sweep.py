"""Open-loop load points, goodput and the capacity search as whole sweeps: real Ray, real SQLite and
PostgreSQL stores, the fake backend (issue 16)."""

from __future__ import annotations

import math

import pytest

from orchestrator.controller.capacity import round_rate
from orchestrator.controller.runner import run_sweep
from orchestrator.spec import load_spec
from orchestrator.store import Store

RATES = """
name: rates
target: {model: fake-model}
engine: {backend: fake, fake: {step_seconds: 0.004, acceptance: [0.9, 0.8, 0.7]}}
workload: {dataset: smoke, num_prompts: 12, max_tokens: 16, ignore_eos: true}
methods:
  baseline: {}
  ngram: {num_speculative_tokens: 3}
space: {concurrency: [2], request_rate: [40, inf]}
measurement: {repeats: 2, warmup_requests: 0, order: blocked, noisy_cv: 5.0, slo: {e2e_ms: 150, ttft_ms: 100}}
"""


def test_request_rate_rows_carry_goodput_attainment_and_lag(ray_session, write_spec, store_url):
    st = Store(store_url)
    out = run_sweep(load_spec(write_spec(RATES)), st)
    assert out.all_complete and out.completed == 6
    rows = st.trial_results("rates")
    by = {(r.label, r.concurrency if r.request_rate is None else r.request_rate): r for r in rows}
    assert set(by) == {(m, x) for m in ("baseline", "ngram") for x in (2, 40.0, math.inf)}
    for r in rows:
        assert 0.0 <= r.slo_attainment <= 1.0 and r.goodput_req_s is not None
        ms = st.measurements(r.trial_id)
        assert len(ms) == 2
        for m in ms:
            # goodput = requests that met the SLO / window; attainment = their share (stored per window)
            assert m.goodput_req_s == pytest.approx(m.slo_attainment * m.num_requests / m.window_s)
            if r.request_rate is None:
                assert m.send_lag_ms_p99 is None
            else:
                assert m.send_lag_ms_p99 is not None and m.send_lag_ms_p99 < 50
        if r.request_rate is not None:
            assert r.concurrency == 12  # open loop, no cap: at most the window's prompts in flight
    # speculative rows are paired with the baseline at the same rate
    for x in (40.0, math.inf):
        spec, base = by[("ngram", x)], by[("baseline", x)]
        assert spec.baseline_trial_id == base.trial_id and spec.speedup is not None
    # all 12 requests at once (rate inf): the fake serves 256 at a time, so nobody queues; the SLO outcome
    # differs from the closed loop's only by load
    assert by[("ngram", math.inf)].ttft_ms_p50 < 100
    # the crossover view is about concurrency: open-loop rows stay out of it
    assert {c.max_concurrency for c in st.crossover("rates")} == {2}
    # `results --format json` is strict JSON: rate inf is the string "inf"
    import json

    from typer.testing import CliRunner

    from orchestrator.cli import app

    res = CliRunner().invoke(app, ["results", "rates", "--store", store_url, "--format", "json"])
    assert res.exit_code == 0, res.output

    def no_constants(name):
        raise AssertionError(f"non-JSON constant {name}")

    out = json.loads(res.stdout, parse_constant=no_constants)
    assert sorted({str(r["request_rate"]) for r in out}) == ["40.0", "None", "inf"]


LAG = """
name: lag
target: {model: fake-model}
engine: {backend: fake, fake: {step_seconds: 0.002, block_loop_ms: 80}}
workload: {dataset: smoke, num_prompts: 20, max_tokens: 8, ignore_eos: true}
methods: {baseline: {}}
space: {request_rate: [100]}
measurement: {repeats: 1, warmup_requests: 0, max_send_lag_ms: 50}
"""


def test_starved_generator_is_flagged(ray_session, write_spec, sqlite_url):
    st = Store(sqlite_url)
    run_sweep(load_spec(write_spec(LAG)), st)
    (row,) = st.trial_results("lag")
    assert "send_lag" in (row.flags or "").split(",")
    assert st.measurements(row.trial_id)[0].send_lag_ms_p99 > 50
    st2 = Store(sqlite_url)
    run_sweep(load_spec(write_spec(LAG.replace("name: lag", "name: nolag").replace("block_loop_ms: 80", "block_loop_ms: 0"))), st2)
    (row,) = st2.trial_results("nolag")
    assert "send_lag" not in (row.flags or "")


# Fake engine with a known saturation point: 4 sequences at a time, 16 tokens of 5 ms steps each (token_cost 0):
# a request takes ~80 ms alone, so the engine serves at most 4 / 0.08 = 50 req/s. The SLO (e2e <= 200 ms) holds
# below that rate and breaks above it as the queue grows. ngram with high acceptance needs ~1/3 of the steps.
CAPACITY = """
name: capacity
target: {model: fake-model}
engine: {backend: fake, max_num_seqs: 4, fake: {step_seconds: 0.02, acceptance: [0.95, 0.9, 0.85]}}
workload: {dataset: smoke, num_prompts: 40, max_tokens: 16, ignore_eos: true}
methods:
  ngram: {num_speculative_tokens: 3}
measurement: {repeats: 1, warmup_requests: 0, discard_first_window: false, slo: {e2e_ms: 800}}
search: {sampler: capacity, capacity: {start_rate: 2.5, target_attainment: 0.9, resolution: 0.15, max_probes: 10}}
"""


def test_capacity_search_finds_the_saturation_point_and_resumes(ray_session, write_spec, sqlite_url, tmp_path):
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(CAPACITY)), st)
    assert out.all_complete
    caps = {c.label: c for c in st.capacity_results("capacity")}
    assert set(caps) == {"baseline", "ngram"}  # the baseline's capacity is searched too
    base, ngram = caps["baseline"], caps["ngram"]
    # rates in units of the fake step (20 ms steps, SLO 800 ms: the 5 ms / 200 ms / 25-100 req/s of before, scaled
    # by 4 so that per-step overhead on a loaded CI machine (~5 ms) cannot halve the measured capacity)
    assert base.status == "bracketed" and 6.25 <= base.max_rate_within_slo < base.first_failing_rate <= 25
    assert base.first_failing_rate / base.max_rate_within_slo <= 1.15 + 1e-9
    assert ngram.max_rate_within_slo > base.max_rate_within_slo
    assert ngram.capacity_ratio == pytest.approx(ngram.max_rate_within_slo / base.max_rate_within_slo)
    assert ngram.baseline_max_rate_within_slo == base.max_rate_within_slo
    # every probe is a stored trial at its rate whose attainment decided the bracket
    rows = {r.trial_id: r for r in st.trial_results("capacity")}
    for cap in (base, ngram):
        for p in cap.probes:
            r = rows[p["trial_id"]]
            assert r.request_rate == p["rate"] and r.slo_attainment == p["attainment"]
            assert p["offered_rate"] == r.offered_rate and round_rate(r.offered_rate) == p["rate"]  # exact schedule
            assert (p["attainment"] >= 0.9) == (p["rate"] <= cap.max_rate_within_slo)
    # `results` and the report say it in words, with the ratio to the baseline, and draw it
    from typer.testing import CliRunner

    from orchestrator.cli import app
    from orchestrator.report.build import build_report

    res = CliRunner().invoke(app, ["results", "capacity", "--store", sqlite_url])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("capacity: ngram K=3"))
    from orchestrator.render import capacity_text

    assert capacity_text(ngram.status, ngram.max_rate_within_slo, ngram.first_failing_rate) in line and \
        f"{ngram.capacity_ratio:.2f}x the baseline's {base.max_rate_within_slo:g} req/s" in line
    assert any(x.startswith("capacity: baseline on smoke") for x in res.output.splitlines())
    rep = build_report(st, "capacity", tmp_path / "report")
    html = rep.page.read_text()
    assert "id='capacity'" in html and (tmp_path / "report" / "capacity.png").is_file()
    assert (tmp_path / "report" / "load.png").is_file() and "measured at request rates only" in html
    # a rerun replays the stored probes: no engine time, the same result
    again = run_sweep(load_spec(write_spec(CAPACITY)), st)
    assert (again.completed, again.engine_starts) == (0, 0)
    assert {c.label: (c.max_rate_within_slo, c.first_failing_rate) for c in st.capacity_results("capacity")} \
        == {k: (v.max_rate_within_slo, v.first_failing_rate) for k, v in caps.items()}
