"""`specsweep submit SPEC`: run a sweep as a Ray job on a cluster (JobSubmissionClient).

The job's working dir is uploaded (`working_dir`), the entrypoint is `specsweep run <spec>`; the store URL
reaches the job through the job's environment: as SPECSWEEP_DB when the URL carries no credential in any
form (store/urls.py), otherwise only as SPECSWEEP_DB_FILE, a path on the cluster's nodes (a mounted secret) —
a password never goes into the entrypoint, the runtime_env or the job metadata, which the Ray dashboard
shows to anyone."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from .store.urls import display_url, has_credentials

EXCLUDES = [".venv", ".git", "**/__pycache__", "*.db", "*.db-wal", "*.db-shm", ".specsweep", "nightly-reports"]


class SubmitError(ValueError):
    pass


def submission_id(sweep_name: str, now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return re.sub(r"[^A-Za-z0-9_\-]", "-", sweep_name) + "-" + now.strftime("%Y%m%d-%H%M%S")


def job_request(spec: Path, sweep_name: str, working_dir: Path, store_url: str | None,
                store_file_on_cluster: str | None) -> dict:
    """What is sent to Ray (tested apart from Ray: it must never hold a password)."""
    spec, working_dir = spec.resolve(), working_dir.resolve()
    try:
        rel = spec.relative_to(working_dir)
    except ValueError:
        raise SubmitError(f"{spec} is not inside the working dir {working_dir}: the job only sees that folder") from None
    env: dict[str, str] = {}
    if store_file_on_cluster:
        env["SPECSWEEP_DB_FILE"] = store_file_on_cluster
    elif store_url:
        if has_credentials(store_url):
            raise SubmitError(
                f"the store URL {display_url(store_url)} carries a credential (a password in the user part or a "
                f"password/token parameter), or cannot be parsed; it would be visible in the Ray job's runtime_env. "
                f"Put the URL in a file on the cluster's nodes (e.g. a mounted secret) and pass its path with "
                f"--store-file PATH (the job reads it as SPECSWEEP_DB_FILE), or set SPECSWEEP_DB in the cluster's "
                f"environment and pass --no-store")
        env["SPECSWEEP_DB"] = store_url
    return {
        "entrypoint": f"specsweep run {rel.as_posix()}",
        "submission_id": submission_id(sweep_name),
        "runtime_env": {"working_dir": str(working_dir), "excludes": EXCLUDES, "env_vars": env},
        "metadata": {"specsweep_sweep": sweep_name,
                     "specsweep_store": display_url(store_url) if store_url else "(cluster environment)"},
    }


def submit(address: str | None, request: dict, wait: bool, echo=print) -> str:
    """Submit; with `wait`, stream the job's logs and return its final status."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(address)
    sid = client.submit_job(**request)
    echo(f"submitted job {sid} to {address or 'the RAY_ADDRESS cluster'}")
    if not wait:
        return "SUBMITTED"
    import asyncio

    async def tail():
        async for chunk in client.tail_job_logs(sid):
            echo(chunk.rstrip("\n"))

    try:
        asyncio.run(tail())
    except Exception as e:  # log streaming can drop; the status below is what counts
        echo(f"(log stream ended: {type(e).__name__}: {e})")
    status = client.get_job_status(sid)
    while status not in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
        import time

        time.sleep(2)
        status = client.get_job_status(sid)
    return str(status.value if hasattr(status, "value") else status)
