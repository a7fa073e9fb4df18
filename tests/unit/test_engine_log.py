"""Engine output goes to a log file per engine, not the console; a start failure still shows the root cause
from that log; --verbose brings the output back (issue 18). Through the CLI, attached to the test run's Ray,
whose log_to_driver streams whatever an actor prints to the driver's console."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from orchestrator.engines.engine_log import failure_excerpt

SPEC = """
name: {name}
target: {{model: fake-model}}
engine: {{backend: fake, fake: {{step_seconds: 0.001, start_output: "{noise}"{fail}}}}}
workload: {{dataset: smoke, num_prompts: 2, max_tokens: 4}}
methods:
  baseline: {{}}
space: {{concurrency: [1]}}
measurement: {{repeats: 1, warmup_requests: 0}}
"""
NOISE = "WARNING third-party: Triton does not include a CPU backend"


def _run(tmp_path, ray_address, name, *extra, fail=""):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(SPEC.format(name=name, noise=NOISE, fail=fail))
    env = {k: v for k, v in os.environ.items() if k not in ("SPECSWEEP_ENGINE_LOG", "SPECSWEEP_ENGINE_LOG_LEVEL")}
    env["RAY_ADDRESS"] = ray_address
    res = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(spec), "--store",
                          f"sqlite:///{tmp_path / 'r.db'}", *extra], capture_output=True, text=True, env=env,
                         timeout=300)
    return res.returncode, res.stdout + res.stderr


def test_engine_output_goes_to_a_log_file_and_verbose_brings_it_back(ray_address, tmp_path):
    rc, out = _run(tmp_path, ray_address, "quiet")
    assert rc == 0, out
    assert NOISE not in out, out
    (line,) = [x for x in out.splitlines() if x.startswith("engine logs")]
    folder = Path(line.rsplit(": ", 1)[1])
    logs = list(folder.glob("baseline-*.log"))
    assert any(NOISE in p.read_text() for p in logs), logs  # kept, not lost
    rc, out = _run(tmp_path, ray_address, "loud", "--verbose")
    assert rc == 0 and NOISE in out and "engine logs" not in out, out  # the check above could see it


def test_a_start_failure_shows_the_root_cause_from_the_log(ray_address, tmp_path):
    noise = "Traceback (most recent call last):\\n  File engine_core.py\\nValueError: the real root cause"
    spec = tmp_path / "fails.yaml"
    spec.write_text(SPEC.format(name="fails", noise=noise, fail=', fail_start: "Engine core initialization failed. '
                                                                 'See root cause above."'))
    env = {k: v for k, v in os.environ.items() if k not in ("SPECSWEEP_ENGINE_LOG", "SPECSWEEP_ENGINE_LOG_LEVEL")}
    env["RAY_ADDRESS"] = ray_address
    res = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(spec), "--store",
                          f"sqlite:///{tmp_path / 'r.db'}"], capture_output=True, text=True, env=env, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "See root cause above" in out and "ValueError: the real root cause" in out, out
    assert "end of the engine's log" in out, out


def test_failure_excerpt_starts_at_the_last_traceback(tmp_path):
    log = tmp_path / "e.log"
    log.write_text("noise\n" * 100 + "Traceback (most recent call last):\n  old\nKeyError: x\n" + "more\n" * 3
                   + "Traceback (most recent call last):\n  File a.py\nRuntimeError: why\n")
    text = failure_excerpt(log)
    assert text.splitlines()[2:] == ["Traceback (most recent call last):", "  File a.py", "RuntimeError: why"]
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert failure_excerpt(log, max_lines=5).splitlines()[2:] == [f"line {i}" for i in range(95, 100)]
    assert failure_excerpt(None) == "" and failure_excerpt(tmp_path / "missing.log") == ""
