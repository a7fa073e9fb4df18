"""Stopping cleanly: a specsweep command that is told to stop (Ctrl-C, SIGTERM from a job runner or
`systemctl stop`, SIGHUP from a closed terminal) stops every process it started — none is left running,
reparented to init.

  stop_signals_interrupt()  SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, as Ctrl-C does,
                            so every `finally` that stops a child runs (drafters train)
  stop_process_group(proc)  a child started with start_new_session=True, and everything it started
                            (vLLM's EngineCore and workers), SIGTERM then SIGKILL after a grace period
(`specsweep run` and `nightly` have their own guard, controller/runner.py: a signal ends the sweep between
trials and kills every engine actor.)
"""

from __future__ import annotations

import os
import signal
import subprocess
from contextlib import contextmanager
from typing import Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    def handler(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {}
    for sig in STOP_SIGNALS:
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        for sig, prev in previous.items():
            signal.signal(sig, prev)


def stop_process_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to the child's process group (the child is its leader: start_new_session=True), SIGKILL to
    what is left after `grace_s`."""
    if proc.poll() is None or _group_alive(proc.pid):
        _killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
        _killpg(proc.pid, signal.SIGKILL)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False
