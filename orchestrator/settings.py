"""Settings read from the environment: one parser, so every variable is refused in the same words, and one
registry (`ENVIRONMENT`) that describes every variable specsweep reads."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass


def env_seconds(name: str, default: float, *, allow_zero: bool, error: type[ValueError]) -> float:
    """$name as seconds (`default` when unset or empty); `error` names the variable and what is allowed."""
    raw = os.environ.get(name)
    if not raw:
        return default
    allowed = "a number >= 0" if allow_zero else "a number > 0"
    try:
        value = float(raw)
    except ValueError:
        raise error(f"{name}={raw!r}: expected seconds ({allowed})") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise error(f"{name}={raw!r}: expected seconds ({allowed})")
    return value


@dataclass(frozen=True)
class EnvVar:
    """One environment variable specsweep reads: the one place it is described (docs/gen_reference.py renders
    the list; tests/unit/test_docs_reference.py checks every variable the package names is here)."""

    name: str
    default: str
    what: str


ENVIRONMENT: tuple[EnvVar, ...] = (
    EnvVar("SPECSWEEP_HOME", "`$XDG_DATA_HOME/specsweep` = `~/.local/share/specsweep`",
           "where the default SQLite store (`specsweep.db`), `cache/` and `logs/` live"),
    EnvVar("SPECSWEEP_CACHE", "`$SPECSWEEP_HOME/cache`",
           "the converted demo model, trained demo drafters, vLLM's and torch's compile caches"),
    EnvVar("SPECSWEEP_DB", "SQLite in `SPECSWEEP_HOME`", "the store URL (`--store` overrides it)"),
    EnvVar("SPECSWEEP_DB_FILE", "—",
           "a file whose first line is the store URL, used when `--store` and `SPECSWEEP_DB` are absent: keeps a "
           "password out of command lines, job metadata and logs"),
    EnvVar("SPECSWEEP_LEASE_TIMEOUT_S", "`120`",
           "seconds without a heartbeat after which a sweep's (or nightly suite's) lease may be taken over by "
           "another controller"),
    EnvVar("SPECSWEEP_STORE_RETRY_S", "`300`",
           "how long a reachable store's reads and writes are retried through an outage (a restart, a failover) "
           "before the command stops with exit 4 (`0`: never retried)"),
    EnvVar("SPECSWEEP_ENGINE_LOG_LEVEL", "`WARNING`",
           "vLLM's log level inside engine actors; when set, engine output goes to the console as with `--verbose`"),
    EnvVar("SPECSWEEP_ENGINE_LOG", "`file`",
           "`file`: each engine actor's own output (vLLM, Triton, NUMA, oneDNN warnings, its EngineCore's too) "
           "goes to `$SPECSWEEP_HOME/logs/engines/<label>-<config hash>-<pid>.log` on the engine's machine (the "
           "folder is printed once; a start failure shows the log from the root-cause traceback on); `console`: "
           "streamed to the console (`run --verbose`)"),
    EnvVar("SPECSWEEP_CPU_PLACEMENT", "set by the controller from `engine.cpu_placement`",
           "internal: how the controller tells a vllm-cpu engine actor where its frontend and engine-core "
           "processes may run (`confine` or `os`); set `engine.cpu_placement` in the spec instead"),
    EnvVar("SPECSWEEP_CHROMIUM", "first of `chromium`, `google-chrome` on PATH",
           "the browser for `report --screenshot`"),
    EnvVar("SPECSWEEP_TRAIN_THREADS", "every CPU",
           "PyTorch threads for `drafters train` (the test suite sets 1: tiny drafters train faster on one "
           "thread beside another job)"),
    EnvVar("RAY_ADDRESS", "—", "attach to this Ray cluster instead of starting a local one"),
    EnvVar("VLLM_PLUGINS", "— (vLLM loads every plugin)",
           "vLLM's own allow-list of plugin names; where set it must include `specsweep`, or vLLM does not load "
           "specsweep's plugin and xPress drafters cannot load (refused before any engine starts, and again in the "
           "engine's actor)"),
)
