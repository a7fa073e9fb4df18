"""A store that many runs share: sweep leases, honest resume after kills, and a safe first open of a new
database by several processes at once. Real Ray, real SQLite and PostgreSQL, fake engines (quick)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from orchestrator.states import TrialState
from orchestrator.store import Store, TrialRow

SPEC = """
name: shared-sweep
target: {model: fake-model}
engine: {backend: fake, fake: {step_seconds: 0.02, acceptance: [0.7, 0.5, 0.3, 0.2]}}
workload: {dataset: smoke, num_prompts: 4, max_tokens: 16}
methods:
  baseline: {}
  ngram: {num_speculative_tokens: [2, 3, 4]}
space: {concurrency: [1, 2, 3, 4]}
measurement: {repeats: 1, warmup_requests: 0}
"""  # 16 trials on 4 engines


@pytest.fixture(autouse=True)
def _controllers_attach_to_the_test_ray(request, monkeypatch):
    """Controllers started by these tests attach to the test run's Ray instance (RAY_ADDRESS), as drivers of a
    cluster do; a SIGKILLed controller's actors die with their owner."""
    if request.node.get_closest_marker("ray"):
        monkeypatch.setenv("RAY_ADDRESS", request.getfixturevalue("ray_address"))


def _cli(spec: Path, store: str, *extra: str, env: dict | None = None) -> subprocess.Popen:
    e = dict(os.environ, **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(spec), "--store", store, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e, start_new_session=True)


def _rows(st: Store, name: str = "shared-sweep") -> list[TrialRow]:
    s = st.get_sweep(name)
    return st.trials(s.id) if s else []


def _wait(st: Store, proc: subprocess.Popen, what, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if what(_rows(st)):
            return
        if proc.poll() is not None:
            pytest.fail(f"controller exited early ({proc.returncode}): {proc.stdout.read()[-3000:]}")
        time.sleep(0.1)
    pytest.fail("timed out waiting for the controller")


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the controller (its engine actors die with their owner)
    proc.wait()
    proc.stdout.close()


def _complete(rows: list[dict]) -> int:
    return sum(r.state == TrialState.COMPLETE for r in rows)


# ---- leases ------------------------------------------------------------------------------------------------
def test_lease_refuses_a_live_owner_takes_over_a_stale_one(store_url):
    st = Store(store_url)
    a = st.acquire_lease("sweep:x", "hostA:1:a", "hostA", 1, stale_after_s=1.0)
    assert a.acquired and not a.taken_over
    b = st.acquire_lease("sweep:x", "hostB:2:b", "hostB", 2, stale_after_s=1.0)
    assert not b.acquired and b.holder.owner == "hostA:1:a" and b.holder.host == "hostA"
    assert st.renew_lease("sweep:x", "hostA:1:a")  # the owner's heartbeat
    time.sleep(1.3)  # no heartbeat for longer than the timeout (database clock)
    b = st.acquire_lease("sweep:x", "hostB:2:b", "hostB", 2, stale_after_s=1.0)
    assert b.acquired and b.taken_over and b.holder.owner == "hostA:1:a" and b.holder.heartbeat_age_s >= 1.0
    assert not st.renew_lease("sweep:x", "hostA:1:a")  # the old owner learns it lost the lease
    c = st.acquire_lease("sweep:x", "hostC:3:c", "hostC", 3, stale_after_s=3600, force=True)  # --break-lease
    assert c.acquired and c.holder.owner == "hostB:2:b"
    st.release_lease("sweep:x", "hostB:2:b")  # not the owner: nothing happens
    assert st.lease_holder("sweep:x").owner == "hostC:3:c"
    st.release_lease("sweep:x", "hostC:3:c")
    assert st.lease_holder("sweep:x") is None


def _race(url: str, n: int, attempt) -> list:
    """n threads, each with its own Store (its own connections), call attempt(store, i) at one barrier."""
    import threading

    stores = [Store(url) for _ in range(n)]
    barrier, results = threading.Barrier(n), [None] * n

    def go(i: int) -> None:
        barrier.wait()
        results[i] = attempt(stores[i], i)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for s in stores:
        s.dispose()
    return results


def test_racing_owners_get_one_lease(store_url):
    """Eight would-be owners at once, each on its own connection: one gets a free lease; of eight taking over
    a dead owner's lease, one wins and the others see the winner. The take-over is a compare-and-set on the
    holder's owner id: without it 3 to 7 of the 8 won, on SQLite and on PostgreSQL (seen, 2026-12-07)."""
    Store(store_url).dispose()  # the schema, before the racers open it
    got = _race(store_url, 8, lambda st, i: st.acquire_lease("sweep:race", f"h:{i}:x", "h", i, stale_after_s=3600))
    winners = [i for i, r in enumerate(got) if r.acquired]
    assert len(winners) == 1, got
    assert all(r.holder.owner == f"h:{winners[0]}:x" for r in got if not r.acquired), got
    st = Store(store_url)
    st.release_lease("sweep:race", f"h:{winners[0]}:x")
    st.acquire_lease("sweep:race", "ghost:1:x", "ghost", 1, stale_after_s=3600)  # a controller that died
    got = _race(store_url, 8, lambda st, i: st.acquire_lease("sweep:race", f"t:{i}:x", "t", i, stale_after_s=3600,
                                                             dead=lambda h: h.owner == "ghost:1:x"))
    winners = [i for i, r in enumerate(got) if r.acquired]
    assert len(winners) == 1 and got[winners[0]].taken_over and got[winners[0]].holder.owner == "ghost:1:x", got
    assert st.lease_holder("sweep:race").owner == f"t:{winners[0]}:x"


def test_a_dead_owner_on_this_host_is_taken_over_at_once(sqlite_url):
    from orchestrator.controller.lease import Lease, LeaseHeld

    st = Store(sqlite_url)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    lease = Lease(st, "sweep:y", "sweep 'y'", timeout_s=3600)
    st.acquire_lease("sweep:y", f"{lease.host}:{gone.pid}:z", lease.host, gone.pid, 3600)
    notes = []
    with Lease(st, "sweep:y", "sweep 'y'", timeout_s=3600, note=notes.append):
        assert notes and "process is gone" in notes[0]
        alive = Lease(st, "sweep:y", "sweep 'y'", timeout_s=3600)  # this process is alive: refused
        with pytest.raises(LeaseHeld, match=f"pid {os.getpid()}"):
            alive.__enter__()
    assert st.lease_holder("sweep:y") is None  # released on exit


# ---- honest resume --------------------------------------------------------------------------------------------
@pytest.mark.real_clock
@pytest.mark.ray
def test_three_kills_then_one_plain_run_completes_every_trial(write_spec, sqlite_url):
    spec = write_spec(SPEC.replace("step_seconds: 0.02", "step_seconds: 0.02, clock: real"))  # killed mid-trial
    st = Store(sqlite_url)
    done_before: dict[int, object] = {}
    for n in (2, 6, 10):  # SIGKILL the controller three times, each after more trials completed
        proc = _cli(spec, sqlite_url)
        _wait(st, proc, lambda rows, n=n: _complete(rows) >= n and any(r.state == TrialState.RUNNING for r in rows))
        _kill(proc)
        done_before.update({r.id: r.finished_at for r in _rows(st) if r.state == TrialState.COMPLETE})
    rows = _rows(st)
    assert any(r.state == TrialState.RUNNING for r in rows)  # left by the dead controller
    proc = _cli(spec, sqlite_url)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    rows = {r.id: r for r in _rows(st)}
    assert len(rows) == 16 and all(r.state == TrialState.COMPLETE for r in rows.values()), out[-3000:]
    for tid, finished in done_before.items():  # no completed trial ran again
        assert rows[tid].finished_at == finished and len(st.measurements(tid)) == 1
    assert any(r.attempt > 1 for r in rows.values())  # the interrupted ones ran again, attempt counted
    assert "all 16 trials COMPLETE" in out and st.get_sweep("shared-sweep").status == "complete"


@pytest.mark.real_clock
@pytest.mark.ray
def test_an_interrupted_adaptive_sweep_resumes_its_unfinished_trials(write_spec, sqlite_url):
    spec = write_spec(SPEC.replace("measurement:", "search: {sampler: random, n_trials: 5, seed: 1}\nmeasurement:")
                      .replace("step_seconds: 0.02", "step_seconds: 0.08, clock: real"))  # trials of ~1-2 s: SIGTERM lands mid-trial
    st = Store(sqlite_url)
    proc = _cli(spec, sqlite_url)
    _wait(st, proc, lambda rows: _complete(rows) >= 1 and any(r.state == TrialState.RUNNING for r in rows))
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    unfinished = [r.id for r in _rows(st) if r.state != TrialState.COMPLETE]
    assert unfinished  # what was being measured when the signal came
    proc = _cli(spec, sqlite_url)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    rows = {r.id: r for r in _rows(st)}
    assert all(rows[i].state == TrialState.COMPLETE for i in unfinished)  # the same rows ran again, none left behind
    assert all(r.state == TrialState.COMPLETE for r in rows.values())
    assert sum(r.role == "search" for r in rows.values()) <= 5


@pytest.mark.ray
def test_a_trial_that_failed_on_its_own_keeps_exit_1(write_spec, sqlite_url):
    spec = write_spec(SPEC.replace("step_seconds: 0.02,", "step_seconds: 0.001, fail_start_methods: [ngram],")
                      .replace("[2, 3, 4]", "[2]").replace("[1, 2, 3, 4]", "[1]"))
    st = Store(sqlite_url)
    for _attempt in range(2):  # the first run, then a plain resume: the failure stays, and so does exit 1
        proc = _cli(spec, sqlite_url)
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 1, out[-3000:]
        assert "1 of 2 trials COMPLETE" in out and "1 FAIL" in out, out[-3000:]
    assert sorted(r.state for r in _rows(st)) == [TrialState.COMPLETE, TrialState.FAIL]
    assert [r.attempt for r in _rows(st) if r.state == TrialState.FAIL] == [1]  # a plain resume did not re-run it
    assert st.get_sweep("shared-sweep").status == "failed"
    proc = _cli(spec, sqlite_url, "--retry-failed")  # asked for: it runs again (and fails again here)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1 and [r.attempt for r in _rows(st) if r.state == TrialState.FAIL] == [2], out[-3000:]


@pytest.mark.real_clock
@pytest.mark.ray
def test_second_controller_is_refused_and_a_killed_one_is_taken_over(write_spec, sqlite_url):
    small = SPEC.replace("[2, 3, 4]", "[2, 3]").replace("[1, 2, 3, 4]", "[1, 2]").replace(
        "step_seconds: 0.02", "step_seconds: 0.02, clock: real")  # 6 trials on 3 engines, in wall-clock time
    spec = write_spec(small)
    st = Store(sqlite_url)
    first = _cli(spec, sqlite_url)
    _wait(st, first, lambda rows: any(r.state == TrialState.RUNNING for r in rows))
    second = _cli(spec, sqlite_url)
    out, _ = second.communicate(timeout=120)
    assert second.returncode == 2, out[-3000:]
    assert f"pid {first.pid}" in out and "since" in out and "--break-lease" in out
    out, _ = first.communicate(timeout=300)  # the first run was not disturbed
    assert first.returncode == 0, out[-3000:]
    assert _complete(_rows(st)) == 6
    # a sweep whose controller was SIGKILLed: the next run takes the dead controller's lease over
    spec2 = write_spec(small.replace("shared-sweep", "shared-2"), name="spec2.yaml")
    proc = _cli(spec2, sqlite_url)
    deadline = time.time() + 180
    while not (st.get_sweep("shared-2") and _complete(_rows(st, "shared-2")) >= 2) and time.time() < deadline:
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        time.sleep(0.1)
    _kill(proc)
    assert st.lease_holder("sweep:shared-2") is not None  # the dead controller's lease is still there
    proc = _cli(spec2, sqlite_url)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    assert "took over the lease" in out and _complete(_rows(st, "shared-2")) == 6
    assert st.lease_holder("sweep:shared-2") is None


@pytest.mark.ray
def test_two_controllers_started_at_once_on_postgres_run_each_trial_once(write_spec, pg_url):
    """Two `specsweep run` of one sweep started together against one PostgreSQL database. Whichever way the race
    goes (one refused while the other runs, or the second finding the sweep done), every trial is measured once:
    one row per point, each complete with one window, and no exit but 0 (ran) or 2 (refused, naming the other)."""
    spec = write_spec(SPEC.replace("[2, 3, 4]", "[2, 3]").replace("[1, 2, 3, 4]", "[1, 2]"))  # 6 trials
    procs = [_cli(spec, pg_url) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes in ([0, 0], [0, 2]), (codes, [o[-3000:] for o in outs])
    for p, out in zip(procs, outs):
        if p.returncode == 2:
            (other,) = [q for q in procs if q is not p]
            assert f"pid {other.pid}" in out and "--break-lease" in out, out[-3000:]
    st = Store(pg_url)
    rows = _rows(st)
    points = [(r.method_label, r.num_speculative_tokens, r.concurrency) for r in rows]
    assert len(points) == len(set(points)) == 6 and _complete(rows) == 6, points
    assert all(len(st.measurements(r.id)) == 1 for r in rows)  # one window each: none measured twice
    assert st.lease_holder("sweep:shared-sweep") is None and len(st.list_sweeps()) == 1


@pytest.mark.ray
def test_a_stale_lease_of_another_host_is_taken_over_after_the_timeout(write_spec, sqlite_url):
    spec = write_spec(SPEC.replace("[2, 3, 4]", "[2]").replace("[1, 2, 3, 4]", "[1]"))
    st = Store(sqlite_url)
    st.acquire_lease("sweep:shared-sweep", "elsewhere:99:q", "elsewhere", 99, 3600)  # a controller that died there
    # within the timeout (generous: a loaded machine takes seconds to start the controller): refused
    proc = _cli(spec, sqlite_url, env={"SPECSWEEP_LEASE_TIMEOUT_S": "60"})
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "elsewhere pid 99" in out, out[-3000:]
    time.sleep(2.5)  # its heartbeat is now older than a 2 s timeout
    proc = _cli(spec, sqlite_url, env={"SPECSWEEP_LEASE_TIMEOUT_S": "2"})
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "took over the lease" in out and "no heartbeat" in out, out[-3000:]


# ---- first open of a new PostgreSQL database by several processes --------------------------------------------
def _open_and_run(idx: int, rounds: int, urls, results, barrier, ray_address: str, spec_path: str) -> None:
    from orchestrator.controller.ray_session import ensure_ray
    from orchestrator.controller.runner import run_sweep
    from orchestrator.spec import load_spec

    ensure_ray(ray_address)
    for r in range(rounds):
        url = urls.get()
        barrier.wait()
        try:
            st = Store(url)
            out = run_sweep(load_spec(spec_path), st, new_name=f"p{idx}-r{r}")
            results.put((idx, r, "ok" if out.all_complete else f"incomplete: {out.states}"))
            st.dispose()
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            results.put((idx, r, f"{type(e).__name__}: {str(e)[:500]}"))


def test_four_processes_open_one_new_postgres_database(ray_session, pg_server_url, write_spec):
    import ray

    spec = write_spec(SPEC.replace("[2, 3, 4]", "[2]").replace("[1, 2, 3, 4]", "[1]")
                      .replace("step_seconds: 0.02", "step_seconds: 0.001"))
    admin = sa.create_engine(sa.engine.make_url(pg_server_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    ctx = mp.get_context("spawn")
    procs, rounds = 4, 6
    urls, results, barrier = ctx.Queue(), ctx.Queue(), ctx.Barrier(procs)
    address = ray.get_runtime_context().gcs_address
    workers = [ctx.Process(target=_open_and_run, args=(i, rounds, urls, results, barrier, address, str(spec)))
               for i in range(procs)]
    for w in workers:
        w.start()
    failures = []
    try:
        for _round in range(rounds):
            name = f"specsweep_race_{uuid.uuid4().hex[:8]}"
            with admin.connect() as c:
                c.execute(sa.text(f'CREATE DATABASE "{name}"'))
            url = sa.engine.make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
            for _ in range(procs):
                urls.put(url)
            got = [results.get(timeout=300) for _ in range(procs)]
            failures += [g for g in got if g[2] != "ok"]
            st = Store(url)
            assert sorted(s.status for s in st.list_sweeps()) == ["complete"] * procs, got
            st.dispose()
            with admin.connect() as c:
                c.execute(sa.text(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"))
                c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
    finally:
        for w in workers:
            w.join(timeout=30)
            if w.is_alive():
                w.kill()
        admin.dispose()
    assert failures == []


def test_a_bad_lease_timeout_is_refused_plainly(write_spec, sqlite_url):
    from typer.testing import CliRunner

    from orchestrator.cli import app

    res = CliRunner().invoke(app, ["run", str(write_spec(SPEC)), "--store", sqlite_url],
                             env={"SPECSWEEP_LEASE_TIMEOUT_S": "soon"})
    out = res.output
    assert res.exit_code == 2 and "SPECSWEEP_LEASE_TIMEOUT_S='soon'" in out and "Traceback" not in out, out[-2000:]
