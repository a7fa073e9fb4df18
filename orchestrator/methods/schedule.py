"""Draft-length schedules by batch size: vLLM's `num_speculative_tokens_per_batch_size` (dynamic speculative
decoding, vLLM >= 0.32), written in a spec as one string: "1-3:3, 4-7:2, 8-256:0" — inclusive batch-size
ranges, each with its K (K = 0: no drafting at that batch size).

vLLM's rules, checked here before any engine starts: ranges start at 1, are sorted and do not overlap, K >= 0;
a batch size above the last range keeps the last K; vLLM caps every K at the engine's
`num_speculative_tokens`, so a schedule's largest K must not exceed it (it would be silently lowered).
"""

from __future__ import annotations

from .base import MethodError, Param

Schedule = tuple[tuple[int, int, int], ...]  # (batch start, batch end, K), inclusive


class ScheduleError(ValueError):
    pass


def parse_schedule(text: str) -> Schedule:
    """'1-3:3, 4-7:2, 8-256:0' -> ((1, 3, 3), (4, 7, 2), (8, 256, 0)); raises ScheduleError saying what is wrong."""
    entries: list[tuple[int, int, int]] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        try:
            rng, k_text = part.split(":")
            start, end = (int(x) for x in rng.split("-")) if "-" in rng else (int(rng), int(rng))
            entries.append((start, end, int(k_text)))
        except ValueError:
            raise ScheduleError(f"{part!r} is not START-END:K (e.g. '1-3:3, 4-256:0')") from None
    if not entries:
        raise ScheduleError("empty schedule: give START-END:K ranges, e.g. '1-3:3, 4-256:0'")
    previous_end = 0
    for start, end, k in entries:
        if start < 1 or end < start:
            raise ScheduleError(f"range {start}-{end}: need 1 <= start <= end")
        if k < 0:
            raise ScheduleError(f"range {start}-{end}: K must be >= 0, got {k}")
        if start <= previous_end:
            raise ScheduleError(f"range {start}-{end} overlaps or precedes the one before: give ranges in order")
        previous_end = end
    if entries[0][0] != 1:
        raise ScheduleError(f"the first range must start at batch size 1 (vLLM needs every batch size covered), "
                            f"got {entries[0][0]}")
    return tuple(entries)


def format_schedule(schedule: Schedule) -> str:
    return ", ".join(f"{s}-{e}:{k}" for s, e, k in schedule)


def k_at(schedule: Schedule, batch_size: int) -> int:
    """The K vLLM uses at one batch size (the last range's K above it)."""
    k = schedule[0][2]
    for start, _end, kk in schedule:
        if batch_size >= start:
            k = kk
    return k


def schedule_config(text: str, num_speculative_tokens: int) -> list[list[int]]:
    """The `speculative_config` value for a checked schedule string (raises ScheduleError)."""
    schedule = parse_schedule(text)
    top = max(k for _, _, k in schedule)
    if top > num_speculative_tokens:
        raise ScheduleError(f"the schedule's largest K ({top}) exceeds num_speculative_tokens "
                            f"({num_speculative_tokens}): vLLM would lower it silently; set num_speculative_tokens "
                            f"to at least {top}")
    if top == 0:
        raise ScheduleError("every K of the schedule is 0: that is the baseline (no speculation), use `baseline`")
    return [list(e) for e in schedule]


# ---- the method parameter (methods that vLLM drives with a schedule declare it) --------------------------------
SCHEDULE_PARAM = Param(str, "draft length by batch size, e.g. '1-3:3, 4-7:1, 8-256:0' (vLLM's "
                            "num_speculative_tokens_per_batch_size; K <= num_speculative_tokens)", sweepable=True)


def check_schedule(params: dict) -> None:
    """Refuse a bad schedule naming the parameter (MethodError)."""
    text = params.get("num_speculative_tokens_per_batch_size")
    if text is None:
        return
    try:
        schedule_config(text, params["num_speculative_tokens"])
    except ScheduleError as e:
        raise MethodError("num_speculative_tokens_per_batch_size", str(e)) from None


def schedule_entry(params: dict) -> dict:
    """The speculative_config entry of a point's schedule ({} without one)."""
    text = params.get("num_speculative_tokens_per_batch_size")
    if text is None:
        return {}
    return {"num_speculative_tokens_per_batch_size": schedule_config(text, params["num_speculative_tokens"])}
