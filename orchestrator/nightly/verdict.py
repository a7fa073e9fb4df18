"""One metric of one point tonight against the median of the same point on previous nights."""

from __future__ import annotations

import statistics


def verdict_for(value: float | None, history: list[float], *, direction: str, threshold: float, min_history: int,
                noisy: bool = False) -> tuple[str, float | None, float | None]:
    """(verdict, history median, relative change). Verdicts:
    regression         worse than the median by more than `threshold` (and the row is not flagged noisy)
    suspicious         worse by more than `threshold` on a noisy row, or by more than half of `threshold`
    ok                 otherwise
    insufficient data  fewer than `min_history` comparable previous nights, or no value tonight"""
    hist = [h for h in history if h is not None]
    if value is None or len(hist) < min_history:
        return "insufficient data", (statistics.median(hist) if hist else None), None
    med = statistics.median(hist)
    if med == 0:
        return "insufficient data", med, None
    change = value / med - 1.0
    worse = -change if direction == "higher_is_better" else change
    if worse > threshold:
        return ("suspicious" if noisy else "regression"), med, change
    if worse > threshold / 2:
        return "suspicious", med, change
    return "ok", med, change
