"""Load generation with per-request timings: closed loop (a fixed number of requests in flight) and open
loop (requests sent on a seeded arrival schedule)."""

from .closed_loop import WARMUP_MESSAGES, LoadWindow, RequestRecord, run_closed_loop, run_warmup
from .open_loop import arrival_offsets, run_open_loop

__all__ = ["RequestRecord", "LoadWindow", "run_closed_loop", "run_open_loop", "run_warmup", "arrival_offsets",
           "WARMUP_MESSAGES"]
