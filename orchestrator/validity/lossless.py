"""Is the speculative run lossless against its baseline?

Temperature 0: per prompt (and repeat) the output token ids must be identical — `greedy_match_rate` is the
fraction that are, `common_prefix_frac` the mean length of the common prefix over the longer output.
Temperature > 0 outputs differ token for token by design; the check is a chi-square test of homogeneity of
the first output token's distribution, pooled over prompts and repeats (rare tokens merged so that every
expected count is >= 5). A small p-value says the speculative run samples a different distribution.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def greedy_match(spec: dict[tuple, list[int]], base: dict[tuple, list[int]]) -> dict:
    """Compare outputs keyed by (repeat, prompt_id); only keys present on both sides count."""
    keys = sorted(set(spec) & set(base), key=str)
    if not keys:
        return {"greedy_match_rate": None, "common_prefix_frac": None, "outputs_compared": 0}
    same = sum(1 for k in keys if list(spec[k]) == list(base[k]))
    fracs = []
    for k in keys:
        longest = max(len(spec[k]), len(base[k]))
        fracs.append(1.0 if longest == 0 else _common_prefix(spec[k], base[k]) / longest)
    return {"greedy_match_rate": same / len(keys), "common_prefix_frac": sum(fracs) / len(fracs),
            "outputs_compared": len(keys)}


def first_token_test(spec_first: Iterable[int], base_first: Iterable[int], min_expected: float = 5.0) -> dict:
    """Chi-square test of homogeneity of two samples of first output tokens."""
    from scipy.stats import chi2_contingency

    cs, cb = Counter(spec_first), Counter(base_first)
    ns, nb = sum(cs.values()), sum(cb.values())
    out = {"test": "chi-square homogeneity of the first output token", "n_spec": ns, "n_baseline": nb,
           "statistic": None, "dof": None, "p_value": None}
    if ns == 0 or nb == 0:
        return out
    total = ns + nb
    cats, other_s, other_b = [], 0, 0
    for tok in set(cs) | set(cb):
        count = cs[tok] + cb[tok]
        if count * min(ns, nb) / total >= min_expected:
            cats.append((cs[tok], cb[tok]))
        else:
            other_s, other_b = other_s + cs[tok], other_b + cb[tok]
    if other_s + other_b:
        cats.append((other_s, other_b))
    if len(cats) < 2:
        out.update(statistic=0.0, dof=0, p_value=1.0)
        return out
    stat, p, dof, _ = chi2_contingency([[c[0] for c in cats], [c[1] for c in cats]], correction=False)
    out.update(statistic=float(stat), dof=int(dof), p_value=float(p))
    return out
