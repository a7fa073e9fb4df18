"""`cluster/` checked the way its consumers read it: the launcher config with Ray's own schema, the KubeRay
manifests against the field lists of the KubeRay API they name, the systemd unit with `systemd-analyze
verify`, and the unit's ExecStart run with the unit's own settings (fake backend, private Ray). The KubeRay
entrypoints run as `ray job submit` jobs in test_ray_job.py (they share its local head)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import IN_CI

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"

# Field lists of the KubeRay v1 API (ray-project/kuberay, ray-operator/apis/ray/v1/*_types.go, read for this
# test at rayjob_types.go 0057210e, raycronjob_types.go 027ccaf8, raycluster_types.go master): the fields our
# manifests may use. RayCronJob (alpha, KubeRay >= 1.6.0, feature gate RayCronJob) has only these two; it has
# no concurrencyPolicy (that is Kubernetes' CronJob) and no timeZone before KubeRay 1.7.
RAYCRONJOB_SPEC = {"jobTemplate", "schedule"}
RAYJOB_SPEC = {"activeDeadlineSeconds", "backoffLimit", "rayClusterSpec", "submitterPodTemplate", "metadata",
               "clusterSelector", "submitterConfig", "managedBy", "deletionStrategy", "entrypoint", "runtimeEnvYAML",
               "jobId", "submissionMode", "entrypointResources", "entrypointNumCpus", "entrypointNumGpus",
               "ttlSecondsAfterFinished", "shutdownAfterJobFinishes", "suspend"}
RAYCLUSTER_SPEC = {"authOptions", "suspend", "managedBy", "autoscalerOptions", "headServiceAnnotations",
                   "enableInTreeAutoscaling", "gcsFaultToleranceOptions", "headGroupSpec", "rayVersion",
                   "workerGroupSpecs"}
HEAD_GROUP = {"rayStartParams", "template", "serviceType", "headService", "enableIngress"}
WORKER_GROUP = {"groupName", "replicas", "minReplicas", "maxReplicas", "idleTimeoutSeconds", "rayStartParams",
                "template", "scaleStrategy", "suspend", "numOfHosts"}
RAY_VERSION = "2.60.0"


def _manifests() -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(CLUSTER.glob("kuberay-*.yaml"))}


def _job_specs(doc: dict) -> dict:
    return doc["spec"]["jobTemplate"] if doc["kind"] == "RayCronJob" else doc["spec"]


def _containers(cluster_spec: dict) -> list[dict]:
    groups = [cluster_spec["headGroupSpec"], *cluster_spec.get("workerGroupSpecs", [])]
    return [c for g in groups for c in g["template"]["spec"]["containers"]]


def test_kuberay_manifests_use_only_fields_of_the_named_version():
    docs = _manifests()
    assert set(docs) == {"kuberay-rayjob.yaml", "kuberay-raycronjob-nightly.yaml"}
    dockerfile = (CLUSTER / "Dockerfile").read_text()
    for name, doc in docs.items():
        assert doc["apiVersion"] == "ray.io/v1", name
        if doc["kind"] == "RayCronJob":
            assert set(doc["spec"]) <= RAYCRONJOB_SPEC, (name, set(doc["spec"]) - RAYCRONJOB_SPEC)
        job = _job_specs(doc)
        assert set(job) <= RAYJOB_SPEC, (name, set(job) - RAYJOB_SPEC)
        rc = job["rayClusterSpec"]
        assert set(rc) <= RAYCLUSTER_SPEC, (name, set(rc) - RAYCLUSTER_SPEC)
        assert set(rc["headGroupSpec"]) <= HEAD_GROUP, name
        for w in rc.get("workerGroupSpecs", []):
            assert set(w) <= WORKER_GROUP, (name, set(w) - WORKER_GROUP)
            if not rc.get("enableInTreeAutoscaling"):  # without the autoscaler min/max do nothing: say replicas
                assert "maxReplicas" not in w and "minReplicas" not in w and "replicas" in w, name
        assert rc["rayVersion"] == RAY_VERSION and f"ray:{RAY_VERSION}" in dockerfile
        assert rc.get("authOptions", {}).get("mode") == "token", f"{name}: token auth must be on"
        for c in _containers(rc):
            # the image the Dockerfile builds, its working dir (the entrypoints' paths are relative to it)
            assert re.fullmatch(r"REGISTRY/specsweep:0\.1\.0-gpu", c["image"]), c["image"]
            assert c["workingDir"] == "/opt/specsweep" and "WORKDIR /opt/specsweep" in dockerfile
            hf = [e for e in c.get("env", []) if e["name"] == "HF_TOKEN"]
            assert hf and "secretKeyRef" in hf[0]["valueFrom"], f"{name}: HF_TOKEN from a Secret"
            assert not [e for e in c.get("env", []) if "value" in e and "PASSWORD" in str(e["value"]).upper()]
        env = yaml.safe_load(job["runtimeEnvYAML"])["env_vars"]
        assert set(env) == {"SPECSWEEP_DB_FILE"}, "the store URL reaches the job as a file only"
        for arg in shlex.split(job["entrypoint"]):  # relative files the entrypoint names exist in the repo
            if arg.endswith(".yaml"):
                assert (ROOT / arg).is_file(), arg


def test_launcher_config_passes_rays_own_schema():
    from ray.autoscaler._private.util import prepare_config, validate_config

    cfg = yaml.safe_load((CLUSTER / "ray-cluster-gpu.yaml").read_text())
    validate_config(prepare_config(dict(cfg)))
    with pytest.raises(Exception, match="bogus"):  # the check can fail
        validate_config(prepare_config(dict(cfg, bogus=1)))
    assert {".venv", ".git", ".specsweep", "*.db"} <= set(cfg["rsync_exclude"])
    for cmd in cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"]:
        if "ray start" in cmd:
            assert cmd.startswith("RAY_AUTH_MODE=token "), cmd
    assert any(dst.endswith(".ray/auth_token") for dst in cfg["file_mounts"])


def _unit(path: Path) -> dict[str, list[str]]:
    """Key -> values of a systemd unit file (repeated keys keep every value)."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            k, v = line.split("=", 1)
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def _installed_copy(tmp: Path) -> tuple[Path, dict[str, str]]:
    """The unit and timer with their absolute paths moved under `tmp` (the repository's place, the state
    directory, the store URL file), the venv's specsweep linked where ExecStart expects it."""
    moves = {"/opt/specsweep": tmp / "opt/specsweep", "/var/lib/specsweep": tmp / "var/lib/specsweep",
             "/etc/specsweep": tmp / "etc/specsweep"}
    for p in moves.values():
        p.mkdir(parents=True, exist_ok=True)
    venv_bin = moves["/opt/specsweep"] / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "specsweep").symlink_to(Path(sys.executable).parent / "specsweep")
    units = tmp / "units"
    units.mkdir()
    for name in ("specsweep-nightly.service", "specsweep-nightly.timer"):
        text = (CLUSTER / name).read_text()
        for old, new in moves.items():
            text = text.replace(old, str(new))
        (units / name).write_text(text)
    return units, {k: str(v) for k, v in moves.items()}


def test_systemd_units_verify(tmp_path):
    if shutil.which("systemd-analyze") is None:
        if IN_CI and Path("/usr/bin/systemd-analyze").exists():
            pytest.fail("systemd-analyze exists but is not on PATH")
        pytest.skip("systemd-analyze is not installed here")
    units, _ = _installed_copy(tmp_path)
    r = subprocess.run(["systemd-analyze", "verify", *map(str, sorted(units.iterdir()))], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    unit = _unit(CLUSTER / "specsweep-nightly.service")
    assert "network-online.target" in unit["Wants"] and unit["StateDirectory"] == ["specsweep"]


FAKE_SUITE_SPEC = """
name: cluster-nightly-fake
target: {model: fake-model}
engine: {backend: fake}
workload: {dataset: smoke, num_prompts: 3, max_tokens: 8}
methods: {ngram: {num_speculative_tokens: 2}}
measurement: {repeats: 1, warmup_requests: 0}
"""


@pytest.mark.ray  # the unit's nightly starts its own private Ray instance, as on a host
def test_the_units_execstart_runs_with_the_units_settings(tmp_path, sqlite_url):
    """ExecStart with the unit's Environment= lines, WorkingDirectory= and state directory (what systemd
    does), the repository replaced by a copy whose nightly suite runs the fake backend: catches settings that
    break every night (e.g. RAY_ADDRESS set to the dashboard's http:// URL)."""
    units, moves = _installed_copy(tmp_path)
    unit = _unit(units / "specsweep-nightly.service")
    repo = Path(moves["/opt/specsweep"])
    (repo / "sweeps").mkdir()
    (repo / "sweeps" / "fake.yaml").write_text(FAKE_SUITE_SPEC)
    (repo / "cluster").mkdir()
    (repo / "cluster" / "nightly-suite.yaml").write_text("suite: cluster-fake\nsweeps: [../sweeps/fake.yaml]\n")
    Path(moves["/etc/specsweep"], "store-url").write_text(sqlite_url + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECSWEEP_", "RAY_"))}
    for assignment in unit.get("Environment", []):
        k, v = assignment.split("=", 1)
        env[k] = v
    assert unit["WorkingDirectory"] == [str(repo)]
    r = subprocess.run(shlex.split(unit["ExecStart"][0]), cwd=repo, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert list(Path(moves["/var/lib/specsweep"], "reports").glob("nightly-cluster-fake-*.md"))
