"""Connecting to Ray: an existing cluster (RAY_ADDRESS / --ray-address, as under `ray job submit`), or a
private local instance on free ports (never the default 6379, which other services may hold)."""

from __future__ import annotations

import os


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> str:
    """Initialise Ray once per process. Returns a description of what was connected to."""
    import ray

    if ray.is_initialized():
        return "already initialised"
    address = address or os.environ.get("RAY_ADDRESS")
    # Ray's and vLLM's own lines (raylet `worker_pool.cc: Started worker process`, actor prints) stay in Ray's
    # and the engines' log files; only --verbose (engine output to the console) streams workers to the driver.
    from ..engines.engine_log import engine_log_mode

    to_driver = engine_log_mode() == "console"
    if address and address != "local":
        ray.init(address=address, log_to_driver=to_driver, configure_logging=False)
        return f"cluster at {address}"
    # address="local" always starts a new private instance (ports chosen free), never attaching to a
    # cluster it happens to find. Its workers (the engines) run at niceness 0, not Ray's default 15: at 15 the
    # raylet, GCS and agents outrank the engine being measured (issue 19). A cluster's own setting is
    # recorded with every row (process_niceness) and flagged `low_priority`.
    os.environ.setdefault("RAY_worker_niceness", "0")
    # Ray 2.60 turns token authentication on for a new local instance and logs a warning that says so: keep the
    # authentication (Ray's secure default), not the console line. (Setting RAY_AUTH_MODE=token ourselves does
    # not work: Ray reads the mode before ray.init and then never creates the token.)
    import logging

    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
             log_to_driver=to_driver, configure_logging=False)
    return "local Ray instance"
