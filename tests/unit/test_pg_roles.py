"""Least privilege on PostgreSQL (issue 48), on a private server this test starts: `specsweep db roles` creates
an owner, a writer and a read-only role on a fresh database; the owner migrates, a sweep runs as the writer (no
DDL), and the reader reads every view and nothing else — no write, no pg_read_file / pg_ls_dir. `query` says so
when its connection could write."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.store import Store
from orchestrator.store.views import VIEWS

SPEC = """
name: roles-sweep
target: {model: fake-model}
engine: {backend: fake, fake: {step_seconds: 0.0005}}
workload: {dataset: smoke, num_prompts: 2, max_tokens: 4}
methods:
  baseline: {}
  ngram: {num_speculative_tokens: 2}
space: {concurrency: [1]}
measurement: {repeats: 1, warmup_requests: 0}
"""


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def refused(url: str, sql: str) -> str:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
    except sa.exc.DBAPIError as e:
        return str(e.orig)
    finally:
        engine.dispose()
    raise AssertionError(f"{sql!r} was allowed")


def test_owner_writer_reader(private_pg, ray_session, write_spec):
    private_pg.psql("CREATE DATABASE store")
    admin = private_pg.url(database="store")
    res = invoke("db", "roles", "--store", admin)
    assert res.exit_code == 0, res.output
    assert "specsweep_owner" in res.output and "GRANT SELECT ON ALL TABLES IN SCHEMA public TO specsweep_reader" \
        in res.output
    assert invoke("db", "roles", "--store", admin).exit_code == 0  # idempotent
    owner, writer, reader = (private_pg.url(user=f"specsweep_{k}", database="store")
                             for k in ("owner", "writer", "reader"))

    # the writer cannot create the schema (no DDL): refused in one line, naming the store
    res = invoke("db", "upgrade", "--store", writer)
    assert res.exit_code == 2 and "permission denied" in res.output and "Traceback" not in res.output, res.output
    assert invoke("db", "upgrade", "--store", owner).exit_code == 0  # the owner migrates

    # a sweep runs as the writer on the schema the owner made
    res = invoke("run", str(write_spec(SPEC)), "--store", writer)
    assert res.exit_code == 0, res.output
    assert "all 2 trials COMPLETE" in res.output
    assert "permission denied" in refused(writer, "CREATE TABLE x (a int)")
    assert "must be owner" in refused(writer, "DROP TABLE sweeps") or "permission denied" in refused(
        writer, "DROP TABLE sweeps")

    # the reader: every view readable, nothing written, no server files
    engine = sa.create_engine(reader)
    with engine.connect() as conn:
        for view in VIEWS:
            conn.exec_driver_sql(f"SELECT * FROM {view} LIMIT 1").fetchall()
        assert conn.exec_driver_sql("SELECT count(*) FROM trial_results").scalar() == 2
    engine.dispose()
    for sql in ("INSERT INTO sweeps (name) VALUES ('x')", "DELETE FROM sweep_trials", "UPDATE sweeps SET name = 'y'",
                "CREATE TABLE y (a int)", "SELECT pg_read_file('/etc/hostname')", "SELECT pg_ls_dir('/')"):
        assert "permission denied" in refused(reader, sql), sql
    res = invoke("query", "SELECT label FROM trial_results ORDER BY label", "--store", reader, "--format", "json")
    assert res.exit_code == 0 and "note:" not in res.output, res.output
    res = invoke("results", "roles-sweep", "--store", reader)
    assert res.exit_code == 0 and "ngram" in res.output, res.output

    # a later migration's tables and views are readable by the reader too (the owner's default privileges)
    private_pg.psql("CREATE TABLE later_table (a int); CREATE VIEW later_view AS SELECT 1 AS a",
                    user="specsweep_owner", database="store")
    private_pg.psql("SELECT * FROM later_table, later_view", user="specsweep_reader", database="store")

    # query and report say so when the connection could do more than read
    res = invoke("query", "SELECT 1 AS one", "--store", admin)
    assert res.exit_code == 0 and "is a superuser" in res.output, res.output
    res = invoke("query", "SELECT 1 AS one", "--store", writer)
    assert res.exit_code == 0 and "can write to the store" in res.output, res.output
    Store(admin).dispose()


def test_roles_on_sqlite_are_refused_in_one_line(tmp_path):
    res = invoke("db", "roles", "--store", f"sqlite:///{tmp_path / 'r.db'}")
    assert res.exit_code == 2 and "roles are a PostgreSQL feature" in res.output, res.output


@pytest.mark.parametrize("prefix", ["Bad", "x;drop", ""])
def test_a_bad_prefix_is_refused(prefix, tmp_path):
    res = invoke("db", "roles", "--store", "postgresql://u@127.0.0.1:1/db", "--prefix", prefix)
    assert res.exit_code == 2 and "role prefix" in res.output, res.output
