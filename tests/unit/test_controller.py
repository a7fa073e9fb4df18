"""The Optuna controller and engine pool, through real Ray, with the fake backend, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest

from orchestrator.controller.runner import run_sweep
from orchestrator.spec import load_spec
from orchestrator.states import TrialState
from orchestrator.store import Store

GRID = """
name: grid-sweep
target: {model: fake-model}
engine: {backend: fake, fake: {step_seconds: 0.001, acceptance: [0.7, 0.5, 0.3, 0.2]}}
workload: {dataset: smoke, num_prompts: 4, max_tokens: 16}
methods:
  baseline: {}
  ngram: {num_speculative_tokens: [2, 4]}
space: {concurrency: [1, 2, 4], max_num_seqs: [8, 16]}
measurement: {repeats: 1, warmup_requests: 0}
"""


def point_set(rows):
    return sorted(json.dumps(r.params, sort_keys=True) for r in rows)


def test_grid_covers_every_point_once_and_reuses_engines(ray_session, write_spec, store_url):
    st = Store(store_url)
    out = run_sweep(load_spec(write_spec(GRID)), st)
    rows = st.trials(out.sweep_id)
    # 3 method points x 2 max_num_seqs x 3 concurrencies
    assert len(rows) == 18 and out.completed == 18 and out.failed == 0
    assert len(set(point_set(rows))) == 18
    assert {(r.max_num_seqs, r.concurrency) for r in rows} == {(m, c) for m in (8, 16) for c in (1, 2, 4)}
    configs = {r.engine_config_hash for r in rows}
    assert out.engine_starts == len(configs) == 6  # one engine per distinct configuration, not per trial
    assert all(r.optuna_trial_number is not None and r.queued_s is not None for r in rows)
    # every trial of a configuration was served by the same engine process
    for h in configs:
        assert len({r.engine_pid for r in rows if r.engine_config_hash == h}) == 1
    best = [r for r in rows if r.on_pareto_front]
    res = {r.trial_id: r for r in st.trial_results("grid-sweep")}
    top = max(r.output_tok_s for r in res.values())
    # single objective: the best trials (on simulated time, max_num_seqs 8 and 16 tie exactly at concurrency <= 4)
    assert best and {res[b.id].output_tok_s for b in best} == {top}
    assert len(best) == sum(r.output_tok_s == top for r in res.values())


def test_same_sweep_twice_same_points(ray_session, write_spec, sqlite_url):
    st = Store(sqlite_url)
    for sampler in ("grid", "random", "tpe"):
        text = GRID.replace("max_num_seqs: [8, 16]", "max_num_seqs: [8]").replace(
            "measurement:", f"search: {{sampler: {sampler}, n_trials: 7, seed: 3}}\nmeasurement:")
        loaded = load_spec(write_spec(text))
        a = run_sweep(loaded, st, new_name=f"{sampler}-a")
        b = run_sweep(loaded, st, new_name=f"{sampler}-b")
        pa = [json.dumps(r.params, sort_keys=True) for r in st.trials(a.sweep_id) if r.role == "search"]
        pb = [json.dumps(r.params, sort_keys=True) for r in st.trials(b.sweep_id) if r.role == "search"]
        assert len(pa) == 7, (sampler, pa)  # n_trials points were asked for and measured (paired baselines apart)
        assert pa == pb, sampler  # the same sequence, not only the same set


def test_multi_objective_constraints_and_pareto(ray_session, write_spec, sqlite_url):
    # step time grows with batch x (1 + K): TTFT (one step) ~15 ms for the baseline at concurrency 1, ~110 ms
    # for ngram K=4 at 4, so a 40 ms TTFT SLO splits the space into feasible and infeasible points
    text = GRID.replace("step_seconds: 0.001,", "step_seconds: 0.01, token_cost: 0.5,").replace("measurement:", """search:
  sampler: nsga2
  n_trials: 10
  seed: 1
  objectives: [{metric: output_tok_s, direction: maximize}, {metric: tpot_ms_p99, direction: minimize}]
  constraints: [{metric: ttft_ms_p99, max: 40}]
measurement:""")
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(text)), st)
    res = [r for r in st.trial_results("grid-sweep") if r.role == "search"]  # paired baselines apart
    assert out.completed + out.reused == 10 and len(res) == 10
    for r in res:  # SQLite returns booleans of a view as 0/1
        assert bool(r.feasible) == (r.ttft_ms_p99 <= 40), r
    feasible = [r for r in res if r.feasible]
    assert feasible and len(feasible) < len(res), [r.ttft_ms_p99 for r in res]  # the SLO cuts through
    front = [r for r in res if r.on_pareto_front]
    assert front and all(r.feasible for r in front)  # an infeasible point is never on the front
    for f in front:  # nothing feasible dominates a front member
        assert not any(o.output_tok_s > f.output_tok_s and o.tpot_ms_p99 < f.tpot_ms_p99 for o in feasible)


def test_infeasible_slo_excluded_from_front(ray_session, write_spec, sqlite_url):
    text = GRID.replace("measurement:", "search: {constraints: [{metric: ttft_ms_p99, max: 0.0}]}\nmeasurement:")
    st = Store(sqlite_url)
    run_sweep(load_spec(write_spec(text)), st)
    res = st.trial_results("grid-sweep")
    assert len(res) == 18
    assert all(r.feasible in (False, 0) for r in res) and not any(r.on_pareto_front for r in res)


@pytest.mark.real_clock
def test_actor_killed_mid_trial_fails_one_trial(ray_session, write_spec, sqlite_url):
    text = GRID.replace("step_seconds: 0.001", "step_seconds: 0.05, clock: real").replace("max_num_seqs: [8, 16]", "max_num_seqs: [8]")
    st = Store(sqlite_url)
    killed = {}

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            for r in st.trials(1) if st.get_sweep("grid-sweep") else []:
                if r.state == TrialState.RUNNING and r.engine_pid and r.method == "ngram":
                    os.kill(r.engine_pid, signal.SIGKILL)
                    killed["id"] = r.id
                    return
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    out = run_sweep(load_spec(write_spec(text)), st)
    t.join()
    assert killed, "never saw a running ngram trial to kill"
    rows = {r.id: r for r in st.trials(out.sweep_id)}
    assert [r.id for r in rows.values() if r.state == TrialState.FAIL] == [killed["id"]]
    assert "died" in rows[killed["id"]].error or "Actor" in rows[killed["id"]].error
    assert out.completed == len(rows) - 1  # the sweep went on, with a replacement actor
    assert out.engine_starts == 4  # 3 configurations + 1 replacement


@pytest.mark.real_clock
def test_trial_timeout(ray_session, write_spec, sqlite_url):
    text = (GRID.replace("step_seconds: 0.001", "step_seconds: 0.2, clock: real").replace("max_num_seqs: [8, 16]", "max_num_seqs: [8]")
            .replace("concurrency: [1, 2, 4]", "concurrency: [1]").replace("warmup_requests: 0", "warmup_requests: 0, trial_timeout_s: 0.5"))
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(text)), st)
    rows = st.trials(out.sweep_id)
    assert out.failed == 3 and all("timed out after 0.5 s" in r.error for r in rows)


CLI_SPEC = GRID.replace("step_seconds: 0.001", "step_seconds: 0.02").replace("max_num_seqs: [8, 16]", "max_num_seqs: [8]")


def _run_cli(spec: Path, store: str, ray_address: str, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, RAY_ADDRESS=ray_address)  # attach to the test run's Ray, as a cluster's driver does
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(spec), "--store", store, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)


def _wait_for(st: Store, proc, what, timeout=120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = st.get_sweep("grid-sweep")
        if s and what(st.trials(s.id)):
            return
        if proc.poll() is not None:
            pytest.fail(f"controller exited early: {proc.stdout.read()[-3000:]}")
        time.sleep(0.05)
    pytest.fail("the controller never reached the awaited state")


@pytest.mark.real_clock
def test_sigterm_puts_running_trials_back_to_pending(ray_address, write_spec, sqlite_url):
    st = Store(sqlite_url)
    # 6 trials of ~2-3 s (concurrency 2 and 4): the signal lands mid-trial, and the controller (which checks for
    # it at least every 0.5 s) stops the trial before it could finish
    spec = write_spec(CLI_SPEC.replace("step_seconds: 0.02", "step_seconds: 0.1, clock: real").replace("concurrency: [1, 2, 4]", "concurrency: [2, 4]"))
    proc = _run_cli(spec, sqlite_url, ray_address)
    _wait_for(st, proc, lambda rows: sum(r.state == TrialState.COMPLETE for r in rows) >= 1
              and any(r.state == TrialState.RUNNING for r in rows))
    before = {r.id: r for r in st.trials(st.get_sweep("grid-sweep").id)}
    proc.send_signal(signal.SIGTERM)  # lands mid-trial: a row was RUNNING and has ~2 s to go
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    after = {r.id: r for r in st.trials(st.get_sweep("grid-sweep").id)}
    running = [i for i, r in before.items() if r.state == TrialState.RUNNING]
    assert running
    for i in running:  # what was being measured goes back to PENDING, attempt counted, the reason kept
        assert after[i].state == TrialState.PENDING and after[i].attempt == 2, after[i]
        assert "interrupted" in after[i].error, after[i]
    never = [i for i, r in before.items() if r.state == TrialState.PENDING]
    assert never  # 6 trials, stopped after the first one or two
    for i in never:  # trials that never started stay as they were: PENDING, first attempt, no error
        assert (after[i].state, after[i].attempt, after[i].error) == (TrialState.PENDING, 1, None), after[i]
    for i, r in before.items():
        if r.state == TrialState.COMPLETE:
            assert after[i] == r  # untouched
    assert TrialState.RUNNING not in {r.state for r in after.values()} and TrialState.FAIL not in {r.state for r in after.values()}
    assert st.get_sweep("grid-sweep").status == "interrupted"
    proc = _run_cli(spec, sqlite_url, ray_address)  # a plain resume finishes the sweep
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    assert all(r.state == TrialState.COMPLETE for r in st.trials(st.get_sweep("grid-sweep").id))


ONE_CONC = GRID.replace("max_num_seqs: [8, 16]", "max_num_seqs: [8]").replace("concurrency: [1, 2, 4]", "concurrency: [2]")


def test_gp_sampler_runs_past_its_random_start_reproducibly(ray_session, write_spec, sqlite_url):
    """GPSampler's first 10 trials are random; trials 11-12 come from the Gaussian process (torch)."""
    from optuna.samplers import GPSampler

    from orchestrator.controller.study import make_sampler

    loaded = load_spec(write_spec(GRID.replace("measurement:", "search: {sampler: gp, n_trials: 12, seed: 2}\nmeasurement:")))
    assert isinstance(make_sampler(loaded.spec.search), GPSampler)
    st = Store(sqlite_url)
    a, b = run_sweep(loaded, st, new_name="gp-a"), run_sweep(loaded, st, new_name="gp-b")
    pa = [json.dumps(r.params, sort_keys=True) for r in st.trials(a.sweep_id) if r.role == "search"]
    pb = [json.dumps(r.params, sort_keys=True) for r in st.trials(b.sweep_id) if r.role == "search"]
    assert len(pa) == len(pb) == 12, pa  # n_trials asked and measured
    # the random start is the same sequence for the same seed; the GP's own asks follow the measured (noisy) values
    assert pa[:10] == pb[:10], (pa, pb)
    study = optuna.load_study(study_name="specsweep:gp-a", storage=st.url)
    assert len([t for t in study.trials if t.state.name == "COMPLETE"]) == 12


@pytest.mark.real_clock
def test_max_parallel_engines_runs_engines_side_by_side(ray_session, write_spec, sqlite_url):
    """Two engines at once when asked (their trials overlap in time); one at a time by default on the fake."""
    st = Store(sqlite_url)
    # trials of ~3 s (2 rounds x 24 steps x 0.06 s): two engines started together overlap for sure
    base = ONE_CONC.replace("step_seconds: 0.001", "step_seconds: 0.06, start_seconds: 0.3, clock: real").replace("max_tokens: 16", "max_tokens: 24")

    def overlaps(sweep_id):
        rows = st.trials(sweep_id)
        spans = [(r.started_at, r.finished_at, r.engine_config_hash) for r in rows]
        return any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1:] if a[2] != b[2])

    one = run_sweep(load_spec(write_spec(base)), st, new_name="one-engine")
    two = run_sweep(load_spec(write_spec(base + "resources: {max_parallel_engines: 2}\n")), st, new_name="two-engines")
    assert one.completed == two.completed == 3
    assert not overlaps(one.sweep_id) and overlaps(two.sweep_id)


@pytest.mark.parametrize("repeats", [1, 3])
def test_search_timeout_leaves_the_rest_pending(ray_session, write_spec, sqlite_url, repeats):
    """A grid submits every trial at once: the budget still stops it (nothing new starts after it). With rotated
    repeats, a trial between rounds goes back to PENDING whole, never left RUNNING."""
    text = (GRID.replace("step_seconds: 0.001", "step_seconds: 0.05").replace("repeats: 1", f"repeats: {repeats}")
            .replace("measurement:", "search: {timeout_s: 3}\nmeasurement:"))
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(text)), st)
    states = [r.state for r in st.trials(out.sweep_id)]
    assert len(states) == 18 and states.count(TrialState.COMPLETE) < 12, states  # stopped well before the end (~25 s)
    assert states.count(TrialState.PENDING) == 18 - states.count(TrialState.COMPLETE), states
    assert not out.all_complete and st.get_sweep("grid-sweep").status == "incomplete"


def test_request_timeout_records_failed_requests(ray_session, write_spec, sqlite_url):
    # every request needs 32 steps x 0.05 s = 1.6 s: past a 0.5 s request timeout
    text = (ONE_CONC.replace("step_seconds: 0.001", "step_seconds: 0.05").replace("max_tokens: 16", "max_tokens: 32, ignore_eos: true")
            .replace("warmup_requests: 0", "warmup_requests: 0, request_timeout_s: 0.5")
            .replace("ngram: {num_speculative_tokens: [2, 4]}", "ngram: {num_speculative_tokens: [2]}"))
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(text)), st)
    for r in st.trial_results("grid-sweep"):
        outs = st.request_outputs(r.trial_id, None)
        assert len(outs) == 4 and all(not o.ok and "timed out after 0.5 s" in o.error for o in outs), outs
        assert r.failed_requests == 4 and "failed_requests" in (r.flags or "") or r.state == TrialState.FAIL, r
    assert out.completed + out.failed == 2


def test_start_timeout_fails_the_engines_trials(ray_session, write_spec, sqlite_url):
    text = ONE_CONC.replace("step_seconds: 0.001", "step_seconds: 0.001, start_seconds: 5").replace(
        "engine: {backend: fake,", "engine: {backend: fake, start_timeout_s: 0.5,")
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(text)), st)
    rows = st.trials(out.sweep_id)
    assert out.failed == 3 and all(r.state == TrialState.FAIL and "engine start timed out after 0.5 s" in r.error for r in rows)


@pytest.mark.real_clock
@pytest.mark.ray  # starts its own Ray through the CLI
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stopped_run_leaves_no_process_behind(write_spec, sqlite_url, sig):
    """`specsweep run` with its own local Ray, stopped mid-trial: exit 130, and not one process it started
    (GCS, raylet, dashboard, engine actor workers) is left running."""
    import psutil

    st = Store(sqlite_url)
    spec = write_spec(CLI_SPEC.replace("step_seconds: 0.02", "step_seconds: 0.1, clock: real").replace("concurrency: [1, 2, 4]", "concurrency: [2, 4]"))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(spec), "--store", sqlite_url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    _wait_for(st, proc, lambda rows: any(r.state == TrialState.RUNNING for r in rows), timeout=180)
    started = psutil.Process(proc.pid).children(recursive=True)
    assert any("raylet" in " ".join(p.cmdline()) for p in started), [p.cmdline()[:2] for p in started]
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    # processes told to stop may take a moment to exit on a loaded machine: give them 30 s, then look
    psutil.wait_procs(started, timeout=30)
    left = []
    for p in started:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {' '.join(p.cmdline()[:3])}")
        except psutil.NoSuchProcess:
            pass
    assert not left, f"left running after {sig.name}: {left}"
