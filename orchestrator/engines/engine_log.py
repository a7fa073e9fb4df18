"""Where an engine's own output goes: by default a log file per engine, not the console.

An engine process (and vLLM's EngineCore and workers under it, which inherit its file descriptors) prints
dozens of third-party lines per start: vLLM INFO/WARNING, Triton "doesn't include CPU backend", NUMA
binding, "libtcmalloc is not found", oneDNN fallbacks, FutureWarnings. The actor points its stdout and
stderr at `<specsweep home>/logs/engines/<label>-<config hash>-<pid>.log` (on the engine's machine), so the
sweep's console shows the sweep. A start failure is still shown in full: the error carries the end of the
log, where vLLM writes the root cause. `specsweep run --verbose` (or SPECSWEEP_ENGINE_LOG_LEVEL set)
streams everything to the console as before.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "SPECSWEEP_ENGINE_LOG"  # "file" (default) | "console"; set for the actor by controller/resources.py


def engine_log_mode() -> str:
    """For the driver: what the engine actors are told (file unless --verbose / SPECSWEEP_ENGINE_LOG_LEVEL)."""
    if os.environ.get(ENV) in ("file", "console"):
        return os.environ[ENV]
    return "console" if os.environ.get("SPECSWEEP_ENGINE_LOG_LEVEL") else "file"


def logs_dir() -> Path:
    from ..paths import specsweep_home

    return specsweep_home() / "logs" / "engines"


def redirect_to_file(label: str, config_hash: str) -> Path | None:
    """In the engine's process: point fds 1 and 2 (inherited by every child) at a fresh log file; returns
    its path, or None when the engine logs to the console."""
    if os.environ.get(ENV) != "file":  # only the controller asks for a file; a plain instance (tests) keeps its output
        return None
    folder = logs_dir()
    folder.mkdir(parents=True, exist_ok=True)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)
    path = folder / f"{safe}-{config_hash[:12]}-{os.getpid()}.log"
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return path


def failure_excerpt(path: Path | None, max_lines: int = 40) -> str:
    """The end of an engine's log for an error message: from the last traceback (vLLM's root cause) on,
    at most `max_lines` lines."""
    if path is None or not path.is_file():
        return ""
    lines = path.read_text(errors="replace").splitlines()
    start = max((i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line), default=None)
    tail = lines[start:] if start is not None else lines
    tail = tail[-max_lines:]
    return f"\n--- end of the engine's log {path} ---\n" + "\n".join(tail) if tail else ""
