"""`specsweep compare A B`: the same points measured in two sweeps (e.g. two nights, two vLLM builds, two
clusters), side by side. Refused when a matched pair's environment fingerprints differ in a compared
field (validity/fingerprint.py), unless each differing field is allowed by name."""

from __future__ import annotations

from typing import Iterable

from .store import Store
from .validity import FingerprintMismatch, fingerprint_diff

COMPARED_METRICS = ("output_tok_s", "tpot_ms_p50", "ttft_ms_p50", "acceptance_length", "speedup")


def compare_sweeps(store: Store, sweep_a: str, sweep_b: str, allow: Iterable[str] = ()) -> list[dict]:
    """One row per point (same params) completed in both sweeps: A's and B's medians and B / A.
    Raises FingerprintMismatch listing every differing field that is not allowed."""
    allow = list(allow)
    rows_a = {r["point_key"]: r for r in store.trial_results(sweep_a) if r["state"] == "COMPLETE"}
    rows_b = {r["point_key"]: r for r in store.trial_results(sweep_b) if r["state"] == "COMPLETE"}
    out, differences = [], []
    for key in sorted(set(rows_a) & set(rows_b)):
        a, b = rows_a[key], rows_b[key]
        env_a, env_b = store.environment(a["environment_id"]), store.environment(b["environment_id"])
        for d in fingerprint_diff(env_a, env_b, same_method=True, allow=allow):
            if d not in differences:
                differences.append(d)
        row = {"label": a["label"], "K": a["num_speculative_tokens"], "dataset": a["dataset"],
               "concurrency": a["concurrency"], "request_rate": a.get("request_rate"), "max_num_seqs": a["max_num_seqs"]}
        for m in COMPARED_METRICS:
            va, vb = a.get(m), b.get(m)
            row[f"{m}_a"], row[f"{m}_b"] = va, vb
            row[f"{m}_ratio"] = vb / va if va not in (None, 0) and vb is not None else None
        out.append(row)
    if differences:
        raise FingerprintMismatch(differences, f"sweeps {sweep_a!r} and {sweep_b!r}")
    return out

