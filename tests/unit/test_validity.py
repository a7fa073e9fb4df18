"""Issue 5: paired baselines, repeat statistics, fingerprints, lossless checks and sanity flags.
Statistics on synthetic data with known truth; whole sweeps through real Ray and SQLite/PostgreSQL with
the fake backend (its injected faults: acceptance 0, inflated and NaN counters, per-window noise)."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.controller.runner import run_sweep
from orchestrator.records import RequestOutput, WindowMetrics
from orchestrator.spec import load_spec
from orchestrator.states import TrialState
from orchestrator.store import Store
from orchestrator.validity import (
    FingerprintMismatch,
    coefficient_of_variation,
    fingerprint_diff,
    first_token_test,
    greedy_match,
    pairing_flags,
    speedup_interval,
    trial_flags,
)


# ---- statistics -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("repeats,method", [(3, "student t"), (10, "studentized bootstrap")])
def test_speedup_interval_covers_a_known_ratio(repeats, method):
    """400 synthetic sweeps with true speedup 1.3 and 10 % lognormal noise per window: the 95 % interval
    covers 1.3 in 92-98 % of them (a broken interval — too narrow, off-centre, not exponentiated — does not)."""
    rng = np.random.default_rng(7)
    covered, widths = 0, []
    for i in range(400):
        base = 100 * np.exp(rng.normal(0, 0.1, repeats))
        spec = 130 * np.exp(rng.normal(0, 0.1, repeats))
        ci = speedup_interval(list(spec), list(base), resamples=2000, seed=i)
        assert method in ci["method"] and ci["n"] == repeats
        covered += ci["low"] <= 1.3 <= ci["high"]
        widths.append(ci["high"] - ci["low"])
    assert 0.92 <= covered / 400 <= 0.98
    assert 0.05 < float(np.median(widths)) < 1.0


def test_speedup_interval_is_seeded_and_needs_two_repeats():
    spec, base = [110, 120, 105, 130, 118, 111, 125, 119], [100, 98, 103, 101, 99, 97, 102, 100]
    a = speedup_interval(spec, base, seed=3)
    assert a == speedup_interval(spec, base, seed=3)
    assert a["low"] < np.mean(spec) / np.mean(base) < a["high"]
    one = speedup_interval([120], [100])
    assert one["low"] is None and "needs >= 2 repeats" in one["method"]


def test_coefficient_of_variation():
    assert coefficient_of_variation([10, 10, 10]) == 0
    assert math.isclose(coefficient_of_variation([9, 11]), math.sqrt(2) / 10)
    assert coefficient_of_variation([5]) is None and coefficient_of_variation([None, 3]) is None


# ---- lossless -----------------------------------------------------------------------------------------------
def test_greedy_match_and_common_prefix():
    base = {(0, "a"): [1, 2, 3, 4], (0, "b"): [5, 6], (0, "c"): [7]}
    spec = {(0, "a"): [1, 2, 3, 4], (0, "b"): [5, 9], (0, "d"): [1]}
    m = greedy_match(spec, base)
    assert m["outputs_compared"] == 2 and m["greedy_match_rate"] == 0.5
    assert math.isclose(m["common_prefix_frac"], (1.0 + 0.5) / 2)
    assert greedy_match({}, base)["greedy_match_rate"] is None


def test_first_token_test_tells_same_from_shifted_distributions():
    rng = np.random.default_rng(0)
    same = first_token_test(rng.choice(5, 400, p=[.4, .3, .2, .05, .05]), rng.choice(5, 400, p=[.4, .3, .2, .05, .05]))
    shifted = first_token_test(rng.choice(5, 400, p=[.4, .3, .2, .05, .05]), rng.choice(5, 400, p=[.1, .2, .3, .2, .2]))
    assert same["p_value"] > 0.01 and shifted["p_value"] < 1e-6 and shifted["dof"] == 4
    assert pairing_flags(temperature=0.8, match=None, distribution=shifted, threshold=0.95, mismatch=[],
                         baseline_state=TrialState.COMPLETE) == ["distribution_shift?"]
    assert pairing_flags(temperature=0, match={"greedy_match_rate": 0.5}, distribution=None, threshold=0.95,
                         mismatch=["gpu_model: 'A' != 'B'"], baseline_state=TrialState.COMPLETE) == ["fingerprint_mismatch", "lossy?"]


# ---- fingerprints ---------------------------------------------------------------------------------------------
def test_fingerprint_diff_lists_fields_and_honours_allow():
    a = {"gpu_model": "H100", "vllm_version": "0.32.0", "hostname": "n1", "engine_args": {"max_num_seqs": 8},
         "drafter_identity": "sha256:aa"}
    b = dict(a, gpu_model="A100", hostname="n2", engine_args={"max_num_seqs": 16}, drafter_identity="sha256:bb")
    d = fingerprint_diff(a, b, same_method=False)
    assert d == ["gpu_model: 'H100' != 'A100'", "engine_args.max_num_seqs: 8 != 16"]  # hostname is recorded only
    assert fingerprint_diff(a, b, same_method=False, allow=["gpu_model", "engine_args.max_num_seqs"]) == []
    assert "drafter_identity: 'sha256:aa' != 'sha256:bb'" in fingerprint_diff(a, b, same_method=True)
    assert "--allow-mismatch" in str(FingerprintMismatch(d))
    # cpu_isa came later: two CPUs that differ in it differ; a row from before it was recorded is not refused
    isa = dict(a, cpu_isa="avx2 avx512f avx512_bf16")
    assert fingerprint_diff(isa, dict(a, cpu_isa="avx2"), same_method=False) == [
        "cpu_isa: 'avx2 avx512f avx512_bf16' != 'avx2'"]
    assert fingerprint_diff(isa, dict(a, cpu_isa=None), same_method=False) == []


# ---- flags ----------------------------------------------------------------------------------------------------
def _w(**kw):
    return WindowMetrics(**dict({"acceptance_length": 2.0, "num_drafts": 10, "num_accepted_tokens": 10,
                                 "failed_requests": 0, "output_tok_s": 100.0}, **kw))


def _outs(*windows):
    return [[RequestOutput(prompt_id=f"p{i}", **o) for i, o in enumerate(w)] for w in windows]


def test_trial_flags():
    ok_out = _outs([{"ok": True, "output_tokens": 8, "finish_reason": "length"}])
    kw = dict(outputs=ok_out, max_tokens=8, ignore_eos=False, prefix_caching=False, cv=0.01, noisy_cv=0.1)
    assert trial_flags(k=3, windows=[_w()], **kw) == []
    assert trial_flags(k=3, windows=[_w(acceptance_length=1.01)], **kw) == ["acceptance_collapse"]
    assert trial_flags(k=1, windows=[_w(acceptance_length=1.01)], **kw) == []  # K = 1: AL 1.0 is possible
    assert trial_flags(k=3, windows=[_w(acceptance_length=4.5)], **kw) == ["impossible_al"]
    assert trial_flags(k=3, windows=[_w(acceptance_length=float("nan"))], **kw) == ["impossible_al"]
    assert trial_flags(k=3, windows=[_w(acceptance_length=None, num_drafts=0, num_accepted_tokens=0)], **kw) == ["no_drafts"]
    assert trial_flags(k=None, windows=[_w(acceptance_length=None, failed_requests=1, prefix_cache_hit_rate=0.3,
                                           client_cpu_frac=0.97)], **dict(kw, cv=0.2, engine_niceness=15)) == [
        "failed_requests", "prefix_cache_hits", "client_saturated", "noisy", "low_priority"]
    assert trial_flags(k=3, windows=[_w()], **dict(kw, engine_niceness=0)) == []
    bad_out = _outs([{"ok": True, "output_tokens": 0, "finish_reason": "stop"},
                     {"ok": True, "output_tokens": 3, "finish_reason": "abort"}])
    assert trial_flags(k=None, windows=[_w()], **dict(kw, outputs=bad_out)) == ["empty_output", "truncated_output"]
    short = _outs([{"ok": True, "output_tokens": 5, "finish_reason": "length"}])
    assert trial_flags(k=None, windows=[_w()], **dict(kw, outputs=short, ignore_eos=True)) == ["truncated_output"]


# ---- whole sweeps (fake backend, real Ray and stores) --------------------------------------------------------
SPEC = """
name: validity
target: {model: fake-model}
engine: {backend: fake, fake: {step_seconds: 0.002, token_cost: 0.5, acceptance: [0.9, 0.7, 0.5]}}
workload: {dataset: smoke, num_prompts: 6, max_tokens: 24}
methods:
  ngram: {num_speculative_tokens: 3}
space: {concurrency: [1, 6]}
measurement: {repeats: 3, warmup_requests: 0}
"""

# one point (concurrency 2), one repeat: enough where a test checks a flag, not the statistics
ONE_POINT = SPEC.replace("repeats: 3", "repeats: 1").replace("concurrency: [1, 6]", "concurrency: [2]")


def with_fake(text: str, knobs: str) -> str:
    """`text` with more `engine.fake` knobs (YAML flow pairs, e.g. "output_fault: diverge")."""
    return text.replace("token_cost: 0.5,", f"token_cost: 0.5, {knobs},")


def test_paired_baselines_rotation_speedup_and_crossover(ray_session, write_spec, store_url):
    st = Store(store_url)
    # simulated time (exact figures): per-window noise makes the repeats differ, so the interval has a width
    out = run_sweep(load_spec(write_spec(SPEC.replace("step_seconds: 0.002", "step_seconds: 0.01, noise: 0.02"))), st)
    assert (out.completed, out.baselines, out.failed) == (2, 2, 0)
    rows = st.trial_results("validity")
    base = {r.concurrency: r for r in rows if r.role == "paired_baseline"}
    spec = {r.concurrency: r for r in rows if r.role == "search"}
    assert {r.method for r in base.values()} == {"baseline"} and set(base) == set(spec) == {1, 6}
    for c, r in spec.items():
        b = base[c]
        assert r.baseline_trial_id == b.trial_id and b.optuna_trial_number is None  # never told to Optuna
        assert math.isclose(r.speedup, r.output_tok_s / b.output_tok_s, rel_tol=1e-9)
        assert r.speedup_ci_low < r.speedup_ci_high and "student t" in r.speedup_ci_method
        assert math.isclose(r.tpot_ratio, r.tpot_ms_p50 / b.tpot_ms_p50, rel_tol=1e-9)
        assert r.greedy_match_rate == 1.0 and r.common_prefix_frac == 1.0  # the fake is lossless
        assert r.repeats == 3 and r.output_tok_s_cv is not None and r.engine_memory_mb > 0
        assert r.memory_kind == "rss" and "lossy?" not in (r.flags or "")
    # verification cost grows with the batch: a win at 1, a loss at 6, and the crossover says so
    assert spec[1].speedup > 1.0 > spec[6].speedup
    (cross,) = st.crossover("validity")
    assert cross.crossover_concurrency == 6 and cross.min_concurrency == 1
    # rotated order: repeat r of every trial was measured before any repeat r+1
    starts = {r.trial_id: [m.started_at for m in st.measurements(r.trial_id)] for r in rows}
    for rep in range(2):
        assert max(s[rep] for s in starts.values()) < min(s[rep + 1] for s in starts.values())
    assert out.engine_starts == 2 + 1 + 1  # one engine per config and round, the warm one reused first


def test_injected_faults_raise_flags(ray_session, write_spec, sqlite_url):
    st = Store(sqlite_url)
    cases = {"collapse": ("acceptance: [0.9, 0.7, 0.5]", "acceptance: [0.0, 0.0, 0.0]", "acceptance_collapse"),
             "inflate": ("token_cost: 0.5,", "token_cost: 0.5, counter_fault: inflate,", "impossible_al"),
             "nan": ("token_cost: 0.5,", "token_cost: 0.5, counter_fault: nan,", "impossible_al")}
    for name, (old, new, flag) in cases.items():
        text = ONE_POINT.replace(old, new).replace("name: validity", f"name: {name}")
        run_sweep(load_spec(write_spec(text, f"{name}.yaml")), st)
        (r,) = [r for r in st.trial_results(name) if r.method == "ngram"]
        assert flag in r.flags.split(","), (name, r.flags)
        (b,) = [r for r in st.trial_results(name) if r.method == "baseline"]
        assert not b.flags  # the baseline itself is fine
    res = CliRunner().invoke(app, ["results", "collapse", "--store", sqlite_url])
    assert res.exit_code == 0 and "acceptance_collapse" in res.output


def test_compare_refuses_different_fingerprints(ray_session, write_spec, sqlite_url):
    st = Store(sqlite_url)
    for name, text in (("night1", ONE_POINT), ("night2", ONE_POINT),
                       ("other", ONE_POINT.replace("max_tokens: 24", "max_tokens: 16"))):
        run_sweep(load_spec(write_spec(text.replace("name: validity", f"name: {name}"), f"{name}.yaml")), st)
    runner = CliRunner()
    res = runner.invoke(app, ["compare", "night1", "night2", "--store", sqlite_url, "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = {(r["label"], r["concurrency"]): r for r in json.loads(res.stdout)}
    assert set(rows) == {("baseline", 2), ("ngram", 2)}
    for (label, conc), r in rows.items():  # B / A of the stored medians, row by row
        (a,) = [x for x in st.trial_results("night1") if x.label == label and x.concurrency == conc]
        (b,) = [x for x in st.trial_results("night2") if x.label == label and x.concurrency == conc]
        assert math.isclose(r["output_tok_s_ratio"], b.output_tok_s / a.output_tok_s, rel_tol=1e-6), r
    res = runner.invoke(app, ["compare", "night1", "other", "--store", sqlite_url])
    assert res.exit_code == 2 and "workload_hash" in res.output and "--allow-mismatch" in res.output
    res = runner.invoke(app, ["compare", "night1", "other", "--store", sqlite_url, "--allow-mismatch", "workload_hash"])
    assert res.exit_code == 0, res.output


def test_outputs_that_differ_from_the_baseline_are_flagged_lossy(ray_session, write_spec, sqlite_url):
    """temperature 0: a K > 0 engine whose answers diverge from the baseline's (fake: output_fault) -> lossy?"""
    st = Store(sqlite_url)
    for name, fault in (("honest", "none"), ("lossy", "diverge")):
        text = with_fake(ONE_POINT, f"output_fault: {fault}").replace("name: validity", f"name: {name}")
        run_sweep(load_spec(write_spec(text, f"{name}.yaml")), st)
    (ok,) = [r for r in st.trial_results("honest") if r.method == "ngram"]
    (bad,) = [r for r in st.trial_results("lossy") if r.method == "ngram"]
    assert ok.greedy_match_rate == 1.0 and "lossy?" not in (ok.flags or "")
    assert bad.greedy_match_rate == 0.0 and 0 < bad.common_prefix_frac < 0.2, bad  # only the first token agrees
    assert "lossy?" in (bad.flags or "").split(","), bad.flags
    res = CliRunner().invoke(app, ["query", "--saved", "flagged", "--store", sqlite_url, "-p", "sweep=lossy",
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    assert [(r["label"], "lossy?" in r["flags"]) for r in json.loads(res.stdout)] == [("ngram", True)]
    assert bad.departures == 6 and bad.near_tie_departures == 0 and bad.min_clear_margin == 6.0  # clear margins


def test_departures_at_near_ties_are_numerics_in_bfloat16_and_losses_in_float32(ray_session, write_spec, sqlite_url):
    """The baseline's first window is scored (its top three per position); a method that parts from it only where
    those two were nearly tied (fake: output_fault near_tie) is not lossy in bfloat16 (inexact_numerics, not a
    suspect flag) and stays lossy in float32, whose check is exact."""
    st = Store(sqlite_url)
    for name, dtype in (("bf16", "bfloat16"), ("fp32", "float32")):
        text = with_fake(ONE_POINT, "output_fault: near_tie").replace("name: validity", f"name: {name}").replace(
            "target: {model: fake-model}", f"target: {{model: fake-model, dtype: {dtype}}}")
        run_sweep(load_spec(write_spec(text, f"{name}.yaml")), st)
    (base,) = [r for r in st.trial_results("bf16") if r.method == "baseline"]
    scored = [o for o in st.request_outputs(base.trial_id) if o.top3]
    assert len(scored) == 6 and all(len(o.top3) == len(o.output_token_ids) for o in scored)
    (near,) = [r for r in st.trial_results("bf16") if r.method == "ngram"]
    assert near.greedy_match_rate == 0.0 and (near.departures, near.near_tie_departures) == (6, 6)
    assert near.flags == "inexact_numerics" and near.min_clear_margin is None
    (exact,) = [r for r in st.trial_results("fp32") if r.method == "ngram"]
    assert (exact.departures, exact.near_tie_departures) == (6, 0) and "lossy?" in exact.flags.split(",")
    res = CliRunner().invoke(app, ["results", "bf16", "--store", sqlite_url])
    assert res.exit_code == 0 and "inexact numerics: 6 of 6 departures" in res.output, res.output
    assert "suspect" not in res.output


def test_sampled_sweeps_test_the_first_token_distribution(ray_session, write_spec, sqlite_url):
    """temperature > 0: no token-by-token check; the chi-square test of the first output token flags a shifted
    distribution (fake: output_fault diverge) and leaves a faithful one alone."""
    st = Store(sqlite_url)
    sampled = (SPEC.replace("repeats: 3", "repeats: 2").replace("concurrency: [1, 6]", "concurrency: [4]")
               .replace("num_prompts: 6, max_tokens: 24", "num_prompts: 16, max_tokens: 8, temperature: 0.8"))
    for name, fault in (("t-honest", "none"), ("t-shift", "diverge")):
        text = with_fake(sampled, f"output_fault: {fault}").replace("name: validity", f"name: {name}")
        run_sweep(load_spec(write_spec(text, f"{name}.yaml")), st)
    (ok,) = [r for r in st.trial_results("t-honest") if r.method == "ngram"]
    (bad,) = [r for r in st.trial_results("t-shift") if r.method == "ngram"]
    tests = {}
    for name, r in (("ok", ok), ("bad", bad)):
        assert r.greedy_match_rate is None  # sampled outputs are never compared token by token
        tests[name] = st.comparison(r.trial_id).distribution_test
        assert tests[name]["n_spec"] == tests[name]["n_baseline"] == 32, tests[name]
    assert tests["ok"]["p_value"] > 0.01 and "distribution_shift?" not in (ok.flags or ""), tests.ok
    assert tests["bad"]["p_value"] < 1e-6 and "distribution_shift?" in (bad.flags or "").split(","), tests["bad"]


def test_a_failed_baseline_leaves_its_trials_without_speedup(ray_session, write_spec, sqlite_url):
    st = Store(sqlite_url)
    text = with_fake(ONE_POINT, "fail_start_methods: [baseline]")
    out = run_sweep(load_spec(write_spec(text)), st)
    assert out.completed == 1 and out.failed == 1
    (r,) = [r for r in st.trial_results("validity") if r.method == "ngram"]
    (b,) = [r for r in st.trial_results("validity") if r.method == "baseline"]
    assert b.state == TrialState.FAIL and r.state == TrialState.COMPLETE and r.baseline_trial_id == b.trial_id
    assert r.speedup is None and "baseline_failed" in (r.flags or "").split(","), r


def test_cuda_version_is_read_without_importing_torch(tmp_path, monkeypatch):
    import importlib.machinery
    import importlib.util

    from orchestrator import environment

    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "version.py").write_text("from typing import Optional\n__version__ = '9.9'\ncuda: Optional[str] = '12.8'\n")
    spec = importlib.machinery.ModuleSpec("torch", None, is_package=True)
    spec.submodule_search_locations = [str(pkg)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "torch" else None)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert environment._torch_cuda_version() == "12.8" and "torch" not in sys.modules
    (pkg / "version.py").write_text("cuda: Optional[str] = None\n")
    assert environment._torch_cuda_version() is None


def test_a_baseline_from_another_environment_gives_no_speedup_unless_allowed(ray_session, write_spec, sqlite_url):
    """The fake's ngram engine reports another attention backend (a compared fingerprint field): the pairing
    refuses the speedup and flags fingerprint_mismatch; measurement.allow_mismatch names the field -> compared."""
    st = Store(sqlite_url)
    one = with_fake(ONE_POINT, "other_environment_methods: [ngram]")
    run_sweep(load_spec(write_spec(one.replace("name: validity", "name: strict"), "strict.yaml")), st)
    allowed = one.replace("name: validity", "name: allowed").replace("warmup_requests: 0", "warmup_requests: 0, allow_mismatch: [attention_backend]")
    run_sweep(load_spec(write_spec(allowed, "allowed.yaml")), st)
    (strict,) = [r for r in st.trial_results("strict") if r.method == "ngram"]
    (ok,) = [r for r in st.trial_results("allowed") if r.method == "ngram"]
    assert strict.speedup is None and "fingerprint_mismatch" in strict.flags.split(","), strict
    assert strict.baseline_trial_id is not None and "attention_backend" in str(strict.fingerprint_diff), strict
    assert ok.speedup is not None and "fingerprint_mismatch" not in (ok.flags or ""), ok
    assert ok.greedy_match_rate == 1.0
