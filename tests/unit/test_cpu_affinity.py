"""engines/cpu_affinity.py on real processes named as vLLM names its own: the frontend and engine core are
moved off the worker's CPU, the worker is left where it is bound (pure: no engine, no Ray)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from orchestrator.engines.cpu_affinity import _threads, confine_engine_helpers, descendants

needs_two_cpus = pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                                reason="needs Linux and two allowed CPUs")

CHILD = "import os, sys, time; open('/proc/self/comm', 'w').write(sys.argv[1]); {pin}time.sleep(60)"
FRONTEND = textwrap.dedent("""
    import subprocess, sys, threading, time
    kid = {child!r}
    subprocess.Popen([sys.executable, "-c", kid.format(pin="os.sched_setaffinity(0, {{{cpu}}}); "), "VLLM::Worker"])
    subprocess.Popen([sys.executable, "-c", kid.format(pin=""), "VLLM::EngineCore"])
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # a second frontend thread
    time.sleep(60)
""")


def _named(pid: int, prefix: str) -> list[int]:
    return [p for p in descendants(pid) if open(f"/proc/{p}/comm").read().startswith(prefix)]


@needs_two_cpus
def test_frontend_and_engine_core_leave_the_workers_cpu():
    allowed = os.sched_getaffinity(0)
    cpu = min(allowed)
    front = subprocess.Popen([sys.executable, "-c", FRONTEND.format(child=CHILD, cpu=cpu)])
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            workers, cores = _named(front.pid, "VLLM::Worker"), _named(front.pid, "VLLM::EngineCor")
            if workers and cores and os.sched_getaffinity(workers[0]) == {cpu} and len(_threads(front.pid)) >= 2:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the stand-in processes did not start")
        placement = confine_engine_helpers(front.pid)
        assert placement.reason is None, placement.reason
        assert placement.worker_cpus == (cpu,)
        assert set(placement.helper_cpus) == allowed - {cpu}
        for pid in (front.pid, cores[0]):
            for tid in _threads(pid):
                assert os.sched_getaffinity(tid) == allowed - {cpu}, (pid, tid)
        assert os.sched_getaffinity(workers[0]) == {cpu}  # the worker stays on its core
        assert placement.threads_moved >= 3
    finally:
        for p in descendants(front.pid):
            try:
                os.kill(p, 9)
            except ProcessLookupError:
                pass
        front.kill()
        front.wait()


@needs_two_cpus
def test_nothing_moves_without_a_worker_below_the_frontend():
    front = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        placement = confine_engine_helpers(front.pid)
        assert placement.reason and "no vLLM worker" in placement.reason
        assert os.sched_getaffinity(front.pid) == os.sched_getaffinity(0)
    finally:
        front.kill()
        front.wait()


def test_the_specs_cpu_placement_reaches_the_engine_process(write_spec):
    """engine.cpu_placement travels to the engine actor's environment (confine by default); a wrong value is
    refused at load time, naming what is allowed."""
    from orchestrator.engines.cpu_affinity import PLACEMENT_ENV
    from orchestrator.engines.vllm_backend import VllmBackend
    from orchestrator.errors import SpecError
    from orchestrator.spec import load_spec

    text = """
name: placement
target: {model: smollm2-135m-instruct}
engine: {backend: vllm%s}
methods: {baseline: {}}
"""
    default = load_spec(write_spec(text % "", "a.yaml")).spec.engine
    assert VllmBackend.process_env(default, "/tmp/c")[PLACEMENT_ENV] == "confine"
    os_mode = load_spec(write_spec(text % ", cpu_placement: os", "b.yaml")).spec.engine
    assert VllmBackend.process_env(os_mode, "/tmp/c")[PLACEMENT_ENV] == "os"
    with pytest.raises(SpecError) as ei:
        load_spec(write_spec(text % ", cpu_placement: pinned", "c.yaml"))
    (i,) = ei.value.issues
    assert i.path == "engine.cpu_placement" and "'confine'" in i.message and "'os'" in i.message


@needs_two_cpus
def test_placement_os_moves_nothing():
    from orchestrator.engines.cpu_affinity import place_engine_processes

    before = os.sched_getaffinity(0)
    placement = place_engine_processes("os")
    assert placement.reason and "os" in placement.reason and placement.threads_moved == 0
    assert os.sched_getaffinity(0) == before
    with pytest.raises(ValueError, match="confine, os"):
        place_engine_processes("pinned")
