"""`specsweep query` on a read-only connection, saved queries, the DataFrame helper, the report, and the
Optuna study read back with Optuna's own API — on SQLite and PostgreSQL, from a real fake-backend sweep."""

from __future__ import annotations

import json

import optuna
import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.controller.runner import run_sweep
from orchestrator.spec import load_spec
from orchestrator.store import Store
from orchestrator.store.query import QueryError, dataframe, run_query, saved_queries

SPEC = """
name: q-sweep
target: {model: fake-model}
engine: {backend: fake, fake: {step_seconds: 0.002, token_cost: 0.5, acceptance: [0.9, 0.7, 0.5]}}
workload: {dataset: smoke, num_prompts: 4, max_tokens: 16}
methods:
  ngram: {num_speculative_tokens: [2, 3]}
space: {concurrency: [1, 4]}
measurement: {repeats: 2, warmup_requests: 0, order: blocked, noisy_cv: 5.0}
"""
# noisy_cv: the fake engine's timing is real wall-clock, and on a loaded 2-core CI machine two repeats can differ by
# more than 10 % (CI once flagged a baseline `noisy`, cv 0.103). The `noisy` flag is tested in test_validity; here a
# clean sweep must flag nothing else.


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def swept(request, ray_session, tmp_path_factory):
    """One sweep per database for the whole module: every test here only reads it."""
    folder = tmp_path_factory.mktemp("q-sweep")
    url = f"sqlite:///{folder / 'results.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_module_url")
    (folder / "spec.yaml").write_text(SPEC)
    run_sweep(load_spec(folder / "spec.yaml"), Store(url))
    return url


def test_query_reads_and_refuses_writes(swept):
    cols, rows = run_query(swept, "SELECT label, concurrency, speedup FROM trial_results WHERE role = 'search'")
    assert cols == ["label", "concurrency", "speedup"] and len(rows) == 4 and all(r["speedup"] for r in rows)
    for sql in ("DELETE FROM sweeps", "insert into sweeps (name) values ('x')", "DROP VIEW pareto",
                "SELECT 1; DELETE FROM sweeps"):
        with pytest.raises(QueryError, match="read-only|one statement"):
            run_query(swept, sql)
    if swept.startswith("postgresql"):  # a write hidden in a WITH is refused by the read-only connection itself
        with pytest.raises(QueryError, match="read-only"):
            run_query(swept, "WITH d AS (DELETE FROM sweeps RETURNING id) SELECT * FROM d")
    assert run_query(swept, "SELECT count(*) AS n FROM sweeps")[1][0]["n"] == 1  # nothing was deleted


def test_the_connection_itself_is_read_only(swept, monkeypatch):
    """With the word check switched off, the database still refuses every write (SQLite mode=ro, PostgreSQL
    default_transaction_read_only)."""
    from orchestrator.store import query

    monkeypatch.setattr(query, "refuse_writes", lambda pieces: None)
    for sql in ("DELETE FROM sweeps", "UPDATE sweeps SET name = 'x'", "CREATE TABLE t (x INTEGER)"):
        with pytest.raises(QueryError, match="read-only"):
            run_query(swept, sql)
    assert run_query(swept, "SELECT count(*) AS n FROM sweeps")[1][0]["n"] == 1
    assert run_query(swept, "SELECT name FROM sweeps")[1] == [{"name": "q-sweep"}]


def test_saved_queries_cli_and_dataframe(swept):
    assert {"best-by-method", "crossover", "flagged", "pareto", "nightly-regressions"} <= set(saved_queries())
    runner = CliRunner()
    res = runner.invoke(app, ["query", "--saved", "best-by-method", "--store", swept, "-p", "sweep=q-sweep",
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert {(r["label"], r["concurrency"]) for r in rows} == {("ngram", 1), ("ngram", 4)}
    res = runner.invoke(app, ["query", "UPDATE sweeps SET name = 'x'", "--store", swept])
    assert res.exit_code == 2 and "read-only" in res.output
    res = runner.invoke(app, ["query", "--saved", "nope", "--store", swept])
    assert res.exit_code == 2 and "best-by-method" in res.output  # lists what exists
    df = dataframe("crossover", store_url=swept, sweep="q-sweep")
    # the saved query gives, per K, the first measured concurrency whose speedup is below 1 (computed here from
    # the rows: the fake engine's wall-clock timing decides where that is on a loaded machine, not this test)
    rated = [r for r in Store(swept).trial_results("q-sweep") if r.speedup is not None]
    expected = {k: min((r.concurrency for r in rated if r.num_speculative_tokens == k and r.speedup < 1),
                       default=None) for k in (2, 3)}
    got = {int(r["k"]): None if pd.isna(r["crossover_concurrency"]) else int(r["crossover_concurrency"])
           for _, r in df.iterrows()}
    assert len(df) == 2 and got == expected, (got, expected)
    # the saved `pareto` query returns exactly the rows trial_results marks as on the front
    front = {r.trial for r in Store(swept).trial_results("q-sweep") if r.on_pareto_front}
    res = runner.invoke(app, ["query", "--saved", "pareto", "--store", swept, "-p", "sweep=q-sweep", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert front and {r["trial"] for r in json.loads(res.stdout)} == front
    res = runner.invoke(app, ["query", "--saved", "flagged", "--store", swept, "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout) == [], res.output  # a clean sweep flags nothing
    df = dataframe("SELECT * FROM method_summary", store_url=swept)
    assert len(df) == 2 and set(df["num_speculative_tokens"]) <= {2, 3}


def test_optuna_reads_the_study_from_the_same_database(swept):
    url = Store(swept).url
    names = [s.study_name for s in optuna.get_all_study_summaries(storage=url)]
    assert "specsweep:q-sweep" in names
    study = optuna.load_study(study_name="specsweep:q-sweep", storage=url)
    assert len(study.trials) == 4 and {t.params["concurrency"] for t in study.trials} == {1, 4}


def test_report_writes_html_and_pngs(swept, tmp_path):
    res = CliRunner().invoke(app, ["report", "q-sweep", "--store", swept, "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    for name in ("pareto.png", "speedup.png", "acceptance_by_position.png", "acceptance_length.png"):
        data = (tmp_path / "rep" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "Plotly" in page and "q-sweep" in page and "<script src=" not in page  # plotly.js inlined: offline
    # the page's results table is the store's trial_results, row by row and value by value
    import html
    import re

    table = page.split("<table class='results' id='results'>", 1)[1].split("</table>", 1)[0]
    shown = {int(trial): {col: html.unescape(v) for col, v in re.findall(r"data-col='([a-z_0-9]+)' data-v='([^']*)'",
                                                                         row)}
             for trial, row in re.findall(r"<tr class='[a-z]*' data-trial='(\d+)'>(.*?)</tr>", table)}
    stored = {r.trial: r for r in Store(swept).trial_results("q-sweep")}
    assert set(shown) == set(stored) and stored
    for trial, cells in shown.items():
        r = stored[trial]
        assert cells["label"] == r.label and cells["concurrency"] == str(r.concurrency)
        for col in ("output_tok_s", "ttft_ms_p50", "tpot_ms_p50", "speedup"):
            assert cells[col] == ("" if r.column(col) is None else str(r.column(col))), (trial, col)


def test_literals_are_text_and_parameters_bind(swept):
    assert run_query(swept, "SELECT 'a;b' AS s")[1] == [{"s": "a;b"}]  # a ';' in a string is no second statement
    assert run_query(swept, "SELECT ':sweep' AS s")[1] == [{"s": ":sweep"}]  # nor is a ':name' a parameter
    assert run_query(swept, "SELECT '50%' AS s, name FROM sweeps WHERE name = :sweep -- a comment; with ':x'",
                     {"sweep": "q-sweep"})[1] == [{"s": "50%", "name": "q-sweep"}]
    with pytest.raises(QueryError, match="one statement"):
        run_query(swept, "SELECT 'x'; SELECT 2")
    res = CliRunner().invoke(app, ["query", "SELECT 'a;b' AS s", "--store", swept, "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout) == [{"s": "a;b"}], res.output


def test_a_runaway_query_is_stopped_at_its_timeout(swept):
    import time

    slow = ("SELECT pg_sleep(30)" if swept.startswith("postgresql") else
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c")
    t0 = time.monotonic()
    with pytest.raises(QueryError, match="timeout"):
        run_query(swept, slow, timeout_s=1.0)
    assert time.monotonic() - t0 < 15
    res = CliRunner().invoke(app, ["query", slow, "--store", swept, "--timeout", "0.5"])
    assert res.exit_code == 2 and "--timeout" in res.output, res.output
