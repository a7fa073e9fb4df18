"""A specsweep command told to stop leaves no process behind (issue 18): `drafters train` stopped with SIGTERM
while vLLM generates its responses (a child process with vLLM's EngineCore under it), and with SIGHUP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.vllm


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_stopping_drafters_train_stops_its_vllm_processes(private_drafter_cache, tmp_path, sig):
    exe = str(Path(sys.executable).with_name("specsweep"))
    cmd = [exe, "drafters", "train", "--method", "eagle3", "--prompts", "64", "--max-tokens", "64", "--steps", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "SPECSWEEP_CACHE": str(private_drafter_cache)})
    seen: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + 240
    # wait until vLLM's engine runs: the generate child has a child of its own (EngineCore)
    while time.monotonic() < deadline:
        for p in _descendants(proc.pid):
            seen[p.pid] = p
        if any(_descendants(p.pid) for p in seen.values() if _alive(p)) and len(seen) >= 2:
            break
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.5)
    else:
        pytest.fail("vLLM's engine never started under drafters train")
    time.sleep(3)  # let the engine get busy
    for p in _descendants(proc.pid):
        seen[p.pid] = p
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 130, out
    assert "interrupted" in out, out
    time.sleep(1)
    left = [f"{p.pid} {' '.join(p.cmdline()[:3])}" for p in seen.values() if _alive(p)]
    assert not left, f"left running after {sig.name}: {left}"
