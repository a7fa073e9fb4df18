"""The xPress head (drafters/xpress_head.py), its checkpoint layout and specsweep's vLLM plugin, without an engine."""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from orchestrator.drafters.layout import XPRESS_ARCHS, dflash_config, write_xpress_drafter, xpress_config
from orchestrator.drafters.xpress_head import (
    HeadConfig,
    XPressCheckpointError,
    XPressHead,
    greedy_decode,
    refine,
    split_weights,
)

TARGET = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
          "intermediate_size": 128, "num_hidden_layers": 6, "vocab_size": 500, "rms_norm_eps": 1e-5,
          "rope_theta": 10000.0, "max_position_embeddings": 512}


def _cfg(**kw) -> dict:
    d = dflash_config(TARGET, block_size=16)
    d["draft_vocab_size"] = 100
    return xpress_config(d, rank=8, block_size=8, num_passes=3, head_vocab="draft", **kw)


def _head(seed: int = 0, block: int = 8) -> XPressHead:
    cfg = HeadConfig(hidden=32, vocab=50, rank=8, mlp_hidden=16, block_size=block, num_passes=3, head_vocab="draft")
    head = XPressHead(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _name, p in head.named_parameters():
            p.normal_(0, 0.5, generator=g)  # large enough that the bias moves argmaxes and the mixer matters
    return head


@pytest.mark.parametrize("slots", [2, 4, 8])
def test_enough_jacobi_passes_equal_a_left_to_right_greedy_decode(slots):
    head = _head()
    g = torch.Generator().manual_seed(1)
    n = 64
    states = torch.randn(n, slots, 32, generator=g)
    base = torch.randn(n, slots - 1, 50, generator=g)
    anchor = torch.randint(-1, 50, (n,), generator=g)  # -1: an anchor outside the head's vocabulary
    want = greedy_decode(head, states, base, anchor)
    with torch.no_grad():
        for passes in (slots - 1, slots + 2):
            got = refine(head, states, base, anchor, passes).argmax(-1)
            assert torch.equal(got, want), passes
        # fewer passes than slots - 1 leave later slots unsettled somewhere in 64 random blocks
        if slots >= 4:
            few = refine(head, states, base, anchor, 1).argmax(-1)
            assert not torch.equal(few, want)
        # pass p settles slot p: slot 1 is final after one pass
        assert torch.equal(refine(head, states, base, anchor, 1).argmax(-1)[:, 0], want[:, 0])
    assert refine(head, states, base, anchor, 0) is base  # 0 passes: the bare drafter


def test_the_mixer_is_causal_and_a_short_block_uses_its_corner():
    head = _head(block=8)
    g = torch.Generator().manual_seed(2)
    states = torch.randn(3, 8, 32, generator=g)
    ctx = head.context(states)
    prev = torch.randint(0, 50, (3, 8), generator=g)
    full = head.bias(ctx, prev)
    changed = prev.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 50
    after = head.bias(ctx, changed)
    assert torch.allclose(full[:, :5], after[:, :5]) and not torch.allclose(full[:, 5:], after[:, 5:])
    with pytest.raises(ValueError, match="exceeds the head's block size 8"):
        head.bias(head.context(torch.randn(1, 9, 32)), torch.zeros(1, 9, dtype=torch.long))


def test_a_fresh_head_starts_as_a_small_bias_with_an_identity_mixer():
    head = _head()
    head.init_weights(torch.Generator().manual_seed(0))
    assert float(head.mix.L.detach().abs().max()) == 0.0
    assert 0.0 < float(head.w2.weight.detach().std()) < 0.05


def test_checkpoint_layout_round_trip_and_clear_errors(tmp_path):
    from safetensors.torch import load_file

    cfg = _cfg()
    assert cfg["architectures"] == ["Qwen3XPressModel"] and cfg["xpress_head_vocab"] == "draft"
    assert XPRESS_ARCHS == ("Qwen3XPressModel", "DFlashQwen3XPressModel")  # published + vLLM's DFlash rename
    folder = write_xpress_drafter(tmp_path / "x", cfg)
    weights = load_file(str(folder / "model.safetensors"))
    hc = HeadConfig.from_config(json.loads((folder / "config.json").read_text()))
    assert (hc.vocab, hc.rank, hc.mlp_hidden, hc.block_size, hc.num_passes) == (100, 8, 16, 8, 3)
    head, rest = split_weights(weights.items(), hc)
    assert set(head) == set(XPressHead(hc).state_dict())  # the published names are the module's own
    assert all(not n.startswith("xpress_head.") for n, _ in rest) and any(n == "fc.weight" for n, _ in rest)
    assert float(head["mix.L"].abs().max()) == 0.0
    XPressHead(hc).load_state_dict(head)

    broken = dict(weights)
    del broken["xpress_head.w2.weight"]
    broken["xpress_head.readout.weight"] = torch.zeros(100, 8)
    broken["xpress_head.w1.weight"] = torch.zeros(99, 8)
    with pytest.raises(XPressCheckpointError) as e:
        split_weights(broken.items(), hc, "x/model.safetensors")
    msg = str(e.value)
    assert "x/model.safetensors" in msg and "missing xpress_head.w2.weight" in msg
    assert "unknown xpress_head.readout.weight" in msg and "xpress_head.w1.weight has shape (99, 8)" in msg


@pytest.mark.parametrize("change, says", [
    ({"xpress_rank": None}, "xpress_rank must be a positive integer"),
    ({"xpress_topc": 64}, "xpress_topc=64"),
    ({"sample_from_anchor": True}, "sample_from_anchor is true"),
    ({"xpress_num_passes": -1}, "xpress_num_passes must be an integer in [0, 64]"),
    ({"xpress_head_vocab": "both"}, "xpress_head_vocab='both'"),
])
def test_a_config_the_head_cannot_serve_is_refused_by_name(change, says):
    cfg = _cfg()
    cfg.update(change)
    with pytest.raises(XPressCheckpointError, match=says.replace("[", r"\[").replace("]", r"\]")):
        HeadConfig.from_config(cfg)


def test_published_layout_without_specsweep_keys_uses_the_target_vocabulary():
    d = dflash_config(TARGET, block_size=16)
    cfg = xpress_config(d, rank=8, block_size=16, num_passes=6)
    assert "xpress_head_vocab" not in cfg
    hc = HeadConfig.from_config(cfg)
    assert hc.vocab == TARGET["vocab_size"] and hc.head_vocab == "target" and hc.mlp_hidden == 16


def test_the_plugin_never_raises_and_registers_both_names(monkeypatch):
    from orchestrator import vllm_plugin

    registered = {}

    class Registry:
        @staticmethod
        def get_supported_archs():
            return {"LlamaForCausalLM", "DFlashQwen3XPressModel"}  # as if a release served one name natively

        @staticmethod
        def register_model(arch, cls):
            registered[arch] = cls

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(ModelRegistry=Registry))
    vllm_plugin.register()
    assert registered == {"Qwen3XPressModel": vllm_plugin.MODEL_CLASS}  # the native name is left alone

    class Broken:
        @staticmethod
        def get_supported_archs():
            raise RuntimeError("a vLLM that changed its registry")

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(ModelRegistry=Broken))
    vllm_plugin.register()  # logs a warning, never raises (an exception would stop every engine)


def test_the_plugin_is_installed_here_and_vllm_plugins_is_honoured():
    from orchestrator.vllm_plugin import plugin_problem

    assert plugin_problem({}) is None  # the entry point of this checkout's install
    assert plugin_problem({"VLLM_PLUGINS": "specsweep, other"}) is None
    assert "leaves out `specsweep`" in plugin_problem({"VLLM_PLUGINS": "other"})
