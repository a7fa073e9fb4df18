"""Store outages (issue 48), on a private PostgreSQL server the tests stop and start (never the machine's own):
a restart shorter than SPECSWEEP_STORE_RETRY_S is ridden through and the sweep ends complete with every point
once; a longer outage stops the controller cleanly (exit 4, one line naming the store, no traceback) and a plain
re-run completes; a lease taken over while a controller could not reach the store makes it stop without
writing. Driven by events (the controller's own "store unreachable" line, rows in the store), with bounds far
from the waits they allow."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

pytestmark = [pytest.mark.ray, pytest.mark.real_clock]  # outages ridden through while windows run: wall-clock time

SPEC = """
name: outage-sweep
target: {model: fake-model}
engine: {backend: fake, fake: {step_seconds: 0.01, clock: real}}
workload: {dataset: smoke, num_prompts: 4, max_tokens: 16}
methods:
  baseline: {}
  ngram: {num_speculative_tokens: [2, 3]}
space: {concurrency: [1, 2, 3]}
measurement: {repeats: 2, warmup_requests: 0, order: blocked}
"""  # 9 trials x 2 windows
TRIALS, REPEATS, PROMPTS = 9, 2, 4


class Controller:
    """`specsweep run` in a subprocess, its output in a file the test can watch."""

    def __init__(self, spec: Path, url: str, log: Path, **env: str):
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", "run", str(spec), "--store", url],
            stdout=log.open("w"), stderr=subprocess.STDOUT, text=True, env=dict(os.environ, **env))

    @property
    def output(self) -> str:
        return self.log.read_text()

    def wait_for_line(self, text: str, timeout: float = 120) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.output:
                return
            if self.proc.poll() is not None:
                pytest.fail(f"controller exited ({self.proc.returncode}) before printing {text!r}:\n{self.output[-3000:]}")
            time.sleep(0.1)
        pytest.fail(f"no {text!r} within {timeout} s:\n{self.output[-3000:]}")

    def finish(self, timeout: float = 300) -> int:
        return self.proc.wait(timeout=timeout)


def scalar(url: str, sql: str):
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql(sql).scalar()
    except (sa.exc.OperationalError, sa.exc.ProgrammingError):  # down, or the schema not made yet
        return None
    finally:
        engine.dispose()


def wait_until(condition, timeout: float = 120, what: str = "") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def completed(url: str) -> int:
    return scalar(url, "SELECT count(*) FROM sweep_trials WHERE state = 'COMPLETE'") or 0


def assert_every_point_once(url: str) -> None:
    assert scalar(url, "SELECT count(*) FROM sweep_trials") == TRIALS
    assert completed(url) == TRIALS
    assert scalar(url, "SELECT count(*) FROM sweep_measurements") == TRIALS * REPEATS
    assert scalar(url, "SELECT count(*) FROM sweep_trial_metrics") == TRIALS
    assert scalar(url, "SELECT count(*) FROM sweep_request_outputs") == TRIALS * REPEATS * PROMPTS
    assert scalar(url, "SELECT count(DISTINCT point_key) FROM sweep_trials") == TRIALS
    assert scalar(url, "SELECT count(*) FROM trials") == TRIALS  # Optuna's own rows: each trial told once
    assert scalar(url, "SELECT status FROM sweeps") == "complete"


@pytest.fixture
def store(private_pg):
    private_pg.psql("CREATE DATABASE store")
    return private_pg.url(database="store")


def test_a_restart_shorter_than_the_bound_is_ridden_through(private_pg, store, write_spec, ray_address, tmp_path):
    c = Controller(write_spec(SPEC), store, tmp_path / "run.log", RAY_ADDRESS=ray_address,
                   SPECSWEEP_STORE_RETRY_S="120")
    wait_until(lambda: completed(store) >= 2, what="two trials COMPLETE")
    private_pg.stop("fast")  # every connection dropped; new ones refused until it is back
    c.wait_for_line("store unreachable")  # the controller noticed (and keeps its engines)
    private_pg.start()
    assert c.finish() == 0, c.output[-3000:]
    out = c.output
    assert "store reachable again" in out and "all 9 trials COMPLETE" in out, out[-3000:]
    assert "Traceback" not in out and out.count("store unreachable") == 1, out[-3000:]
    assert_every_point_once(store)


def test_an_outage_past_the_bound_stops_cleanly_and_a_rerun_completes(private_pg, store, write_spec, ray_address,
                                                                     tmp_path):
    spec = write_spec(SPEC)
    c = Controller(spec, store, tmp_path / "run.log", RAY_ADDRESS=ray_address, SPECSWEEP_STORE_RETRY_S="3")
    wait_until(lambda: completed(store) >= 2, what="two trials COMPLETE")
    private_pg.stop("fast")
    assert c.finish(timeout=120) == 4, c.output[-3000:]
    out = c.output
    assert "store unreachable" in out and "SPECSWEEP_STORE_RETRY_S=3" in out and "run the same command again" in out, out
    assert "127.0.0.1" in out and "Traceback" not in out, out[-3000:]
    private_pg.start()
    again = Controller(spec, store, tmp_path / "rerun.log", RAY_ADDRESS=ray_address)
    assert again.finish() == 0, again.output[-3000:]
    assert "all 9 trials COMPLETE" in again.output
    assert_every_point_once(store)


def test_a_lease_taken_over_during_an_outage_stops_the_first_controller(private_pg, store, write_spec, ray_address,
                                                                        tmp_path):
    """The first controller loses the store (its role may no longer log in, its connections are cut) while the
    store stays up for others; its lease goes stale and a second controller takes the sweep over and finishes it.
    When the first can connect again it finds the lease gone and stops without writing."""
    spec = write_spec(SPEC.replace("step_seconds: 0.01", "step_seconds: 0.03"))
    private_pg.psql("CREATE ROLE first LOGIN SUPERUSER", database="store")
    first_url = private_pg.url(user="first", database="store")
    env = dict(RAY_ADDRESS=ray_address, SPECSWEEP_STORE_RETRY_S="300", SPECSWEEP_LEASE_TIMEOUT_S="4")
    first = Controller(spec, first_url, tmp_path / "first.log", **env)
    wait_until(lambda: completed(store) >= 1, what="a trial COMPLETE")
    private_pg.psql("ALTER ROLE first NOLOGIN; SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE usename = 'first'", database="store")
    first.wait_for_line("store unreachable")
    wait_until(lambda: (scalar(store, "SELECT extract(epoch FROM clock_timestamp()) - heartbeat_at FROM leases") or 0)
               > 4, what="the first controller's lease to go stale")
    second = Controller(spec, store, tmp_path / "second.log", **env)
    assert second.finish() == 0, second.output[-3000:]
    assert "took over the lease" in second.output and "all 9 trials COMPLETE" in second.output, second.output
    private_pg.psql("ALTER ROLE first LOGIN", database="store")
    assert first.finish(timeout=120) == 130, first.output[-3000:]
    out = first.output
    assert "another controller took over" in out and "stopped without writing" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert_every_point_once(store)
