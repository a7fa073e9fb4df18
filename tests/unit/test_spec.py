"""Spec loading: valid specs expand as documented; every kind of bad input names file, line, field."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.errors import SpecError
from orchestrator.spec import load_spec

GOOD = """
name: smoke-cpu
target: {model: smollm2-135m-instruct, dtype: bfloat16, max_model_len: 2048}
engine: {backend: vllm, enforce_eager: true, enable_prefix_caching: false}
workload: {dataset: smoke, num_prompts: 16, max_tokens: 128, temperature: 0.0}
methods:
  baseline: {}
  ngram: {num_speculative_tokens: [2, 4], prompt_lookup_max: 3}
space: {concurrency: [1, 4]}
measurement: {repeats: 1, warmup_requests: 2}
"""


def issues_of(write_spec, text):
    path = write_spec(text)
    with pytest.raises(SpecError) as ei:
        load_spec(path)
    return path, ei.value.issues


def test_good_spec_expands_methods(write_spec):
    loaded = load_spec(write_spec(GOOD))
    assert loaded.spec.name == "smoke-cpu"
    assert [(p.label, p.num_speculative_tokens) for p in loaded.method_points] == [
        ("baseline", None), ("ngram", 2), ("ngram", 4)]
    assert loaded.method_points[1].params == {"num_speculative_tokens": 2, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
    assert len(loaded.spec_hash) == 64


def test_spec_hash_changes_with_content(write_spec):
    a = load_spec(write_spec(GOOD, "a.yaml")).spec_hash
    b = load_spec(write_spec(GOOD.replace("max_tokens: 128", "max_tokens: 64"), "b.yaml")).spec_hash
    assert a != b


def test_labelled_method_entry(write_spec):
    loaded = load_spec(write_spec(GOOD.replace("  baseline: {}", "  baseline: {}\n  ngram-long: {method: ngram, num_speculative_tokens: 6}")))
    assert ("ngram-long", "ngram", 6) in [(p.label, p.method, p.num_speculative_tokens) for p in loaded.method_points]


def test_unknown_key_names_line_and_allowed_keys(write_spec):
    path, issues = issues_of(write_spec, GOOD.replace("workload: {dataset: smoke,", "workload: {datasett: smoke,"))
    (i,) = issues
    assert i.file == str(path) and i.line == 4 and i.path == "workload.datasett"
    assert "unknown key 'datasett'" in i.message and "dataset" in i.message and "num_prompts" in i.message


def test_wrong_type(write_spec):
    _, issues = issues_of(write_spec, GOOD.replace("max_tokens: 128", "max_tokens: lots"))
    (i,) = issues
    assert i.path == "workload.max_tokens" and i.line == 4 and "integer" in i.message and "'lots'" in i.message


def test_literal_lists_allowed_values(write_spec):
    _, issues = issues_of(write_spec, GOOD.replace("backend: vllm", "backend: sglang"))
    (i,) = issues
    assert i.path == "engine.backend" and "'vllm'" in i.message and "'fake'" in i.message


def test_missing_required_key(write_spec):
    _, issues = issues_of(write_spec, GOOD.replace("target: {model: smollm2-135m-instruct, dtype: bfloat16, max_model_len: 2048}\n", ""))
    assert [i.path for i in issues] == ["target"]
    assert "required" in issues[0].message


def test_empty_method_list(write_spec):
    text = GOOD.split("methods:")[0] + "methods: {}\nspace: {concurrency: [1]}\n"
    _, issues = issues_of(write_spec, text)
    (i,) = issues
    assert i.path == "methods" and "at least one method" in i.message and i.line == 5


def test_unknown_method_lists_known(write_spec):
    _, issues = issues_of(write_spec, GOOD.replace("  baseline: {}", "  medusa: {}"))
    (i,) = issues
    assert i.path == "methods.medusa" and i.line == 6
    assert "unknown method 'medusa'" in i.message and "baseline" in i.message and "ngram" in i.message


def test_method_parameter_out_of_range(write_spec):
    _, issues = issues_of(write_spec, GOOD.replace("num_speculative_tokens: [2, 4]", "num_speculative_tokens: [0, 4]"))
    (i,) = issues
    assert i.path == "methods.ngram.num_speculative_tokens" and i.line == 7
    assert "out of range" in i.message and "[1, 32]" in i.message


def test_method_unknown_parameter(write_spec):
    _, issues = issues_of(write_spec, GOOD.replace("prompt_lookup_max: 3", "lookup: 3"))
    (i,) = issues
    assert i.path == "methods.ngram.lookup" and "allowed:" in i.message and "prompt_lookup_max" in i.message


def test_yaml_syntax_error_has_line(write_spec):
    path, issues = issues_of(write_spec, GOOD.replace("space: {concurrency: [1, 4]}", "space: {concurrency: [1, 4]"))
    (i,) = issues
    assert i.line is not None and i.line >= 9 and "YAML syntax error" in i.message


def test_unreadable_file(tmp_path):
    with pytest.raises(SpecError) as ei:
        load_spec(tmp_path / "missing.yaml")
    assert "cannot read spec file" in str(ei.value) and "missing.yaml" in str(ei.value)


def test_not_a_mapping(write_spec):
    _, issues = issues_of(write_spec, "- just\n- a list\n")
    assert "mapping" in issues[0].message


def test_several_issues_reported_together(write_spec):
    text = GOOD.replace("max_tokens: 128", "max_tokens: -1").replace("repeats: 1", "repeats: 0")
    _, issues = issues_of(write_spec, text)
    assert {i.path for i in issues} == {"workload.max_tokens", "measurement.repeats"}


@pytest.mark.parametrize("bad", [
    GOOD.replace("workload: {dataset: smoke,", "workload: {datasett: smoke,"),
    GOOD.replace("  baseline: {}", "  medusa: {}"),
    GOOD.replace("space: {concurrency: [1, 4]}", "space: {concurrency: [1, 4]"),
])
def test_cli_bad_spec_exit_2_and_nothing_written(write_spec, tmp_path, bad):
    db = tmp_path / "store.db"
    result = CliRunner().invoke(app, ["run", str(write_spec(bad)), "--store", f"sqlite:///{db}"])
    assert result.exit_code == 2, result.output
    assert "spec.yaml:" in result.output and "error:" in result.output
    assert not db.exists()  # refused before the store was even opened


def test_cli_unknown_dataset_exit_2_nothing_written(write_spec, tmp_path):
    from orchestrator.store import Store

    db = tmp_path / "store.db"
    spec = write_spec(GOOD.replace("dataset: smoke", "dataset: nosuch").replace("backend: vllm", "backend: fake"))
    result = CliRunner().invoke(app, ["run", str(spec), "--store", f"sqlite:///{db}"])
    assert result.exit_code == 2, result.output
    assert "unknown dataset 'nosuch'" in result.output and "workload.dataset" in result.output
    assert Store(f"sqlite:///{db}").list_sweeps() == []


def test_cli_validate(write_spec):
    result = CliRunner().invoke(app, ["validate", str(write_spec(GOOD))])
    assert result.exit_code == 0, result.output
    assert "grid of 6 trials on 3 engine configurations" in result.output
