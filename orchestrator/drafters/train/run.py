"""Train a drafter for a target, stage by stage, each stage cached in a work folder (resumable), the result
written atomically with a manifest. See __init__.py for the stages."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from ...paths import cache_dir
from ..trained import METHODS, record_trained
from .budget import Budget, more_time
from .settings import DEFAULT_LR, DEFAULT_STEPS, TrainError, TrainSettings  # noqa: F401 (re-exported)


@dataclass
class Stage:
    name: str
    seconds: float = 0.0
    cached: bool = False
    detail: dict = field(default_factory=dict)


Progress = Callable[[str, int, int, str], None]  # (stage, done, total, note)


def _noop(stage: str, done: int, total: int, note: str) -> None:
    pass


def _target(target: str) -> tuple[str, dict]:
    """Resolve the target to a local folder with a chat template; raise TrainError otherwise."""
    from ...models import DEMO_ALIASES, ModelError, resolve_model

    try:
        path = resolve_model(target)
    except ModelError as e:
        raise TrainError(f"--target {target}: {e}") from None
    folder = Path(path)
    if not folder.is_dir():
        raise TrainError(f"--target {target}: not a builtin alias ({', '.join(DEMO_ALIASES)}) nor a local model "
                         f"folder; training reads the target's weights locally (download it first)")
    cfg = json.loads((folder / "config.json").read_text())
    tok_cfg = folder / "tokenizer_config.json"
    has_template = (folder / "chat_template.jinja").is_file() or (
        tok_cfg.is_file() and json.loads(tok_cfg.read_text()).get("chat_template"))
    if not has_template:
        raise TrainError(f"--target {target}: {folder} has no chat template (tokenizer_config.json chat_template "
                         f"or chat_template.jinja); drafters are trained on the target's chat responses")
    return str(folder), cfg


def _check_disk(folder: Path, need_bytes: int) -> None:
    """Refuse before anything is written when the disk under `folder` (or its nearest existing parent) is short."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if free < need_bytes:
        raise TrainError(f"not enough disk space in {folder}: {free / 1e6:.0f} MB free, about "
                         f"{need_bytes / 1e6:.0f} MB needed for the features and the drafter "
                         f"(set SPECSWEEP_CACHE to a larger disk)")


def target_name(s: TrainSettings) -> str:
    return Path(s.target).name if os.sep in s.target else s.target


def drafter_folder(s: TrainSettings) -> Path:
    return cache_dir() / "drafters" / f"{s.method}-{target_name(s)}-{s.key()}"


def _index_if_default(s: TrainSettings, folder: Path) -> None:
    """A drafter of default settings is what `trained:<method>` means (drafters/trained.py)."""
    from dataclasses import replace

    if replace(s, max_minutes=None, budget_minutes=None) == TrainSettings(method=s.method, budget_minutes=None):
        record_trained(s.method, folder)


def train_drafter(s: TrainSettings, progress: Progress = _noop, force: bool = False) -> tuple[Path, dict]:
    """Return (drafter folder, manifest); reuses a finished drafter of the same settings unless `force`."""
    if s.method not in METHODS:
        raise TrainError(f"--method {s.method}: allowed {', '.join(METHODS)}")
    model_path, target_cfg = _target(s.target)
    out = drafter_folder(s)
    if (out / "manifest.json").is_file() and not force:
        cached = _cached(s, out, progress)
        if cached is not None:
            return out, cached
        force = True  # its checkpoint's step plan was the budget's: train again from step 0 (the data is kept)
    work = cache_dir() / "drafters" / "work" / out.name  # training checkpoints of this drafter
    data_dir = cache_dir() / "drafters" / "data" / f"{target_name(s)}-{s.data_key()}"
    hidden = target_cfg["hidden_size"]
    n_layers = len(_feature_layers(target_cfg))
    _check_disk(work.parent, int(s.num_prompts * (s.max_tokens + 120) * n_layers * hidden * 2 * 1.3) + 200_000_000)
    data_dir.mkdir(parents=True, exist_ok=True)
    if force:  # train again from step 0: the finished run's checkpoint would only be resumed (the data is kept)
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    budget = Budget(s.budget_minutes)
    dtype = s.resolved_dtype()
    # 1. prompts, 2. responses (vLLM in a child process), 3. features: the data every method trains from
    examples, responses_stage, data_hash = _responses(s, model_path, data_dir, dtype.dtype, budget, progress)
    data, features_stage = _features(s, model_path, target_cfg, examples, data_dir, dtype.dtype, budget, progress)
    # 4. training
    cfg, weights, training_stage = _train(s, model_path, target_cfg, data, work, budget, progress)
    stages = [responses_stage, features_stage, training_stage]
    result = training_stage.detail
    # 5. export (atomic: a crash or a full disk leaves no half-written folder)
    import torch

    manifest = {
        "method": s.method, "target": s.target, "target_path": model_path, "settings": asdict(s),
        "data_hash": data_hash, "prompts": len(data["tokens"]), "response_tokens": responses_stage.detail["tokens"],
        "budget": budget.record(),
        "feature_layers": _feature_layers(target_cfg), "steps_done": result["steps_done"],
        "final_losses": result["final_losses"], "final_accuracy": result["final_accuracy"],
        "stopped_early": result["stopped_early"], "stages": [asdict(x) for x in stages],
        "total_seconds": time.perf_counter() - t_all, "torch_version": torch.__version__,
        "data_dtype": dtype.dtype, "data_dtype_reason": dtype.reason, "bf16_autocast": s.autocast,
    }
    _write_with_manifest(s.method, out, cfg, weights, manifest)
    _index_if_default(s, out)
    return out, manifest


def _cached(s: TrainSettings, out: Path, progress: Progress) -> dict | None:
    """The finished drafter's manifest, or None when a budget cut it and this run has more time."""
    manifest = json.loads((out / "manifest.json").read_text())
    made = manifest.get("budget") or {}
    if not (made.get("limited") and more_time(s.budget_minutes, made.get("minutes"))):
        _index_if_default(s, out)
        return manifest
    progress("budget", 1, 1, f"budget: the cached drafter was cut by a {made.get('minutes'):g}-minute budget "
             f"({_cuts_text(made.get('stages', {}))}); this run has more time: more data, trained again")
    return None


def _responses(s: TrainSettings, model_path: str, data_dir: Path, dtype: str, budget: Budget,
               progress: Progress) -> tuple[list[dict], Stage, str]:
    """The prompts, and the target's responses to them (a prefix of the prompts when a budget cut them)."""
    from ...datasets.prompts import training_prompts
    from .generate import read_responses

    prompts = training_prompts(s.num_prompts, s.seed)
    if len(prompts) < s.num_prompts:
        raise TrainError(f"--prompts {s.num_prompts}: the templates give only {len(prompts)} distinct prompts")
    (data_dir / "prompts.json").write_text(json.dumps(prompts))
    progress("dtype", 1, 1, f"{dtype} ({s.resolved_dtype().reason})")
    responses = data_dir / "responses.jsonl"
    cut_before = _read_cut(responses)
    examples = read_responses(responses)
    more = len(examples) < len(prompts) and (cut_before is None or more_time(s.budget_minutes, cut_before))
    st = Stage("responses", cached=not more)
    t0 = time.perf_counter()
    if more:
        progress("responses", len(examples), len(prompts), "starting vLLM")
        env = generation_env(os.environ, _usable_cpus())
        st.detail["log"] = _generate(model_path, data_dir / "prompts.json", responses, s.max_tokens, env, progress,
                                     dtype, budget.seconds_left("responses"))
        examples = read_responses(responses)
        _write_cut(responses, s.budget_minutes if len(examples) < len(prompts) else None)
    budget.cut("responses", len(examples), len(prompts))
    st.seconds = time.perf_counter() - t0
    st.detail["tokens"] = sum(len(e["response_ids"]) for e in examples)
    if len(examples) < len(prompts):
        progress("responses", len(examples), len(prompts), f"budget: {len(examples)} of {len(prompts)} prompts, "
                 f"{st.detail['tokens']} response tokens")
    else:
        progress("responses", len(examples), len(prompts), f"{st.detail['tokens']} response tokens")
    return examples, st, hashlib.sha256(responses.read_bytes()).hexdigest()[:16]


def _features(s: TrainSettings, model_path: str, target_cfg: dict, examples: list[dict], data_dir: Path, dtype: str,
              budget: Budget, progress: Progress) -> tuple[dict, Stage]:
    """The target's hidden states at the feature layers for every example (cached; budget-aware)."""
    import torch

    from .features import compute_features

    feat_file = data_dir / "features.pt"
    data = torch.load(feat_file, weights_only=False) if feat_file.is_file() else None
    have = len(data["tokens"]) if data else 0
    cut_before = _read_cut(feat_file)
    more = have < len(examples) and (cut_before is None or more_time(s.budget_minutes, cut_before))
    st = Stage("features", cached=not more)
    t0 = time.perf_counter()
    if more:
        data = compute_features(model_path, examples, _feature_layers(target_cfg), feat_file, dtype=dtype,
                                progress=lambda i, n: progress("features", i, n, ""),
                                seconds=budget.seconds_left("features"), existing=data)
        _write_cut(feat_file, s.budget_minutes if len(data["tokens"]) < len(examples) else None)
        if len(data["tokens"]) < len(examples):
            progress("features", len(data["tokens"]), len(examples),
                     f"budget: {len(data['tokens'])} of {len(examples)} examples")
    assert data is not None
    budget.cut("features", len(data["tokens"]), len(examples))
    st.seconds = time.perf_counter() - t0
    return data, st


def _train(s: TrainSettings, model_path: str, target_cfg: dict, data: dict, work: Path, budget: Budget,
           progress: Progress) -> tuple[dict, dict, Stage]:
    """The method's trainer over the data: (drafter config, weights, the stage with the trainer's result)."""
    from .features import target_tensors

    tensors = target_tensors(model_path)
    st = Stage("training")
    t0 = time.perf_counter()
    if s.method == "xpress":  # the head over the DFlash drafter of the same data (trained first when missing)
        from .xpress_train import train_xpress

        backbone, _ = train_drafter(s.backbone(), progress)
        t0 = time.perf_counter()
        cfg, weights, result = train_xpress(s, target_cfg, data, tensors, work, progress, backbone,
                                            seconds=budget.seconds_left("training"))
    else:
        from .dflash_train import train_dflash
        from .eagle3_train import train_eagle3

        trainer = train_eagle3 if s.method == "eagle3" else train_dflash
        cfg, weights, result = trainer(s, target_cfg, data, tensors, work, progress,
                                       seconds=budget.seconds_left("training"))
    assert s.steps is not None  # TrainSettings fills it in
    budget.cut("training", result["planned_steps"], s.steps)
    st.seconds = time.perf_counter() - t0
    st.detail = result
    return cfg, weights, st


def _cut_file(path: Path) -> Path:
    return path.with_name(path.name + ".budget.json")


def _read_cut(path: Path) -> float | None:
    """The budget (minutes) that cut this data file short, or None (complete, or stopped by a kill)."""
    f = _cut_file(path)
    return json.loads(f.read_text())["minutes"] if f.is_file() else None


def _write_cut(path: Path, minutes: float | None) -> None:
    if minutes is None:
        _cut_file(path).unlink(missing_ok=True)
    else:
        _cut_file(path).write_text(json.dumps({"minutes": minutes}))


def _cuts_text(stages: dict) -> str:
    return ", ".join(f"{name} {done} of {wanted}" for name, (done, wanted) in stages.items()) or "nothing cut"


def budget_text(manifest: dict) -> str | None:
    """One line for the end of `drafters train` when a budget cut the drafter short; None otherwise."""
    made = manifest.get("budget") or {}
    if not made.get("limited"):
        return None
    return (f"cut by the {made['minutes']:g}-minute first-run budget on this CPU: {_cuts_text(made['stages'])} "
            f"(the manifest says so); `--budget-minutes 0` continues to the full settings")


def _write_with_manifest(method: str, out: Path, cfg: dict, weights: dict, manifest: dict) -> None:
    from ..layout import dflash_weight_shapes, eagle3_weight_shapes, write_checkpoint, xpress_weight_shapes

    shapes = {"eagle3": eagle3_weight_shapes, "xpress": xpress_weight_shapes}.get(method, dflash_weight_shapes)(cfg)
    weights = dict(weights)
    extra: dict[str, str | bytes] = {"manifest.json": json.dumps(manifest, indent=2)}
    mask = weights.pop("__mask_embedding_pt__", None)
    if mask is not None:  # DFlash: the trained mask-slot embedding (vLLM reads mask_embedding.pt)
        extra["mask_embedding.pt"] = mask
    write_checkpoint(out, cfg, shapes, weights, extra_files=extra)


# Below this many usable CPUs the responses' engine computes on all of them (see generation_env).
ALL_CPUS_UP_TO = 4


def _usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def generation_env(base: Mapping[str, str], cpus: list[int]) -> dict[str, str]:
    """The environment of the responses' vLLM child. vLLM's CPU backend binds its worker to all CPUs but one
    (`VLLM_CPU_OMP_THREADS_BIND=auto` keeps one for the scheduler process); on a machine of ALL_CPUS_UP_TO CPUs
    or fewer that idles a large share of it (half of 2 cores), and here nothing else runs beside the offline
    engine, so the worker gets every usable CPU (1.4x the generation rate on a 2-core AMD EPYC with
    AVX512-BF16, bf16). A value the user set is kept, and larger machines keep vLLM's own binding. Benchmark
    engines are not started here: they keep vLLM's binding (engine.cpu_placement)."""
    env = dict(base, VLLM_CPU_KVCACHE_SPACE=base.get("VLLM_CPU_KVCACHE_SPACE", "2"),
               VLLM_LOGGING_LEVEL=base.get("SPECSWEEP_ENGINE_LOG_LEVEL", "WARNING"))
    if "VLLM_CPU_OMP_THREADS_BIND" not in base and 1 < len(cpus) <= ALL_CPUS_UP_TO:
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cpus)
    return env


def _generate(model_path: str, prompts: Path, responses: Path, max_tokens: int, env: dict,
              progress: Progress, dtype: str, seconds: float | None = None) -> list[str]:
    """Run generate.py in a child process, relaying its progress lines; raise TrainError when it fails."""
    from ...processes import stop_process_group

    # its own process group: on Ctrl-C / SIGTERM / SIGHUP the child, vLLM's EngineCore and its workers are
    # stopped together (processes.py), none left running
    with subprocess.Popen([sys.executable, "-m", "orchestrator.drafters.train.generate", model_path, str(prompts),
                           str(responses), str(max_tokens), dtype, "none" if seconds is None else f"{seconds:.1f}"],
                          env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as child:
        try:
            stdout, stderr = child.stdout, child.stderr
            assert stdout is not None and stderr is not None  # both piped
            err: list[str] = []
            reader = threading.Thread(target=lambda: err.extend(stderr), daemon=True)  # no pipe deadlock
            reader.start()
            log = []
            for line in stdout:
                parts = line.split()
                if len(parts) == 4 and parts[0] == "progress":
                    progress("responses", int(parts[1]), int(parts[2]), f"{parts[3]} tokens")
                else:
                    log.append(line.rstrip())
            rc = child.wait()
            reader.join()
        finally:
            stop_process_group(child)
    if rc != 0:
        raise TrainError(f"generating responses with vLLM failed (exit {rc}):\n{''.join(err)[-3000:]}")
    return log[-1:]


def _feature_layers(target_cfg: dict) -> list[int]:
    """Transformers hidden_states indices the drafter reads: EAGLE-3's aux layers (vLLM default 2, L/2, L-3);
    DFlash's target_layer_ids + 1 (vLLM adds 1), i.e. the same features."""
    from ..layout import default_aux_layers

    return default_aux_layers(target_cfg["num_hidden_layers"])


def seeded(seed: int):
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
