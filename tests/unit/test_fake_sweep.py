"""Whole sweeps through real Ray and a real SQLite store, with the fake backend (fast)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.controller.runner import run_sweep
from orchestrator.errors import SpecError
from orchestrator.spec import load_spec
from orchestrator.states import TrialState
from orchestrator.store import Store

FAKE = """
name: fake-sweep
target: {model: fake-model}
engine: {backend: fake, fake: {step_seconds: 0.001, acceptance: [0.8, 0.6, 0.4, 0.2]}}
workload: {dataset: smoke, num_prompts: 6, max_tokens: 24}
methods:
  baseline: {}
  ngram: {num_speculative_tokens: [2, 4]}
space: {concurrency: [1, 3]}
measurement: {repeats: 2, warmup_requests: 1, order: blocked}
"""


def test_fake_sweep_rows(ray_session, write_spec, sqlite_url):
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(FAKE)), st)
    assert (out.completed, out.failed, out.engine_starts) == (6, 0, 3)  # one engine per distinct config
    rows = st.trial_results("fake-sweep")
    assert len(rows) == 6 and {r.backend for r in rows} == {"fake"}
    assert all(r.state == TrialState.COMPLETE and r.repeats == 2 for r in rows)
    for r in rows:
        if r.method == "ngram":
            assert 1.0 < r.acceptance_length <= r.num_speculative_tokens + 1
        else:
            assert r.acceptance_length is None
        assert r.output_tok_s > 0 and r.ttft_ms_p50 > 0
    # lossless fake: every method produces the baseline's tokens for every prompt
    base = {o.prompt_id: o.output_token_ids for o in st.request_outputs(rows[0].trial_id)}
    spec = {o.prompt_id: o.output_token_ids for o in st.request_outputs(rows[-1].trial_id)}
    assert len(base) == 6 and base == spec
    assert st.get_sweep("fake-sweep").status == "complete"
    # dtype `auto` (the default) is resolved on the engine's machine and every row says what it ran on which ISA
    from orchestrator.environment import cpu_flags, cpu_isa

    native = bool({"avx512_bf16", "amx_bf16"} & cpu_flags())
    assert {(r.dtype, r.cpu_isa) for r in rows} == {("bfloat16" if native else "float32", cpu_isa(cpu_flags()))}
    env = st.environment(rows[0].environment_id)
    assert env.fact("dtype_requested") == "auto" and "auto:" in env.fact("dtype_reason")


def test_resume_skips_completed_and_refuses_changed_spec(ray_session, write_spec, sqlite_url):
    st = Store(sqlite_url)
    run_sweep(load_spec(write_spec(FAKE)), st)
    again = run_sweep(load_spec(write_spec(FAKE)), st)
    assert (again.completed, again.skipped, again.engine_starts) == (0, 6, 0)
    with pytest.raises(SpecError) as ei:
        run_sweep(load_spec(write_spec(FAKE.replace("max_tokens: 24", "max_tokens: 16"))), st)
    msg = str(ei.value)
    assert "already exists" in msg and "workload.max_tokens: 24 -> 16" in msg


def test_engine_start_failure_fails_its_trials_once(ray_session, write_spec, sqlite_url):
    text = FAKE.replace("fake: {step_seconds: 0.001,", "fake: {fail_start: 'CUDA out of memory (simulated)', step_seconds: 0.001,")
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(text)), st)
    assert out.failed == 6 and out.engine_starts == 3 and out.completed == 0
    rows = st.trial_results("fake-sweep")
    assert all(r.state == TrialState.FAIL and "CUDA out of memory (simulated)" in r.error for r in rows)
    assert st.get_sweep("fake-sweep").status == "failed"


def test_cli_run_and_results_formats(ray_session, write_spec, sqlite_url):
    runner = CliRunner()
    res = runner.invoke(app, ["run", str(write_spec(FAKE)), "--store", sqlite_url])
    assert res.exit_code == 0, res.output
    assert "backend=fake" in res.output and "baseline" in res.output and "COMPLETE" in res.output
    assert "; dtype " in res.output and "(auto: this CPU" in res.output  # the run says what it chose and why
    res = runner.invoke(app, ["results", "fake-sweep", "--store", sqlite_url, "--format", "json"])
    assert res.exit_code == 0
    rows = json.loads(res.stdout)
    assert len(rows) == 6 and rows[0]["sweep"] == "fake-sweep"
    res = runner.invoke(app, ["results", "fake-sweep", "--store", sqlite_url, "--format", "csv"])
    assert res.output.splitlines()[0].startswith("sweep,trial,label,method,backend")
    assert len(res.output.strip().splitlines()) == 7
    res = runner.invoke(app, ["results", "nope", "--store", sqlite_url])
    assert res.exit_code == 2 and "no sweep named 'nope'" in res.output


def test_cli_exit_1_when_trials_fail(ray_session, write_spec, sqlite_url):
    text = FAKE.replace("fake: {step_seconds: 0.001,", "fake: {fail_start: 'bad drafter path', step_seconds: 0.001,")
    res = CliRunner().invoke(app, ["run", str(write_spec(text)), "--store", sqlite_url])
    assert res.exit_code == 1, res.output
    assert "bad drafter path" in res.output


def test_datasets_are_load_points(ray_session, write_spec, sqlite_url):
    text = (FAKE.replace("workload: {dataset: smoke, num_prompts: 6, max_tokens: 24}",
                         "workload: {dataset: [smoke, random], random_input_len: 16, num_prompts: 3, max_tokens: 12, ignore_eos: true}")
            .replace("ngram: {num_speculative_tokens: [2, 4]}", "ngram: {num_speculative_tokens: 2}"))
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(text)), st)
    rows = st.trial_results("fake-sweep")
    assert out.engine_starts == 2  # datasets and concurrencies share an engine
    assert {(r.method, r.dataset, r.concurrency) for r in rows} == {
        (m, d, c) for m in ("baseline", "ngram") for d in ("smoke", "random") for c in (1, 3)}
    for r in rows:
        outs = st.request_outputs(r.trial_id)
        assert len(outs) == 3 and all(o.output_tokens == 12 for o in outs)  # ignore_eos: fixed length
        assert all(o.prompt_id.startswith(r.dataset) for o in outs)


def test_failed_warmup_is_stored_and_flagged(ray_session, write_spec, sqlite_url):
    text = FAKE.replace("fake: {step_seconds: 0.001,", "fake: {fail_warmup: true, step_seconds: 0.001,").replace(
        "warmup_requests: 1", "warmup_requests: 2").replace("ngram: {num_speculative_tokens: [2, 4]}", "").replace(
        "concurrency: [1, 3]", "concurrency: [1]")
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(text)), st)
    assert out.completed == 1 and out.failed == 0  # the measured requests succeeded
    (row,) = st.trial_results("fake-sweep")
    assert [m.warmup_failed_requests for m in st.measurements(row.trial_id)] == [2, 2]
    assert "warmup_failed" in row.flags.split(",")
    clean = run_sweep(load_spec(write_spec(FAKE.replace("fake-sweep", "clean"))), st)
    assert all(m.warmup_failed_requests == 0 for r in st.trials(clean.sweep_id) for m in st.measurements(r.id))
    assert not any("warmup_failed" in (r.flags or "") for r in st.trial_results("clean"))


@pytest.mark.ray  # starts its own Ray through the CLI
def test_local_ray_runs_engines_at_niceness_zero_and_rows_record_it(write_spec, sqlite_url, tmp_path):
    """A local Ray started by `specsweep run` runs its workers at niceness 0 (Ray's default is 15); the
    rows record the engine's niceness, and a cluster's default 15 is flagged low_priority (issue 19)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_worker_niceness")}
    spec = write_spec(FAKE.replace("ngram: {num_speculative_tokens: [2, 4]}", "").replace("[1, 3]", "[1]"))
    run = [sys.executable, "-m", "orchestrator.cli", "run", str(spec), "--store", sqlite_url]
    res = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    # the local instance keeps Ray's token authentication without Ray's console line about it
    assert "Token authentication" not in res.stdout + res.stderr, res.stderr
    st = Store(sqlite_url)
    (row,) = st.trial_results("fake-sweep")
    assert st.environment(row.environment_id).fact("process_niceness") == 0 and not row.flags, row
    # Ray's own default (as on a cluster started without the setting): recorded and flagged
    res = subprocess.run(run + ["--new-name", "nice-15"], capture_output=True, text=True,
                         env={**env, "RAY_worker_niceness": "15"}, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    (row,) = st.trial_results("nice-15")
    assert st.environment(row.environment_id).fact("process_niceness") == 15
    assert "low_priority" in row.flags.split(","), row
