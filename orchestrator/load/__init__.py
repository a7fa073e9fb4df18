"""Load generation: closed-loop concurrency over a prompt list, with per-request timings."""

from .closed_loop import RequestRecord, LoadWindow, run_closed_loop, run_warmup, WARMUP_MESSAGES

__all__ = ["RequestRecord", "LoadWindow", "run_closed_loop", "run_warmup", "WARMUP_MESSAGES"]
