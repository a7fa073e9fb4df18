"""`specsweep compare A B`: the same points measured in two sweeps (e.g. two nights, two vLLM builds, two
clusters), side by side. Refused when a matched pair's environment fingerprints differ in a compared
field (validity/fingerprint.py), unless each differing field is allowed by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .states import TrialState
from .store import Store
from .validity import FingerprintMismatch, fingerprint_diff

COMPARED_METRICS = ("output_tok_s", "tpot_ms_p50", "ttft_ms_p50", "acceptance_length", "speedup")


@dataclass(frozen=True)
class ComparedMetric:
    a: float | None
    b: float | None
    ratio: float | None  # B / A (None when A is 0 or either is missing)


@dataclass(frozen=True)
class ComparedPoint:
    """One point (same params) completed in both sweeps."""

    label: str
    k: int | None
    dataset: str
    concurrency: int
    request_rate: float | None
    max_num_seqs: int | None
    metrics: dict[str, ComparedMetric]  # COMPARED_METRICS -> A, B, B / A

    def as_dict(self) -> dict[str, Any]:
        """Flat, for JSON and CSV output: label, K, ..., then <metric>_a, <metric>_b, <metric>_ratio."""
        out: dict[str, Any] = {"label": self.label, "K": self.k, "dataset": self.dataset,
                               "concurrency": self.concurrency, "request_rate": self.request_rate,
                               "max_num_seqs": self.max_num_seqs}
        for m, v in self.metrics.items():
            out[f"{m}_a"], out[f"{m}_b"], out[f"{m}_ratio"] = v.a, v.b, v.ratio
        return out


def compare_sweeps(store: Store, sweep_a: str, sweep_b: str, allow: Iterable[str] = ()) -> list[ComparedPoint]:
    """One point per params completed in both sweeps: A's and B's medians and B / A.
    Raises FingerprintMismatch listing every differing field that is not allowed."""
    allow = list(allow)
    rows_a = {r.point_key: r for r in store.trial_results(sweep_a) if r.state == TrialState.COMPLETE}
    rows_b = {r.point_key: r for r in store.trial_results(sweep_b) if r.state == TrialState.COMPLETE}
    out, differences = [], []
    for key in sorted(set(rows_a) & set(rows_b)):
        a, b = rows_a[key], rows_b[key]
        env_a, env_b = store.environment(a.environment_id), store.environment(b.environment_id)
        for d in fingerprint_diff(env_a, env_b, same_method=True, allow=allow):
            if d not in differences:
                differences.append(d)
        metrics = {}
        for m in COMPARED_METRICS:
            va, vb = a.metric(m), b.metric(m)
            metrics[m] = ComparedMetric(va, vb, vb / va if va not in (None, 0) and vb is not None else None)
        out.append(ComparedPoint(label=a.label, k=a.num_speculative_tokens, dataset=a.dataset,
                                 concurrency=a.concurrency, request_rate=a.request_rate,
                                 max_num_seqs=a.max_num_seqs, metrics=metrics))
    if differences:
        raise FingerprintMismatch(differences, f"sweeps {sweep_a!r} and {sweep_b!r}")
    return out
