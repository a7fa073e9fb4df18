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
from typing import TYPE_CHECKING, Callable

from ...engines.dtype import DtypeChoice, resolve_dtype
from ...environment import cpu_flags, isa_cap
from ...paths import cache_dir

from ..trained import METHODS, record_trained
from .budget import DEFAULT_BUDGET_MINUTES, Budget, more_time

if TYPE_CHECKING:  # dflash_train imports torch: only the training path loads it
    from .dflash_train import DFlashRecipe
# Training steps (batches of 8) when --steps is not given. EAGLE-3: data + 400 steps took 13-17 min on two
# 2-core AMD EPYCs. DFlash reuses the data (training only): 640 steps of ~0.75 s, because its smoke AL rose
# from 1.47 at 400 steps to 1.51 at 640 (benchmarks/dflash_ablation.py); `make demo-drafters` from an empty
# cache then took 31.9 min on the slower of the two machines (README, "First time, from nothing").
# xPress trains only its refiner head over the cached DFlash drafter (backbone frozen): steps of 8 responses x 24
# blocks at K = 3 and 7 each (drafters/train/xpress_train.py).
DEFAULT_STEPS = {"eagle3": 400, "dflash": 640, "xpress": 500}
# Peak learning rates (AdamW, warm-up then cosine): DFlash's context path trains faster at 3e-3
# (benchmarks/dflash_ablation.py); EAGLE-3 keeps the rate its figures were measured with.
# xPress: 3e-3 over 1e-3 lifted the head's held-out accepted length at 2 passes from 1.050x to 1.082x the bare
# drafter's at 250 steps (docs/results/2026-12-07-xpress-demo.md, "The learning rate").
DEFAULT_LR = {"eagle3": 1e-3, "dflash": 3e-3, "xpress": 3e-3}


class TrainError(RuntimeError):
    """Bad input or a failed stage; the message says what and where."""


@dataclass(frozen=True)
class TrainSettings:
    method: str = "eagle3"
    target: str = "smollm2-135m-instruct"
    seed: int = 0
    num_prompts: int = 1000  # variety beats steps: 1000 prompts x 400 steps generalise better than 480 x 400
    max_tokens: int = 128
    steps: int | None = None  # None: DEFAULT_STEPS[method]
    batch_size: int = 8
    lr: float | None = None  # None: DEFAULT_LR[method]
    ttt_steps: int = 3  # eagle3: draft steps unrolled in training
    block_size: int = 16  # dflash: drafted block (K <= block - 1: one drafter serves K = 3, 7, 15)
    draft_vocab_size: int = 8192
    soft_labels: bool = True  # eagle3: learn the target's next-token distribution (top 16), not only its argmax
    bf16_autocast: bool = True  # forward pass in bfloat16 (float32 weights) where `dtype` resolves to bfloat16:
    # ~1.8x faster on CPUs with AVX512-BF16; off on a CPU without native bf16 (emulated bf16 is slower than fp32)
    dtype: str = "auto"  # of response generation and feature extraction: auto = bfloat16 on native-bf16 CPUs, else float32
    max_minutes: float | None = None  # stop training early after this long (recorded; not deterministic)
    # first-run time budget (budget.py): on a slow CPU, fewer responses, features and steps so that a run from an
    # empty cache ends within about this long; None or 0: no budget. Not part of any cache key.
    budget_minutes: float | None = DEFAULT_BUDGET_MINUTES
    # dflash: the recipe trained (dflash_train.DFlashRecipe); None: the one the demo ships (dflash_train.RECIPE).
    # Another recipe is another drafter (its own cache key) and is never what `trained:dflash` means, so a
    # benchmark can measure a candidate beside the shipped drafter in one run (benchmarks/demo_drafters.py).
    dflash_recipe: DFlashRecipe | None = None
    # xpress: training steps of the DFlash drafter under the head (None: its default); the head is trained over
    # the DFlash drafter of these settings (`backbone()`), trained first when it is not cached
    backbone_steps: int | None = None

    def __post_init__(self) -> None:
        if self.steps is None:
            object.__setattr__(self, "steps", DEFAULT_STEPS.get(self.method, 400))
        if self.lr is None:
            object.__setattr__(self, "lr", DEFAULT_LR.get(self.method, 1e-3))
        if self.dtype not in ("auto", "bfloat16", "float32"):
            raise TrainError(f"dtype {self.dtype!r}: allowed auto, bfloat16, float32")
        if self.dflash_recipe is not None:
            from .dflash_train import RECIPE, DFlashRecipe

            if self.method != "dflash" or not isinstance(self.dflash_recipe, DFlashRecipe):
                raise TrainError("dflash_recipe: a DFlashRecipe, for method dflash only")
            if self.dflash_recipe == RECIPE:
                object.__setattr__(self, "dflash_recipe", None)  # the shipped one: the default drafter

    def recipe(self) -> DFlashRecipe:
        """dflash: the recipe trained (RECIPE read when asked, so the key and the training always agree)."""
        from .dflash_train import RECIPE

        return self.dflash_recipe or RECIPE

    def backbone(self) -> "TrainSettings":
        """xpress: the settings of the DFlash drafter whose frozen backbone the head refines (the default DFlash
        drafter of the same data)."""
        return TrainSettings(method="dflash", target=self.target, seed=self.seed, num_prompts=self.num_prompts,
                             max_tokens=self.max_tokens, steps=self.backbone_steps, block_size=self.block_size,
                             bf16_autocast=self.bf16_autocast, dtype=self.dtype, budget_minutes=self.budget_minutes)

    def resolved_dtype(self) -> DtypeChoice:
        """`auto` resolved for this machine's CPU (engines/dtype.py): the data's dtype is part of its identity."""
        return resolve_dtype(self.dtype, on_gpu=False, flags=cpu_flags(), cap=isa_cap())

    @property
    def autocast(self) -> bool:
        return self.bf16_autocast and self.resolved_dtype().dtype == "bfloat16"

    def data_key(self) -> str:
        """Identity of the training data (prompts, responses, features): shared by every method. Includes a
        hash of the prompts themselves, so a change to the templates makes new data."""
        from .prompts import prompts_digest

        d = {"target": self.target, "seed": self.seed, "num_prompts": self.num_prompts, "max_tokens": self.max_tokens,
             "prompts": prompts_digest(self.num_prompts, self.seed)}
        dtype = self.resolved_dtype().dtype
        if dtype != "bfloat16":  # bf16 data keeps the key it had before dtypes were chosen per CPU
            d["dtype"] = dtype
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]

    def key(self) -> str:
        d = asdict(self)
        d.pop("max_minutes")
        d.pop("budget_minutes")
        d.pop("dtype")  # in the data key, as resolved
        d.pop("dflash_recipe")  # in d["recipe"] below
        d.pop("backbone_steps")  # in d["backbone"] (xpress)
        d["bf16_autocast"] = self.autocast
        d["data"] = self.data_key()
        if self.method == "eagle3":
            d.pop("block_size")
        elif self.method == "xpress":
            for name in ("ttt_steps", "soft_labels", "draft_vocab_size"):
                d.pop(name)
            from .xpress_train import RECIPE as XPRESS_RECIPE

            d["recipe"] = XPRESS_RECIPE.describe()
            d["backbone"] = self.backbone().key()  # a retrained DFlash drafter is a new backbone: a new head
        else:
            d.pop("ttt_steps")
            d.pop("soft_labels")
            d.pop("draft_vocab_size")
            d["recipe"] = self.recipe().describe()  # a new recipe is a new drafter, never a cached old one
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


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
        manifest = json.loads((out / "manifest.json").read_text())
        made = manifest.get("budget") or {}
        if not (made.get("limited") and more_time(s.budget_minutes, made.get("minutes"))):
            _index_if_default(s, out)
            return out, manifest
        progress("budget", 1, 1, f"budget: the cached drafter was cut by a {made.get('minutes'):g}-minute budget "
                 f"({_cuts_text(made.get('stages', {}))}); this run has more time: more data, trained again")
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
    stages: list[Stage] = []

    # 1. prompts
    from .prompts import training_prompts

    prompts = training_prompts(s.num_prompts, s.seed)
    if len(prompts) < s.num_prompts:
        raise TrainError(f"--prompts {s.num_prompts}: the templates give only {len(prompts)} distinct prompts")
    (data_dir / "prompts.json").write_text(json.dumps(prompts))

    dtype = s.resolved_dtype()
    progress("dtype", 1, 1, f"{dtype.dtype} ({dtype.reason})")
    # 2. responses (vLLM in a child process); a prefix of the prompts when a budget cut them
    from .generate import read_responses

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
                                     dtype.dtype, budget.seconds_left("responses"))
        examples = read_responses(responses)
        _write_cut(responses, s.budget_minutes if len(examples) < len(prompts) else None)
    budget.cut("responses", len(examples), len(prompts))
    st.seconds = time.perf_counter() - t0
    st.detail["tokens"] = sum(len(e["response_ids"]) for e in examples)
    stages.append(st)
    if len(examples) < len(prompts):
        progress("responses", len(examples), len(prompts), f"budget: {len(examples)} of {len(prompts)} prompts, "
                 f"{st.detail['tokens']} response tokens")
    else:
        progress("responses", len(examples), len(prompts), f"{st.detail['tokens']} response tokens")
    data_hash = hashlib.sha256(responses.read_bytes()).hexdigest()[:16]

    # 3. features
    import torch

    from .features import compute_features, target_tensors

    layers = _feature_layers(target_cfg)
    feat_file = data_dir / "features.pt"
    data = torch.load(feat_file, weights_only=False) if feat_file.is_file() else None
    have = len(data["tokens"]) if data else 0
    cut_before = _read_cut(feat_file)
    more = have < len(examples) and (cut_before is None or more_time(s.budget_minutes, cut_before))
    st = Stage("features", cached=not more)
    t0 = time.perf_counter()
    if more:
        data = compute_features(model_path, examples, layers, feat_file, dtype=dtype.dtype,
                                progress=lambda i, n: progress("features", i, n, ""),
                                seconds=budget.seconds_left("features"), existing=data)
        _write_cut(feat_file, s.budget_minutes if len(data["tokens"]) < len(examples) else None)
        if len(data["tokens"]) < len(examples):
            progress("features", len(data["tokens"]), len(examples),
                     f"budget: {len(data['tokens'])} of {len(examples)} examples")
    budget.cut("features", len(data["tokens"]), len(examples))
    st.seconds = time.perf_counter() - t0
    stages.append(st)
    tensors = target_tensors(model_path)

    # 4. training
    st = Stage("training")
    t0 = time.perf_counter()
    if s.method == "xpress":  # the head over the DFlash drafter of the same data (trained first when missing)
        from .xpress_train import train_xpress

        backbone, _ = train_drafter(s.backbone(), progress)
        t0 = time.perf_counter()
        cfg, weights, result = train_xpress(s, target_cfg, data, tensors, work, progress, backbone,
                                            seconds=budget.seconds_left("training"))
    else:
        if s.method == "eagle3":
            from .eagle3_train import train_eagle3 as trainer
        else:
            from .dflash_train import train_dflash as trainer
        cfg, weights, result = trainer(s, target_cfg, data, tensors, work, progress,
                                       seconds=budget.seconds_left("training"))
    budget.cut("training", result["planned_steps"], s.steps)
    st.seconds = time.perf_counter() - t0
    st.detail = result
    stages.append(st)

    # 5. export (atomic: a crash or a full disk leaves no half-written folder)
    manifest = {
        "method": s.method, "target": s.target, "target_path": model_path, "settings": asdict(s),
        "data_hash": data_hash, "prompts": len(data["tokens"]), "response_tokens": stages[0].detail["tokens"],
        "budget": budget.record(),
        "feature_layers": layers, "steps_done": result["steps_done"], "final_losses": result["final_losses"],
        "final_accuracy": result["final_accuracy"], "stopped_early": result["stopped_early"],
        "stages": [asdict(x) for x in stages], "total_seconds": time.perf_counter() - t_all,
        "torch_version": torch.__version__,
        "data_dtype": dtype.dtype, "data_dtype_reason": dtype.reason, "bf16_autocast": s.autocast,
    }
    _write_with_manifest(s.method, out, cfg, weights, manifest)
    _index_if_default(s, out)
    return out, manifest


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


def generation_env(base: dict, cpus: list[int]) -> dict:
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
            err: list[str] = []
            reader = threading.Thread(target=lambda: err.extend(child.stderr), daemon=True)  # no pipe deadlock
            reader.start()
            log = []
            for line in child.stdout:
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
