"""`specsweep drafters train` without vLLM: the training loops on synthetic features (determinism, resume,
manifest), the checkpoint layouts, and bad input (unknown target, no chat template, full disk)."""

from __future__ import annotations

import errno
import json
import shutil
from dataclasses import replace

import pytest
import torch

from orchestrator.datasets import load_prompts
from orchestrator.datasets.prompts import _words, near_duplicate, training_prompts
from orchestrator.drafters.layout import dflash_weight_shapes, eagle3_weight_shapes
from orchestrator.drafters.train.dflash_train import RECIPE, train_dflash
from orchestrator.drafters.train.eagle3_train import train_eagle3
from orchestrator.drafters.train.run import (
    DEFAULT_STEPS,
    TrainError,
    TrainSettings,
    _write_with_manifest,
    train_drafter,
)

TARGET = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 8, "num_hidden_layers": 6, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
          "max_position_embeddings": 512, "vocab_size": 97}


def synthetic_data(n=12, seed=0):
    """Sequences whose next token is a function of the features, so a drafter can learn something."""
    g = torch.Generator().manual_seed(seed)
    tokens, feats, plens, topk_ids, topk_probs = [], [], [], [], []
    for _ in range(n):
        L = int(torch.randint(20, 40, (1,), generator=g))
        t = torch.randint(0, 97, (L,), generator=g)
        for j in range(1, L):  # deterministic successor: learnable
            t[j] = (t[j - 1] * 7 + 3) % 97
        tokens.append(t)
        feats.append(torch.randn(L, 3 * 32, generator=g).to(torch.bfloat16))
        plens.append(5)
        top = torch.stack([(t * 7 + 3) % 97] + [torch.randint(0, 97, (L,), generator=g) for _ in range(3)], -1)
        topk_ids.append(top.to(torch.int32))
        topk_probs.append(torch.tensor([[0.7, 0.1, 0.1, 0.1]] * L, dtype=torch.float16))
    return {"tokens": tokens, "features": feats, "prompt_lens": plens, "topk_ids": topk_ids, "topk_probs": topk_probs}


def tensors():
    g = torch.Generator().manual_seed(1)
    return {"embed": torch.randn(97, 32, generator=g) * 0.1, "final_norm": torch.ones(32)}


def noop(*_):
    pass


def test_eagle3_training_learns_is_deterministic_and_resumes(tmp_path):
    s = TrainSettings(method="eagle3", steps=30, batch_size=4, draft_vocab_size=64, seed=3, lr=3e-3)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "c").mkdir()
    cfg, w1, r1 = train_eagle3(s, TARGET, synthetic_data(), tensors(), tmp_path / "a", noop)
    _, w2, _ = train_eagle3(s, TARGET, synthetic_data(), tensors(), tmp_path / "b", noop)
    assert all(torch.equal(w1[k], w2[k]) for k in w1)  # same seed, same weights
    assert r1["steps_done"] == 30 and r1["final_accuracy"][0] > 0.08  # chance is 1/64
    hard = TrainSettings(**{**s.__dict__, "soft_labels": False})
    (tmp_path / "h").mkdir()
    _, wh, rh = train_eagle3(hard, TARGET, synthetic_data(), tensors(), tmp_path / "h", noop)
    assert not torch.equal(wh["fc.weight"], w1["fc.weight"])  # soft labels change what is learnt
    # interrupted after 25 steps (the checkpoint), then resumed: the same weights as uninterrupted
    def ctrl_c_at_27(stage, done, total, note):
        if done == 27:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_eagle3(s, TARGET, synthetic_data(), tensors(), tmp_path / "c", ctrl_c_at_27)
    assert torch.load(tmp_path / "c" / "train_state.pt", weights_only=False)["step"] == 25
    _, w3, r3 = train_eagle3(s, TARGET, synthetic_data(), tensors(), tmp_path / "c", noop)
    assert r3["steps_done"] == 30 and all(torch.allclose(w1[k].float(), w3[k].float()) for k in w1)
    # the layout vLLM loads: every expected tensor with its shape, plus d2t / t2d
    shapes = eagle3_weight_shapes(cfg)
    assert {k: tuple(w1[k].shape) for k in shapes} == shapes
    assert w1["d2t"].dtype == torch.long and w1["t2d"].shape == (97,) and int(w1["t2d"].sum()) == cfg["draft_vocab_size"]
    target_ids = torch.arange(cfg["draft_vocab_size"]) + w1["d2t"]
    assert torch.equal(torch.nonzero(w1["t2d"]).flatten(), target_ids)  # d2t and t2d agree


def test_dflash_training_and_layout(tmp_path):
    s = TrainSettings(method="dflash", steps=20, batch_size=4, block_size=4, seed=0)
    cfg, w, r = train_dflash(s, TARGET, synthetic_data(), tensors(), tmp_path, noop)
    assert r["steps_done"] == 20 and len(r["final_accuracy"]) == 3
    assert cfg["block_size"] == 4 and cfg["dflash_config"]["sample_from_anchor"] is False
    mask = torch.load(__import__("io").BytesIO(w.pop("__mask_embedding_pt__")), weights_only=True)
    assert mask["mask_token_id"] == cfg["dflash_config"]["mask_token_id"] and mask["embedding"].shape == (32,)
    assert {k: tuple(v.shape) for k, v in w.items()} == dflash_weight_shapes(cfg)
    # the shipped recipe with a draft vocabulary smaller than the target's: an own lm_head, d2t and t2d
    s = TrainSettings(method="dflash", steps=2, batch_size=2, block_size=4)
    (tmp_path / "v").mkdir()
    cfg, w, _ = train_dflash(s, TARGET, synthetic_data(), tensors(), tmp_path / "v", noop,
                             recipe=replace(RECIPE, draft_vocab=40))
    w.pop("__mask_embedding_pt__")
    d2t, t2d = w.pop("d2t"), w.pop("t2d")
    assert cfg["draft_vocab_size"] == 40 and {k: tuple(v.shape) for k, v in w.items()} == dflash_weight_shapes(cfg)
    assert "lm_head.weight" in w and torch.equal(torch.nonzero(t2d).flatten(), torch.arange(40) + d2t)


def test_manifest_round_trip_and_atomic_write(tmp_path, monkeypatch):
    s = TrainSettings(method="eagle3", steps=2, batch_size=2, draft_vocab_size=32)
    cfg, w, r = train_eagle3(s, TARGET, synthetic_data(4), tensors(), tmp_path, noop)
    manifest = {"method": "eagle3", "settings": s.__dict__, "final_losses": r["final_losses"], "data_hash": "abc"}
    out = tmp_path / "drafter"
    _write_with_manifest("eagle3", out, cfg, w, manifest)
    assert json.loads((out / "manifest.json").read_text()) == json.loads(json.dumps(manifest))
    assert json.loads((out / "config.json").read_text())["architectures"] == ["LlamaForCausalLMEagle3"]
    # a full disk while writing: no drafter folder, no temporary folder left behind
    import safetensors.torch

    def enospc(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safetensors.torch, "save_file", enospc)
    with pytest.raises(OSError, match="No space left"):
        _write_with_manifest("eagle3", tmp_path / "full", cfg, w, manifest)
    assert not (tmp_path / "full").exists() and not list(tmp_path.glob(".full-*"))


def test_training_prompts_are_distinct_deterministic_and_held_out():
    a, b = training_prompts(300, seed=0), training_prompts(300, seed=0)
    assert a == b and len(set(a)) == 300
    held_out = [p.messages[-1]["content"] for p in load_prompts("smoke", num_prompts=1000)]
    assert not set(held_out) & set(a)
    # not even close: no training prompt shares half its words with an evaluation prompt
    assert not [(t, h) for t in a for h in held_out if near_duplicate(_words(t), _words(h))]
    # the guard itself catches a reworded evaluation prompt
    assert near_duplicate(_words("What is the sum of the whole numbers from 1 to 50?"),
                          _words("What is the sum of all whole numbers from 1 to 50?"))
    # every family contributes (variety, not one template repeated)
    assert len({p.split()[0] for p in a}) >= 20


def test_demo_heldout_prompts_are_new_prompts_of_the_training_stream():
    d = TrainSettings()
    train = training_prompts(d.num_prompts, d.seed)
    prompts = load_prompts("demo-heldout", num_prompts=1000)
    held = [p.messages[-1]["content"] for p in prompts]
    assert len(held) == 64 and len(set(held)) == 64
    assert not set(held) & set(train)  # never trained on by a default drafter
    assert held == training_prompts(d.num_prompts + 64, d.seed)[d.num_prompts:]  # the same templates, next in line
    assert all(p.messages == ({"role": "user", "content": h},) for p, h in zip(prompts, held))  # as trained: one turn
    assert held == [p.messages[-1]["content"] for p in load_prompts("demo-heldout", num_prompts=1000)]


def test_bad_inputs(tmp_path, monkeypatch):
    with pytest.raises(TrainError, match="--method"):
        train_drafter(TrainSettings(method="medusa"))
    with pytest.raises(TrainError, match="--target"):
        train_drafter(TrainSettings(target=str(tmp_path / "nope")))
    folder = tmp_path / "no-template"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TARGET))
    (folder / "tokenizer_config.json").write_text("{}")
    with pytest.raises(TrainError, match="no chat template"):
        train_drafter(TrainSettings(target=str(folder)))
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 10**6, 10**6))
    with pytest.raises(TrainError, match="not enough disk space"):
        train_drafter(TrainSettings(target=str(folder)))
    # refused before anything was written: no data, work or drafter folder left behind
    assert not list((tmp_path / "cache").rglob("*")), list((tmp_path / "cache").rglob("*"))


def test_default_steps_per_method_and_in_the_key():
    e3, df = TrainSettings(method="eagle3"), TrainSettings(method="dflash")
    assert (e3.steps, df.steps) == (DEFAULT_STEPS["eagle3"], DEFAULT_STEPS["dflash"])
    # an explicit value equal to the default is the same drafter (same cache folder); another value is not
    assert TrainSettings(method="eagle3", steps=DEFAULT_STEPS["eagle3"]).key() == e3.key()
    assert TrainSettings(method="eagle3", steps=DEFAULT_STEPS["eagle3"] + 1).key() != e3.key()
    assert e3.data_key() == df.data_key()  # both methods train on one dataset


def test_editing_the_templates_changes_the_data_and_drafter_identity(monkeypatch):
    from orchestrator.datasets import prompts

    s = TrainSettings(method="eagle3", num_prompts=50)
    before = (s.data_key(), s.key())
    monkeypatch.setattr(prompts, "FAMILIES", prompts.FAMILIES[:-1])  # a template family removed
    prompts.prompts_digest.cache_clear()
    try:
        assert s.data_key() != before[0] and s.key() != before[1]
    finally:
        prompts.prompts_digest.cache_clear()


def test_bf16_autocast_is_honoured_learns_and_exports_float32(tmp_path):
    """Forward in bf16 autocast (the default) or float32: both learn, they differ (the flag is honoured), and the
    exported weights are float32 either way (what vLLM loads)."""
    # dtype bfloat16 explicitly: with `auto` a CPU without native bf16 turns autocast off for both runs
    base = dict(method="eagle3", steps=30, batch_size=4, draft_vocab_size=64, seed=3, lr=3e-3, dtype="bfloat16")
    runs = {}
    for flag in (True, False):
        (tmp_path / str(flag)).mkdir()
        runs[flag] = train_eagle3(TrainSettings(bf16_autocast=flag, **base), TARGET, synthetic_data(), tensors(),
                                  tmp_path / str(flag), noop)
        _, w, r = runs[flag]
        assert r["final_accuracy"][0] > 0.08  # chance is 1/64
        assert all(v.dtype in (torch.float32, torch.long, torch.bool) for v in w.values())
    assert not torch.equal(runs[True][1]["fc.weight"], runs[False][1]["fc.weight"])


def test_xpress_head_trains_over_a_frozen_dflash_drafter_and_exports_the_published_layout(tmp_path):
    from orchestrator.drafters.layout import xpress_weight_shapes
    from orchestrator.drafters.train.xpress_train import (
        XPressRecipe,
        base_logits,
        block_data,
        load_xpress,
        train_xpress,
    )
    from orchestrator.drafters.xpress_head import refine

    data, tens = synthetic_data(n=24), tensors()
    s = TrainSettings(method="dflash", steps=30, batch_size=4, block_size=8, seed=0)
    (tmp_path / "d").mkdir()
    cfg, w, _ = train_dflash(s, TARGET, data, tens, tmp_path / "d", noop, recipe=replace(RECIPE, draft_vocab=64))
    backbone = tmp_path / "dflash"
    _write_with_manifest("dflash", backbone, cfg, w, {"method": "dflash"})
    # a deterministic successor (t[j] = 7 t[j-1] + 3): what the previous token says, the head can learn
    recipe = XPressRecipe(rank=32, block_lens=(4, 8), blocks_per_seq=8, num_passes=3, free_weight=1.0)
    xs = TrainSettings(method="xpress", steps=80, batch_size=8, seed=0, lr=1e-2)
    (tmp_path / "x").mkdir()
    xcfg, xw, r = train_xpress(xs, TARGET, data, tens, tmp_path / "x", noop, backbone, recipe=recipe)
    assert r["steps_done"] == 80 and xcfg["architectures"] == ["Qwen3XPressModel"]
    assert xcfg["xpress_head_vocab"] == "draft" and xcfg["xpress_block_size"] == 8 and xcfg["xpress_num_passes"] == 3
    mask = xw.pop("__mask_embedding_pt__")
    assert {k: tuple(v.shape) for k, v in xw.items() if k not in ("d2t", "t2d")} == xpress_weight_shapes(xcfg)
    folder = tmp_path / "xpress"
    _write_with_manifest("xpress", folder, xcfg, {**xw, "__mask_embedding_pt__": mask}, {"method": "xpress"})
    drafter, head = load_xpress(folder, tens["embed"], tens["final_norm"])
    # the backbone is the DFlash drafter's, untouched (frozen): 0 passes serve exactly the DFlash drafter
    assert all(torch.equal(xw[k], w[k]) for k in w if k in xw)
    blocks = block_data(drafter, data, recipe, seed=5)[8]
    states = blocks["states"].flatten(0, 1).float()
    labels, anchor = blocks["labels"].flatten(0, 1), blocks["anchors"].flatten(0, 1)
    base = base_logits(drafter, states)
    with torch.no_grad():
        refined = refine(head, states, base, anchor, 7).argmax(-1)
    ok = labels >= 0
    acc = lambda d: float(((d == labels) & ok)[:, 1:].sum() / ok[:, 1:].sum())  # noqa: E731 slots 2..7
    assert acc(refined) > acc(base.argmax(-1)) + 0.2, (acc(refined), acc(base.argmax(-1)))
