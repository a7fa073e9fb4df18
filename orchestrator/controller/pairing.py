"""Compare a speculative trial with its paired baseline (same target, workload, sampling, load point and
engine batch settings) and store the result: speedup with its confidence interval, latency ratios, the
lossless check and the pairing flags. Refuses (no speedup, flag `fingerprint_mismatch`) when the two ran
in environments whose compared fingerprint fields differ."""

from __future__ import annotations

from typing import Any

from ..store import Store
from ..validity import (first_token_test, fingerprint_diff, greedy_match, pairing_flags, speedup_interval)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def _environments(store: Store, trial_id: int, fallback: int | None) -> list[dict]:
    envs = {m["environment_id"] for m in store.measurements(trial_id) if m.get("environment_id") is not None}
    if not envs and fallback is not None:
        envs = {fallback}
    return [store.environment(e) for e in sorted(envs)]


def compare_with_baseline(store: Store, trial_id: int, baseline_id: int, *, temperature: float,
                          confidence: float, resamples: int, threshold: float, allow_mismatch: list[str],
                          seed: int = 0) -> dict[str, Any]:
    """Compute and store the comparison of `trial_id` with `baseline_id` (both rows of sweep_trials)."""
    trial, base = store.trial(trial_id), store.trial(baseline_id)
    values: dict[str, Any] = {"baseline_trial_id": baseline_id, "confidence": confidence}
    if base is None or base["state"] != "COMPLETE" or trial is None or trial["state"] != "COMPLETE":
        values["pairing_flags"] = ",".join(pairing_flags(
            temperature=temperature, match=None, distribution=None, threshold=threshold, mismatch=[],
            baseline_state=base["state"] if base else "FAIL")) or None
        store.save_comparison(trial_id, values)
        return values
    mismatch: list[str] = []
    for a in _environments(store, trial_id, trial["environment_id"]):
        for b in _environments(store, baseline_id, base["environment_id"]):
            mismatch += [d for d in fingerprint_diff(a, b, same_method=False, allow=allow_mismatch) if d not in mismatch]
    values["fingerprint_diff"] = mismatch
    spec_m, base_m = store.measurements(trial_id), store.measurements(baseline_id)
    spec_row, base_row = store.trial_result(trial_id), store.trial_result(baseline_id)
    if not mismatch:
        ci = speedup_interval([m["output_tok_s"] for m in spec_m], [m["output_tok_s"] for m in base_m],
                              confidence=confidence, resamples=resamples, seed=seed)
        values.update(speedup=_ratio(spec_row["output_tok_s"], base_row["output_tok_s"]),
                      speedup_ci_low=ci["low"], speedup_ci_high=ci["high"], speedup_ci_method=ci["method"],
                      tpot_ratio=_ratio(spec_row["tpot_ms_p50"], base_row["tpot_ms_p50"]),
                      ttft_ratio=_ratio(spec_row["ttft_ms_p50"], base_row["ttft_ms_p50"]))
    spec_out, base_out = store.all_request_outputs(trial_id), store.all_request_outputs(baseline_id)
    match = dist = None
    if temperature == 0:
        match = greedy_match({(o["repeat"], o["prompt_id"]): o["output_token_ids"] or [] for o in spec_out if o["ok"]},
                             {(o["repeat"], o["prompt_id"]): o["output_token_ids"] or [] for o in base_out if o["ok"]})
        values.update(match)
    else:
        dist = first_token_test([o["output_token_ids"][0] for o in spec_out if o["ok"] and o["output_token_ids"]],
                                [o["output_token_ids"][0] for o in base_out if o["ok"] and o["output_token_ids"]])
        values["distribution_test"] = dist
    values["pairing_flags"] = ",".join(pairing_flags(temperature=temperature, match=match, distribution=dist,
                                                     threshold=threshold, mismatch=mismatch,
                                                     baseline_state=base["state"])) or None
    store.save_comparison(trial_id, values)
    return values
