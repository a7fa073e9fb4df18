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

import pytest

from orchestrator.controller.runner import run_sweep
from orchestrator.spec import load_spec
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
    return sorted(json.dumps(r["params"], sort_keys=True) for r in rows)


def test_grid_covers_every_point_once_and_reuses_engines(ray_session, write_spec, store_url):
    st = Store(store_url)
    out = run_sweep(load_spec(write_spec(GRID)), st)
    rows = st.trials(out.sweep_id)
    # 3 method points x 2 max_num_seqs x 3 concurrencies
    assert len(rows) == 18 and out.completed == 18 and out.failed == 0
    assert len(set(point_set(rows))) == 18
    assert {(r["max_num_seqs"], r["concurrency"]) for r in rows} == {(m, c) for m in (8, 16) for c in (1, 2, 4)}
    configs = {r["engine_config_hash"] for r in rows}
    assert out.engine_starts == len(configs) == 6  # one engine per distinct configuration, not per trial
    assert all(r["optuna_trial_number"] is not None and r["queued_s"] is not None for r in rows)
    # every trial of a configuration was served by the same engine process
    for h in configs:
        assert len({r["engine_pid"] for r in rows if r["engine_config_hash"] == h}) == 1
    best = [r for r in rows if r["on_pareto_front"]]
    assert len(best) == 1  # single objective: the best trial
    res = {r["trial_id"]: r for r in st.trial_results("grid-sweep")}
    assert res[best[0]["id"]]["output_tok_s"] == max(r["output_tok_s"] for r in res.values())


def test_same_sweep_twice_same_points(ray_session, write_spec, sqlite_url):
    st = Store(sqlite_url)
    for sampler in ("grid", "random", "tpe"):
        text = GRID.replace("max_num_seqs: [8, 16]", "max_num_seqs: [8]").replace(
            "measurement:", f"search: {{sampler: {sampler}, n_trials: 7, seed: 3}}\nmeasurement:")
        loaded = load_spec(write_spec(text))
        a = run_sweep(loaded, st, new_name=f"{sampler}-a")
        b = run_sweep(loaded, st, new_name=f"{sampler}-b")
        pa = [json.dumps(r["params"], sort_keys=True) for r in st.trials(a.sweep_id)]
        pb = [json.dumps(r["params"], sort_keys=True) for r in st.trials(b.sweep_id)]
        assert pa == pb, sampler  # the same sequence, not only the same set
        assert len(pa) == 7 or sampler != "grid"


def test_multi_objective_constraints_and_pareto(ray_session, write_spec, sqlite_url):
    text = GRID.replace("measurement:", """search:
  sampler: nsga2
  n_trials: 10
  seed: 1
  objectives: [{metric: output_tok_s, direction: maximize}, {metric: tpot_ms_p99, direction: minimize}]
  constraints: [{metric: ttft_ms_p99, max: 1000000}]
measurement:""")
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(text)), st)
    res = st.trial_results("grid-sweep")
    assert out.completed + out.reused == 10
    assert all(r["feasible"] in (True, 1) for r in res)  # SQLite returns booleans of a view as 0/1
    front = [r for r in res if r["on_pareto_front"]]
    assert front
    for f in front:  # nothing measured dominates a front member
        assert not any(o["output_tok_s"] > f["output_tok_s"] and o["tpot_ms_p99"] < f["tpot_ms_p99"] for o in res)


def test_infeasible_slo_excluded_from_front(ray_session, write_spec, sqlite_url):
    text = GRID.replace("measurement:", "search: {constraints: [{metric: ttft_ms_p99, max: 0.0}]}\nmeasurement:")
    st = Store(sqlite_url)
    run_sweep(load_spec(write_spec(text)), st)
    res = st.trial_results("grid-sweep")
    assert all(r["feasible"] in (False, 0) for r in res) and not any(r["on_pareto_front"] for r in res)


def test_actor_killed_mid_trial_fails_one_trial(ray_session, write_spec, sqlite_url):
    text = GRID.replace("step_seconds: 0.001", "step_seconds: 0.05").replace("max_num_seqs: [8, 16]", "max_num_seqs: [8]")
    st = Store(sqlite_url)
    killed = {}

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            for r in st.trials(1) if st.get_sweep("grid-sweep") else []:
                if r["state"] == "RUNNING" and r["engine_pid"] and r["method"] == "ngram":
                    os.kill(r["engine_pid"], signal.SIGKILL)
                    killed["id"] = r["id"]
                    return
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    out = run_sweep(load_spec(write_spec(text)), st)
    t.join()
    assert killed, "never saw a running ngram trial to kill"
    rows = {r["id"]: r for r in st.trials(out.sweep_id)}
    assert [r["id"] for r in rows.values() if r["state"] == "FAIL"] == [killed["id"]]
    assert "died" in rows[killed["id"]]["error"] or "Actor" in rows[killed["id"]]["error"]
    assert out.completed == len(rows) - 1  # the sweep went on, with a replacement actor
    assert out.engine_starts == 4  # 3 configurations + 1 replacement


def test_trial_timeout(ray_session, write_spec, sqlite_url):
    text = (GRID.replace("step_seconds: 0.001", "step_seconds: 0.2").replace("max_num_seqs: [8, 16]", "max_num_seqs: [8]")
            .replace("concurrency: [1, 2, 4]", "concurrency: [1]").replace("warmup_requests: 0", "warmup_requests: 0, trial_timeout_s: 0.5"))
    st = Store(sqlite_url)
    out = run_sweep(load_spec(write_spec(text)), st)
    rows = st.trials(out.sweep_id)
    assert out.failed == 3 and all("timed out after 0.5 s" in r["error"] for r in rows)


CLI_SPEC = GRID.replace("step_seconds: 0.001", "step_seconds: 0.02").replace("max_num_seqs: [8, 16]", "max_num_seqs: [8]")


def _run_cli(spec: Path, store: str, *extra: str) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(spec), "--store", store, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)


def _wait_for_complete(st: Store, n: int, proc, timeout=120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = st.get_sweep("grid-sweep")
        if s and sum(r["state"] == "COMPLETE" for r in st.trials(s["id"])) >= n:
            return
        if proc.poll() is not None:
            pytest.fail(f"controller exited early: {proc.stdout.read()[-3000:]}")
        time.sleep(0.2)
    pytest.fail("no trial completed in time")


def test_killed_controller_resumes_without_rerunning(write_spec, sqlite_url):
    spec = write_spec(CLI_SPEC)
    st = Store(sqlite_url)
    proc = _run_cli(spec, sqlite_url)
    _wait_for_complete(st, 2, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the controller and the Ray instance it started
    proc.wait()
    sid = st.get_sweep("grid-sweep")["id"]
    before = {r["id"]: r for r in st.trials(sid) if r["state"] == "COMPLETE"}
    assert 2 <= len(before) < 9
    proc = _run_cli(spec, sqlite_url)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    after = {r["id"]: r for r in st.trials(sid)}
    # the trials the killed controller had RUNNING ran again (attempt 2): every trial is COMPLETE
    assert len(after) == 9 and all(r["state"] == "COMPLETE" for r in after.values())
    for tid, r in before.items():  # completed trials were not re-run
        assert after[tid]["finished_at"] == r["finished_at"] and len(st.measurements(tid)) == 1
    assert any(r["attempt"] == 2 for r in after.values())
    assert st.get_sweep("grid-sweep")["status"] == "complete"


def test_sigterm_puts_running_trials_back_to_pending(write_spec, sqlite_url):
    st = Store(sqlite_url)
    spec = write_spec(CLI_SPEC)
    proc = _run_cli(spec, sqlite_url)
    _wait_for_complete(st, 1, proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    sid = st.get_sweep("grid-sweep")["id"]
    rows = st.trials(sid)
    states = [r["state"] for r in rows]
    assert "RUNNING" not in states and "FAIL" not in states and states.count("COMPLETE") >= 1
    assert "PENDING" in states  # what was running (and what never started) runs on resume
    assert all("interrupted" in r["error"] for r in rows if r["state"] == "PENDING" and r["attempt"] > 1)
    assert st.get_sweep("grid-sweep")["status"] == "interrupted"
    proc = _run_cli(spec, sqlite_url)  # a plain resume finishes the sweep
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    assert all(r["state"] == "COMPLETE" for r in st.trials(sid))
