"""Dataset loaders on small local files the tests write (the hub is unreachable here)."""

from __future__ import annotations

import json

import pytest

from orchestrator.datasets import DatasetError, load_prompts


def jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return str(path)


def text_of(p):
    return p.messages[0]["content"]


def test_gsm8k_math_format(tmp_path):
    path = jsonl(tmp_path / "gsm8k.jsonl", [{"question": "What is 2+2?", "answer": "4"}])
    (p,) = load_prompts("gsm8k", num_prompts=5, path=path)
    assert text_of(p) == "What is 2+2?\nPlease reason step by step, and put your final answer within \\boxed{}."


def test_math500_humaneval_mbpp_mtbench_formats(tmp_path):
    (m,) = load_prompts("math500", num_prompts=1, path=jsonl(tmp_path / "m.jsonl", [{"problem": "Solve x."}]))
    assert text_of(m).startswith("Solve x.\nPlease reason step by step")
    (h,) = load_prompts("humaneval", num_prompts=1, path=jsonl(tmp_path / "h.jsonl", [{"prompt": "def f():\n"}]))
    assert text_of(h) == ("Write a solution to the following problem and make sure that it passes the tests:\n"
                          "```python\ndef f():\n\n```")
    (b,) = load_prompts("mbpp", num_prompts=1, path=jsonl(tmp_path / "b.jsonl",
                                                          [{"prompt": "Add.", "test_list": ["assert add(1,2)==3"]}]))
    assert text_of(b) == "Add.\nYour code should pass these tests:\nassert add(1,2)==3"
    (t,) = load_prompts("mt-bench", num_prompts=1, path=jsonl(tmp_path / "t.jsonl", [{"prompt": ["turn one", "turn two"]}]))
    assert text_of(t) == "turn one"  # turn 1 only


def test_shuffle_is_seeded_and_never_cycles(tmp_path):
    path = jsonl(tmp_path / "g.jsonl", [{"question": f"q{i}"} for i in range(10)])
    a = [p.id for p in load_prompts("gsm8k", num_prompts=4, path=path, shuffle_seed=0)]
    b = [p.id for p in load_prompts("gsm8k", num_prompts=4, path=path, shuffle_seed=0)]
    c = [p.id for p in load_prompts("gsm8k", num_prompts=4, path=path, shuffle_seed=1)]
    assert a == b and a != c
    assert len(load_prompts("gsm8k", num_prompts=50, path=path)) == 10


def test_random_prompts():
    ps = load_prompts("random", num_prompts=3, input_len=64)
    assert [p.input_len for p in ps] == [64, 64, 64] and len({p.id for p in ps}) == 3


def test_smoke_has_mixed_prompts():
    ps = load_prompts("smoke", num_prompts=100)
    assert len(ps) >= 32 and {p.category for p in ps} == {"code", "math", "chat", "rewrite"}


@pytest.mark.parametrize("name,records,msg", [
    ("custom", [], "has no prompts"),
    ("gsm8k", [], "has no prompts"),
    ("gsm8k", [{"text": "no question field"}], "no field 'question'"),
    ("custom", [{"text": "x"}], "needs a non-empty string field 'prompt'"),
])
def test_bad_files(tmp_path, name, records, msg):
    path = tmp_path / "f.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(DatasetError) as ei:
        load_prompts(name, num_prompts=3, path=str(path))
    assert msg in str(ei.value)


def test_unknown_dataset_and_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="unknown dataset 'nope'; known datasets: custom, demo-heldout, gsm8k"):
        load_prompts("nope", num_prompts=1)
    with pytest.raises(DatasetError, match="file not found"):
        load_prompts("gsm8k", num_prompts=1, path=str(tmp_path / "missing.jsonl"))


def test_hub_without_datasets_package_says_what_to_do(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_datasets(name, *a, **k):
        if name == "datasets":
            raise ImportError("no datasets")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(DatasetError) as ei:
        load_prompts("gsm8k", num_prompts=1)
    assert "openai/gsm8k" in str(ei.value) and "workload.paths.gsm8k" in str(ei.value)
