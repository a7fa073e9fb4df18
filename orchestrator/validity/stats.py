"""Repeat statistics: the speedup's confidence interval and the coefficient of variation.

The interval is over repeats of the throughput, on the log scale (a ratio's natural scale):
- paired repeats (same count on both sides; with `measurement.order: rotated` repeat r of the trial and of
  its baseline ran in the same round) use the per-repeat log ratios log(spec_r / base_r); unpaired ones the
  difference of the two sides' mean logs (Welch);
- from BOOTSTRAP_MIN_REPEATS repeats on, a seeded studentized bootstrap (bootstrap-t) of that mean; below,
  Student's t. A bootstrap cannot cover its nominal level with 3 repeats: a percentile interval never
  leaves the range of the 3 values, which holds the true mean with probability 1 - 2 * 0.5**3 = 75 %; and
  the plain percentile bootstrap under-covers even at 10-20 repeats (measured here: 89-92 % for a nominal
  95 %), hence bootstrap-t. `benchmarks/speedup_ci.py` measures the coverage end to end.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Sequence

import numpy as np
from scipy import stats as sps

BOOTSTRAP_MIN_REPEATS = 8


def _mean_se(samples: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Mean (difference of means for two samples) and its standard error, along the last axis."""
    if len(samples) == 1:
        x = samples[0]
        return x.mean(axis=-1), x.std(axis=-1, ddof=1) / math.sqrt(x.shape[-1])
    a, b = samples
    se = np.sqrt(a.var(axis=-1, ddof=1) / a.shape[-1] + b.var(axis=-1, ddof=1) / b.shape[-1])
    return a.mean(axis=-1) - b.mean(axis=-1), se


def _bootstrap_t(samples: list[np.ndarray], alpha: float, resamples: int, rng) -> tuple[float, float]:
    """Studentized (bootstrap-t) interval of a mean or a difference of means: resample each sample with
    replacement, take the quantiles of t* = (estimate* - estimate) / se*."""
    est, se = _mean_se(samples)
    boots = [rng.choice(x, size=(resamples, len(x)), replace=True) for x in samples]
    est_b, se_b = _mean_se(boots)
    ok = se_b > 0
    if not ok.any() or se == 0:
        return float(est), float(est)
    t = (est_b[ok] - est) / se_b[ok]
    t_lo, t_hi = np.quantile(t, [alpha / 2, 1 - alpha / 2])
    return float(est - t_hi * se), float(est - t_lo * se)


def coefficient_of_variation(values: Sequence[float | None]) -> float | None:
    """Sample standard deviation / mean (None for fewer than 2 values or a non-positive mean)."""
    vals = [float(v) for v in values if v is not None and not math.isnan(v)]
    if len(vals) < 2:
        return None
    mean = statistics.fmean(vals)
    return statistics.stdev(vals) / mean if mean > 0 else None


def _clean(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(v) and v > 0]


def speedup_interval(spec: Sequence[float | None], base: Sequence[float | None], *, confidence: float = 0.95,
                     resamples: int = 10000, seed: int = 0) -> dict:
    """Confidence interval of spec/base from per-repeat throughputs. Returns {low, high, method, n}; low and
    high are None when either side has fewer than 2 usable repeats (a single window has no spread)."""
    paired = len(spec) == len(base) and all(v is not None and v > 0 for v in list(spec) + list(base))
    s, b = _clean(spec), _clean(base)
    n = min(len(s), len(b))
    out: dict[str, Any] = {"low": None, "high": None, "method": None, "n": n}
    if n < 2:
        out["method"] = "needs >= 2 repeats on both sides"
        return out
    alpha = 1.0 - confidence
    rng = np.random.default_rng(seed)
    if paired:
        d = np.log(np.asarray(s)) - np.log(np.asarray(b))
        if len(d) >= BOOTSTRAP_MIN_REPEATS:
            lo, hi = _bootstrap_t([d], alpha, resamples, rng)
            method = f"studentized bootstrap, paired log ratios, {resamples} resamples, seed {seed}"
        else:
            se = d.std(ddof=1) / math.sqrt(len(d))
            t = sps.t.ppf(1 - alpha / 2, len(d) - 1)
            lo, hi = d.mean() - t * se, d.mean() + t * se
            method = f"student t, paired log ratios, {len(d) - 1} dof"
    else:
        ls, lb = np.log(np.asarray(s)), np.log(np.asarray(b))
        if min(len(ls), len(lb)) >= BOOTSTRAP_MIN_REPEATS:
            lo, hi = _bootstrap_t([ls, lb], alpha, resamples, rng)
            method = f"studentized bootstrap, unpaired log means, {resamples} resamples, seed {seed}"
        else:
            vs, vb = ls.var(ddof=1) / len(ls), lb.var(ddof=1) / len(lb)
            se = math.sqrt(vs + vb)
            dof = (vs + vb) ** 2 / ((vs ** 2 / (len(ls) - 1)) + (vb ** 2 / (len(lb) - 1))) if se > 0 else len(ls) + len(lb) - 2
            t = sps.t.ppf(1 - alpha / 2, dof)
            diff = ls.mean() - lb.mean()
            lo, hi = diff - t * se, diff + t * se
            method = f"welch t, unpaired log means, {dof:.1f} dof"
    out.update(low=float(math.exp(lo)), high=float(math.exp(hi)), method=method)
    return out
