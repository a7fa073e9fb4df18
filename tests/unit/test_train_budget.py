"""`drafters train`'s first-run time budget (budget.py): the stages' deadlines, the step plan, responses
appended a chunk at a time and continued, and the whole pipeline cut, reused and continued — on a tiny random
Llama target (transformers, written here), with vLLM's generation replaced by an in-process engine whose
clock the test sets (the real child is run by tests/integration/test_drafters_train.py)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest
import torch

from orchestrator.drafters.train import generate as gen
from orchestrator.drafters.train import run as run_mod
from orchestrator.drafters.train.budget import Budget, more_time
from orchestrator.drafters.train.eagle3_train import train_eagle3
from orchestrator.drafters.train.loop import plan_steps
from orchestrator.drafters.train.run import TrainSettings, budget_text, train_drafter

from .test_drafter_training import TARGET, noop, synthetic_data, tensors


def test_stage_deadlines_and_more_time():
    now = [100.0]
    b = Budget(20, clock=lambda: now[0])
    assert b.seconds_left("responses") == pytest.approx(0.45 * 1200)
    now[0] += 600
    assert b.seconds_left("responses") == 0.0  # never negative
    assert b.seconds_left("features") == pytest.approx(0.70 * 1200 - 600)
    assert b.seconds_left("training") == pytest.approx(1200 - 30 - 600)  # the export's margin kept back
    assert Budget(None).seconds_left("training") is None and Budget(0).seconds_left("responses") is None
    b.cut("responses", 300, 1000)
    b.cut("features", 300, 300)  # not cut: not recorded
    assert b.record() == {"minutes": 20, "limited": True, "stages": {"responses": [300, 1000]}}
    assert more_time(None, 20) and more_time(30, 20)
    assert not more_time(20, 20) and not more_time(10, 20) and not more_time(None, None) and not more_time(5, None)


def test_step_plan_fits_the_time_left():
    assert plan_steps(4, 400, 100.0, 0.5) == 204
    assert plan_steps(4, 400, 1e6, 0.5) == 400  # never more than asked
    assert plan_steps(4, 400, -3.0, 0.5) == 5  # at least one more step
    assert plan_steps(40, 400, -3.0, 0.5, at_least=0) == 40  # planning again: stop here when nothing fits


def _timed_run(seconds: float, cost: Callable[[int], float]) -> tuple[dict, list[str]]:
    """run_training on a one-weight model with a clock that advances by cost(step) seconds a step."""
    from orchestrator.drafters.train.loop import run_training

    now, lines = [0.0], []
    model = torch.nn.Linear(1, 1)

    def step_fn(idx, g):
        now[0] += cost(len(steps_seen) + 1)
        steps_seen.append(1)
        return model(torch.ones(1, 1)).sum(), [0.0], [0.0], ""

    steps_seen: list[int] = []
    s = TrainSettings(method="eagle3", steps=30, batch_size=2, bf16_autocast=False)
    run = run_training(s, model, Path(tempfile.mkdtemp()) / "ckpt.pt", 4, step_fn,
                       lambda stage, i, n, note: lines.append(note) if note.startswith("budget") else None,
                       seconds=seconds, clock=lambda: now[0])
    return run, lines


def test_a_budgeted_run_plans_again_at_the_rate_its_steps_run():
    # slow first steps (10 s), then 1 s: the probe plans 10 steps, the next plan at the real rate all 30
    run, lines = _timed_run(100.0, lambda k: 10.0 if k <= 4 else 1.0)
    assert run["steps_done"] == run["planned_steps"] == 30
    assert lines == ["budget: 10 of 30 steps fit (10.00 s a step)", "budget: 30 of 30 steps fit (1.00 s a step)"]
    # fast probe, then 10 s steps: planned 30, cut back to what the time allows
    run, lines = _timed_run(100.0, lambda k: 1.0 if k <= 4 else 10.0)
    assert run["steps_done"] == run["planned_steps"] == 14
    assert lines == ["budget: 14 of 30 steps fit (10.00 s a step)"]


def test_training_follows_its_plan_and_a_resumed_run_keeps_it(tmp_path):
    s = TrainSettings(method="eagle3", steps=30, batch_size=2, draft_vocab_size=32)
    _, _, cut = train_eagle3(s, TARGET, synthetic_data(6), tensors(), tmp_path, noop, seconds=0.0)
    assert cut["steps_done"] == cut["planned_steps"] == 5  # 4 timed steps, then only one more fits
    _, _, resumed = train_eagle3(s, TARGET, synthetic_data(6), tensors(), tmp_path, noop)  # no budget now
    assert resumed["resumed_from_step"] == 5 and resumed["steps_done"] == 5  # the checkpoint's plan holds
    (tmp_path / "full").mkdir()
    _, _, full = train_eagle3(s, TARGET, synthetic_data(6), tensors(), tmp_path / "full", noop)
    assert full["steps_done"] == full["planned_steps"] == 30


def test_a_torn_last_line_is_cut_off(tmp_path):
    f = tmp_path / "responses.jsonl"
    good = [{"prompt": "a", "prompt_ids": [1], "response_ids": [2]}, {"prompt": "b", "prompt_ids": [3], "response_ids": [4]}]
    f.write_text("".join(json.dumps(r) + "\n" for r in good) + '{"prompt": "c", "prom')
    assert gen.read_responses(f) == good
    assert f.read_text().endswith("[4]}\n")  # the torn bytes are gone: the next chunk appends cleanly


class FakeEngine:
    """vLLM's offline LLM as generate_into uses it; each generate() call moves `clock` on by `chunk_s`."""

    def __init__(self, clock: list[float], chunk_s: float):
        self.clock, self.chunk_s, self.calls = clock, chunk_s, []

    def get_tokenizer(self):
        return SimpleNamespace(apply_chat_template=lambda msgs, **_: msgs[0]["content"])

    def generate(self, texts, params, use_tqdm=False):
        self.calls.append(len(texts))
        self.clock[0] += self.chunk_s
        return [SimpleNamespace(prompt_token_ids=[hash(t) % 90 + 1 for t in t_.split()[:6]],
                                outputs=[SimpleNamespace(token_ids=[(len(t_) * 7 + j) % 97 for j in range(12)])])
                for t_ in texts]


def test_generation_stops_before_a_chunk_past_its_deadline_and_continues(tmp_path):
    prompts = [f"prompt number {i}" for i in range(300)]
    out, clock = tmp_path / "r.jsonl", [0.0]
    lines = []
    engine = FakeEngine(clock, chunk_s=10.0)
    # chunks of 128: the first ends at 10 s, the second at 20 s (10 + 10 <= 25), a third would end at 30 s
    assert gen.generate_into(engine, prompts, out, None, 25.0, 0.0, clock=lambda: clock[0], emit=lines.append,
                             chunk=128) == 256
    assert engine.calls == [128, 128] and any(x.startswith("budget: stopped after 256") for x in lines)
    assert [r["prompt"] for r in gen.read_responses(out)] == prompts[:256]
    engine = FakeEngine(clock, chunk_s=10.0)
    assert gen.generate_into(engine, prompts, out, None, None, clock[0], clock=lambda: clock[0], emit=lines.append,
                             chunk=128) == 300
    assert engine.calls == [44]  # continued: only the prompts it did not have
    assert [r["prompt"] for r in gen.read_responses(out)] == prompts
    with pytest.raises(SystemExit, match="other prompts"):
        gen.generate_into(engine, ["something else"] + prompts[1:], out, None, None, 0.0)


@pytest.fixture
def tiny_target(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=8, num_hidden_layers=6, vocab_size=97, max_position_embeddings=512)
    folder = tmp_path / "tiny-target"
    LlamaForCausalLM(cfg).save_pretrained(folder)
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    return folder


def test_a_cut_run_is_reused_under_the_same_budget_and_continued_with_more(tmp_path, monkeypatch, tiny_target):
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path / "cache"))
    clock, engines = [0.0], []

    def fake_generate(model_path, prompts, responses, max_tokens, env, progress, dtype, seconds=None):
        # the child's loop in-process: each chunk of 128 "takes" 40 % of a 10-minute budget's response share
        engines.append(FakeEngine(clock, chunk_s=0.4 * 270))
        gen.generate_into(engines[-1], json.loads(prompts.read_text()), responses, None, seconds, clock[0],
                          clock=lambda: clock[0], emit=lambda line: None, chunk=128)
        return []

    monkeypatch.setattr(run_mod, "_generate", fake_generate)
    s = TrainSettings(method="eagle3", target=str(tiny_target), num_prompts=300, max_tokens=12, steps=12,
                      batch_size=4, draft_vocab_size=32, budget_minutes=10)
    folder, m = train_drafter(s)
    assert engines[-1].calls == [128, 128]  # third chunk would pass the 270 s share
    assert m["budget"] == {"minutes": 10, "limited": True, "stages": {"responses": [256, 300]}}
    assert m["prompts"] == 256 and m["steps_done"] == 12
    assert "responses 256 of 300" in budget_text(m)
    again, m_again = train_drafter(s)  # same budget: no more time, the cut drafter is the answer
    assert again == folder and m_again == m and len(engines) == 1
    more, m_more = train_drafter(TrainSettings(**{**s.__dict__, "budget_minutes": None}))
    assert more == folder and engines[-1].calls == [44]  # the data continued where it stopped ...
    assert m_more["budget"]["limited"] is False and m_more["prompts"] == 300 and budget_text(m_more) is None
    assert m_more["stages"][2]["detail"]["resumed_from_step"] == 0  # ... and the drafter trained again
    assert m_more["data_hash"] != m["data_hash"]


def test_the_responses_engine_computes_on_every_cpu_of_a_small_machine_only():
    base = {"PATH": "/bin"}
    env = run_mod.generation_env(base, [0, 1])
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0,1" and env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert run_mod.generation_env(base, [2, 5, 7])["VLLM_CPU_OMP_THREADS_BIND"] == "2,5,7"
    assert "VLLM_CPU_OMP_THREADS_BIND" not in run_mod.generation_env(base, list(range(16)))  # vLLM's own binding
    assert "VLLM_CPU_OMP_THREADS_BIND" not in run_mod.generation_env(base, [0])
    mine = {"VLLM_CPU_OMP_THREADS_BIND": "1", "VLLM_CPU_KVCACHE_SPACE": "4"}
    assert run_mod.generation_env(mine, [0, 1])["VLLM_CPU_OMP_THREADS_BIND"] == "1"  # the user's value is kept
    assert run_mod.generation_env(mine, [0, 1])["VLLM_CPU_KVCACHE_SPACE"] == "4"


def _generate_in_process(monkeypatch, tmp_path) -> list[str]:
    """A private drafter cache, and the responses child's loop run in-process on FakeEngine with no deadline: the
    list it returns collects the target of every generation."""
    calls: list[str] = []

    def fake_generate(model_path, prompts, responses, max_tokens, env, progress, dtype, seconds=None):
        calls.append(model_path)
        gen.generate_into(FakeEngine([0.0], 1.0), json.loads(prompts.read_text()), responses, None, None, 0.0,
                          emit=lambda line: None)
        return []

    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(run_mod, "_generate", fake_generate)
    return calls


def test_a_dflash_recipe_given_in_the_settings_is_trained_apart_from_the_shipped_drafter(tmp_path, monkeypatch,
                                                                                        tiny_target):
    # benchmarks/demo_drafters.py --dflash-variant: a candidate recipe trained and measured beside the shipped one
    from orchestrator.drafters.train.dflash_train import RECIPE, DFlashRecipe
    from orchestrator.drafters.train.run import TrainError

    _generate_in_process(monkeypatch, tmp_path)
    common = dict(method="dflash", target=str(tiny_target), num_prompts=16, max_tokens=12, steps=2, batch_size=2,
                  block_size=4, budget_minutes=None)
    two_layers = DFlashRecipe(layers=2, anchors_per_seq=2, block_lens=(4,), intermediate_size=48)
    assert TrainSettings(**common, dflash_recipe=RECIPE).key() == TrainSettings(**common).key()  # the shipped one
    variant = TrainSettings(**common, dflash_recipe=two_layers)
    assert variant.key() != TrainSettings(**common).key() and variant.data_key() == TrainSettings(**common).data_key()
    folder, m = train_drafter(variant)
    cfg = json.loads((folder / "config.json").read_text())
    assert (cfg["num_hidden_layers"], cfg["intermediate_size"]) == (2, 48)  # the given recipe, not RECIPE (1 layer)
    assert m["stages"][2]["detail"]["recipe"]["layers"] == 2
    with pytest.raises(TrainError, match="dflash_recipe"):
        TrainSettings(method="eagle3", dflash_recipe=two_layers)


def test_cache_and_force_rules_of_the_three_trainers(tmp_path, monkeypatch, tiny_target):
    """One dataset serves EAGLE-3, DFlash and xPress; a trained drafter is found, not trained twice; --force
    trains again from step 0 on the cached data; xPress finds its DFlash backbone cached (the real engine's
    responses are tests/integration/test_drafters_train.py's; here generation is in-process)."""
    calls = _generate_in_process(monkeypatch, tmp_path)
    trained, real_train = [], run_mod._train

    def counting_train(s, *args, **kwargs):
        trained.append(s.method)
        return real_train(s, *args, **kwargs)

    monkeypatch.setattr(run_mod, "_train", counting_train)
    common = dict(target=str(tiny_target), num_prompts=16, max_tokens=12, budget_minutes=None)
    e3s = dict(common, batch_size=2, draft_vocab_size=32)  # (xPress's backbone: DFlash at its default batch, vocab)
    e3, m3 = train_drafter(TrainSettings(method="eagle3", steps=3, **e3s))
    assert [s["cached"] for s in m3["stages"]] == [False] * len(m3["stages"]) and len(calls) == 1  # trained
    df, mdf = train_drafter(TrainSettings(method="dflash", steps=3, block_size=4, **common))
    assert m3["data_hash"] == mdf["data_hash"] and len(calls) == 1  # one dataset, two drafters
    assert [s["cached"] for s in mdf["stages"][:2]] == [True, True]  # dflash reused the responses and features
    again, m_again = train_drafter(TrainSettings(method="eagle3", steps=3, **e3s))
    assert again == e3 and m_again == m3 and trained == ["eagle3", "dflash"]  # cached: not trained twice
    few = TrainSettings(method="eagle3", steps=2, **e3s)
    small, m_small = train_drafter(few)
    assert small != e3 and m_small["steps_done"] == 2  # another step count is another drafter
    forced, m_forced = train_drafter(few, force=True)
    assert forced == small and m_forced["steps_done"] == 2 and trained[-2:] == ["eagle3", "eagle3"]  # trained again
    assert [s["cached"] for s in m_forced["stages"][:2]] == [True, True]  # the data is reused ...
    assert m_forced["stages"][2]["detail"]["resumed_from_step"] == 0  # ... the drafter trained again from step 0
    again, m_again = train_drafter(few)
    assert again == forced and m_again == m_forced and len(trained) == 4  # cached afterwards
    xp, mxp = train_drafter(TrainSettings(method="xpress", steps=2, block_size=4, backbone_steps=3, **common))
    assert [s["cached"] for s in mxp["stages"][:2]] == [True, True] and mxp["steps_done"] == 2
    assert mxp["stages"][2]["detail"]["backbone"] == str(df)  # the DFlash drafter above, found cached
    assert len(calls) == 1 and trained[4:] == ["xpress"]  # one generation for all; the backbone not retrained
