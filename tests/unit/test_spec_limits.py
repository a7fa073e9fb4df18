"""Absurd input is refused at load time: a key given twice (both lines named), and every count and size above its
documented bound (field, file:line, the allowed range) — `specsweep run` exits 2 and stores nothing. Pure."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.errors import SpecError
from orchestrator.nightly.suite import load_suite
from orchestrator.spec import load_spec

pytestmark = pytest.mark.pure

SPEC = """\
name: limits
target: {model: smollm2-135m-instruct, max_model_len: 2048}
engine: {backend: fake}
workload: {dataset: smoke, num_prompts: 16, max_tokens: 64}
methods:
  baseline: {}
space: {concurrency: [1, 4]}
measurement: {repeats: 3}
"""


def refused(write_spec, text: str):
    path = write_spec(text)
    with pytest.raises(SpecError) as ei:
        load_spec(path)
    return path, ei.value.issues


def test_a_key_given_twice_is_refused_with_both_lines(write_spec):
    path, issues = refused(write_spec, SPEC + "name: other\n")
    (i,) = issues
    assert (i.file, i.line, i.path) == (str(path), 9, "name"), i
    assert "given twice (lines 1 and 9)" in i.message, i


def test_a_nested_key_given_twice_is_refused(write_spec):
    _, issues = refused(write_spec, SPEC.replace("  baseline: {}", "  baseline: {}\n  baseline: {}"))
    (i,) = issues
    assert (i.line, i.path) == (7, "methods.baseline") and "lines 6 and 7" in i.message, i


@pytest.mark.parametrize("old,new,field,line,allowed", [
    ("concurrency: [1, 4]", "concurrency: [1, 1000000000000]", "space.concurrency", 7, "<= 100,000"),
    ("concurrency: [1, 4]", "request_rate: [2, 100001]", "space.request_rate", 7, "<= 100,000 requests/s"),
    ("max_tokens: 64}", "max_tokens: 64, max_concurrency: 100001}", "workload.max_concurrency", 4, "100000"),
    ("num_prompts: 16", "num_prompts: 10000001", "workload.num_prompts", 4, "10000000"),
    ("max_tokens: 64", "max_tokens: 4096", "workload.max_tokens", 4, "allowed 1..2048"),
    ("repeats: 3", "repeats: 1001", "measurement.repeats", 8, "1000"),
    ("dataset: smoke", "dataset: random, random_input_len: 2000", "workload.random_input_len", 4, "2000 + 64"),
])
def test_out_of_range_values_name_field_line_and_range(write_spec, old, new, field, line, allowed):
    assert old in SPEC
    path, issues = refused(write_spec, SPEC.replace(old, new))
    (i,) = issues
    assert (i.file, i.line, i.path) == (str(path), line, field), i
    assert allowed in i.message, i


def test_values_at_the_bounds_are_accepted(write_spec):
    text = SPEC.replace("max_tokens: 64", "max_tokens: 2048").replace("repeats: 3", "repeats: 1000")
    text = text.replace("concurrency: [1, 4]", "concurrency: [1, 100000]")
    load_spec(write_spec(text))


def test_run_exits_2_and_stores_nothing(write_spec, tmp_path):
    db = tmp_path / "results.db"
    for text in (SPEC + "name: twice\n", SPEC.replace("[1, 4]", "[1000000000000]")):
        res = CliRunner().invoke(app, ["run", str(write_spec(text)), "--store", f"sqlite:///{db}"])
        assert res.exit_code == 2, res.output
        assert "spec.yaml:" in res.output and "Traceback" not in res.output, res.output
        if db.exists():  # the store may have been opened: no sweep row in it
            engine = create_engine(f"sqlite:///{db}")
            with engine.connect() as c:
                tables = inspect(c).get_table_names()
                assert "sweeps" not in tables or c.exec_driver_sql("select count(*) from sweeps").scalar() == 0
            engine.dispose()


def test_a_nightly_suite_with_a_key_given_twice_is_refused(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text("suite: n\nsweeps: [a.yaml]\nhistory: 3\nhistory: 5\n", encoding="utf-8")
    with pytest.raises(SpecError) as ei:
        load_suite(suite)
    (i,) = ei.value.issues
    assert (i.line, i.path) == (4, "history") and "lines 3 and 4" in i.message, i


@pytest.mark.parametrize("env,expected", [({}, False), ({"SPECSWEEP_ENGINE_LOG": "console"}, True)])
def test_ray_streams_worker_output_to_the_console_only_when_verbose(monkeypatch, env, expected):
    """Raylet lines (`worker_pool.cc: Started worker process`) and actors' prints stay in Ray's log files unless
    --verbose asked for engine output on the console."""
    import ray

    from orchestrator.controller.ray_session import ensure_ray

    for k in ("SPECSWEEP_ENGINE_LOG", "SPECSWEEP_ENGINE_LOG_LEVEL", "RAY_ADDRESS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    seen: dict = {}
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: seen.update(kw))
    ensure_ray(address="10.0.0.1:6380")
    assert seen["log_to_driver"] is expected
    ensure_ray()
    assert seen["log_to_driver"] is expected and seen["address"] == "local"
