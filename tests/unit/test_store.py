"""Store contract: the same tests against real SQLite and real PostgreSQL."""

from __future__ import annotations

import dataclasses
import json

import pytest
import sqlalchemy as sa

from orchestrator.errors import StoreError
from orchestrator.records import (
    METRIC_COLUMNS,
    CompletedTrial,
    RequestOutput,
    TrialSummary,
    WindowMetrics,
    WindowResult,
)
from orchestrator.states import TrialRole, TrialState
from orchestrator.store import NewTrial, Store, display_url, normalize_url


def _trial_row(label="ngram", k=3, conc=1):
    params = {"method": label, "concurrency": conc}
    return NewTrial(method_label=label, method=label, backend="fake", num_speculative_tokens=k, dataset="smoke",
                    params=params, point_key=str(sorted(params.items())), role=TrialRole.SEARCH,
                    method_params={"num_speculative_tokens": k}, concurrency=conc, request_rate=None,
                    chat_template_kwargs={}, max_num_seqs=None, max_num_batched_tokens=None, engine_config={"x": 1},
                    engine_config_hash="abc", model="m", model_path="/m", drafter=None)


def _window(v, outputs=()):
    w = {c: v for c in METRIC_COLUMNS}
    w.update(window_s=1.0, num_requests=4, failed_requests=0, output_tokens=100, num_drafts=10,
             num_draft_tokens=30, num_accepted_tokens=12, acceptance_per_pos=[0.6, 0.4, 0.2])
    return WindowResult(metrics=WindowMetrics(**w), outputs=list(outputs))


def _completed(windows, summary, **timings):
    return CompletedTrial(windows=windows, summary=TrialSummary(**summary), **timings)


def test_round_trip(store_url):
    st = Store(store_url)
    sid = st.create_sweep("s1", "h" * 64, {"name": "s1"}, "spec.yaml")
    ids = st.add_trials(sid, [_trial_row(conc=1), _trial_row(conc=4)])
    assert [t.state for t in st.trials(sid)] == [TrialState.PENDING, TrialState.PENDING]
    env = st.environment_id({"hostname": "h", "cpu_model": "c", "vllm_version": "0.32.0", "engine": {"a": 1}})
    assert st.environment_id({"hostname": "h", "cpu_model": "c", "vllm_version": "0.32.0", "engine": {"a": 1}}) == env
    st.mark_running(ids[0], env, 12.5)
    summary = dict({c: 7.0 for c in METRIC_COLUMNS}, acceptance_per_pos=[0.6], repeats=2, failed_requests=0)
    out = RequestOutput(prompt_id="p1", ok=True, error=None, finish_reason="stop", output_tokens=3, ttft_ms=1.0,
                        e2e_ms=2.0, output_text="héllo", output_token_ids=[1, 2, 3])
    st.complete_trial(ids[0], _completed([_window(5.0, [out]), _window(9.0)], summary, warmup_s=1.0, measure_s=2.0))
    st.fail_trials([ids[1]], "engine failed to start: boom")

    rows = st.trial_results("s1")
    assert [r.state for r in rows] == [TrialState.COMPLETE, TrialState.FAIL]
    r0, r1 = rows
    assert r0.output_tok_s == 7.0 and r0.repeats == 2 and r0.hostname == "h" and r0.vllm_version == "0.32.0"
    assert r0.engine_start_s == 12.5 and r0.backend == "fake" and r0.num_speculative_tokens == 3
    assert r1.error == "engine failed to start: boom" and r1.output_tok_s is None
    assert [m.output_tok_s for m in st.measurements(ids[0])] == [5.0, 9.0]
    (o,) = st.request_outputs(ids[0])
    assert o.output_text == "héllo" and o.output_token_ids == [1, 2, 3]


def test_per_request_acceptance_and_the_decomposition_round_trip(store_url):
    """Issue 15: per-request spec columns, the window's position counts, the trial's AL by position and variance
    shares, and the comparison's identity land in the store; request_acceptance computes each request's AL and
    decode step time from the stored columns."""
    from orchestrator.metrics.decomposition import decode_runs, encode_runs
    from orchestrator.records import Comparison

    st = Store(store_url)
    sid = st.create_sweep("s-dec", "h" * 64, {"name": "s-dec"}, "spec.yaml")
    (tid,) = st.add_trials(sid, [_trial_row()])
    out = RequestOutput(prompt_id="p1", ok=True, output_tokens=11, ttft_ms=100.0, e2e_ms=460.0,
                        output_token_ids=list(range(11)), spec_steps=4, spec_draft_tokens=12, spec_accepted_tokens=6,
                        spec_accept_histogram=[1, 1, 1, 1], spec_step_accepted=encode_runs([3, 0, 1, 2]),
                        spec_step_drafted=encode_runs([3, 3, 3, 3]))
    w = _window(5.0, [out])
    w = WindowResult(metrics=dataclasses.replace(w.metrics, engine_steps=40, position_acceptance=[[4, 6]]),
                     outputs=w.outputs)
    summary = dict({c: 2.0 for c in METRIC_COLUMNS}, acceptance_per_pos=[], repeats=1, failed_requests=0,
                   al_by_position=[2.5, None], tps_var_share_acceptance=0.7, tps_var_share_step_time=0.3)
    st.complete_trial(tid, _completed([w], summary))
    st.save_comparison(tid, Comparison(baseline_trial_id=tid, confidence=0.95, speedup=1.2, step_cost_ratio=1.5,
                                       predicted_speedup=4 / 3, identity_residual=-0.1))
    (r,) = st.trial_results("s-dec")
    assert r.decode_step_ms == 2.0 and r.verify_ms_per_step == 2.0 and r.request_al_p90 == 2.0
    as_json = lambda v: json.loads(v) if isinstance(v, str) else v  # noqa: E731  (views: text on SQLite)
    assert as_json(r.al_by_position) == [2.5, None] and r.tps_var_share_acceptance == 0.7
    assert (r.step_cost_ratio, r.identity_residual) == (1.5, -0.1)
    (m,) = st.measurements(tid)
    assert m.engine_steps == 40 and m.position_acceptance == [[4, 6]]
    with st.engine.connect() as c:
        (q,) = c.execute(sa.text("SELECT * FROM request_acceptance WHERE sweep = 's-dec'")).mappings().all()
    assert q["request_al"] == pytest.approx(2.5) and as_json(q["spec_accept_histogram"]) == [1, 1, 1, 1]
    assert q["decode_step_ms"] == pytest.approx(360.0 / (11 - 1 - 6))  # decode time over its decode steps
    assert decode_runs(q["spec_step_accepted"]) == [3, 0, 1, 2]


def test_trial_results_has_documented_columns(store_url):
    st = Store(store_url)
    with st.engine.connect() as c:
        cols = set(c.execute(sa.text("SELECT * FROM trial_results")).keys())
    required = {"sweep", "trial", "method", "backend", "num_speculative_tokens", "concurrency", "output_tok_s", "req_s",
                "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99", "itl_ms_p50", "e2e_ms_p50",
                "acceptance_length", "acceptance_rate", "state", "error"}
    assert required <= cols


def test_complete_trial_is_atomic(store_url):
    st = Store(store_url)
    sid = st.create_sweep("s2", "h" * 64, {}, "x")
    (tid,) = st.add_trials(sid, [_trial_row()])
    bad = _window(1.0)
    # a broken window makes the write fail half-way: a value no database can store
    bad = WindowResult(metrics=dataclasses.replace(bad.metrics, output_tokens=object()), outputs=[])
    summary = dict({c: 1.0 for c in METRIC_COLUMNS}, acceptance_per_pos=[], repeats=2, failed_requests=0)
    with pytest.raises(StoreError, match="completing trial row"):  # the driver's error, named as the store's
        st.complete_trial(tid, _completed([_window(1.0), bad], summary))
    assert st.measurements(tid) == []  # the first repeat's insert was rolled back
    assert st.trials(sid)[0].state == TrialState.PENDING


def test_schema_coexists_with_optuna(store_url):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = normalize_url(store_url)
    optuna.create_study(storage=url, study_name="coexist")
    st = Store(store_url)  # our tables created after Optuna's, in the same database
    st.create_sweep("s3", "h" * 64, {}, "x")
    names = set(sa.inspect(st.engine).get_table_names())
    assert {"studies", "trials", "sweeps", "sweep_trials"} <= names
    assert optuna.load_study(storage=url, study_name="coexist").study_name == "coexist"


def test_unreachable_server_is_a_clear_error():
    with pytest.raises(StoreError) as ei:
        Store("postgresql://nobody:secret@127.0.0.1:1/none")
    assert "cannot reach store" in str(ei.value) and "secret" not in str(ei.value)


def test_url_helpers():
    assert normalize_url("postgresql://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert normalize_url("/tmp/x.db") == "sqlite:////tmp/x.db"
    assert "p@ss" not in display_url("postgresql://u:p@ss@h/db")
    assert "***" in display_url("postgresql://u:pw@h/db")
