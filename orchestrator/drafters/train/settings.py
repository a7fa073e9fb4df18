"""What a drafter training run is asked for (TrainSettings) and its defaults, torch-free: the CLI reads its option
defaults from here, and the cache keys are computed here."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ...datasets.prompts import DEFAULT_NUM_PROMPTS, DEFAULT_SEED
from ...engines.dtype import DtypeChoice, resolve_dtype
from ...environment import cpu_flags, isa_cap
from .budget import DEFAULT_BUDGET_MINUTES

if TYPE_CHECKING:  # dflash_train imports torch: only the training path loads it
    from .dflash_train import DFlashRecipe

# Training steps (batches of 8) when --steps is not given. EAGLE-3: data + 400 steps took 13-17 min on two
# 2-core AMD EPYCs. DFlash reuses the data (training only): 640 steps of ~0.75 s, because its smoke AL rose
# from 1.47 at 400 steps to 1.51 at 640 (benchmarks/dflash_ablation.py); `make demo-drafters` from an empty
# cache then took 31.9 min on the slower of the two machines (docs/src/results/drafter-demo.md, "First time, from nothing").
# xPress trains only its refiner head over the cached DFlash drafter (backbone frozen): steps of 8 responses x 24
# blocks at K = 3 and 7 each (drafters/train/xpress_train.py).
DEFAULT_STEPS = {"eagle3": 400, "dflash": 640, "xpress": 500}
# Peak learning rates (AdamW, warm-up then cosine): DFlash's context path trains faster at 3e-3
# (benchmarks/dflash_ablation.py); EAGLE-3 keeps the rate its figures were measured with.
# xPress: 3e-3 over 1e-3 lifted the head's held-out accepted length at 2 passes from 1.050x to 1.082x the bare
# drafter's at 250 steps (docs/src/results/2026-12-07-xpress-demo.md, "The learning rate").
DEFAULT_LR = {"eagle3": 1e-3, "dflash": 3e-3, "xpress": 3e-3}


class TrainError(RuntimeError):
    """Bad input or a failed stage; the message says what and where."""


@dataclass(frozen=True)
class TrainSettings:
    method: str = "eagle3"
    target: str = "smollm2-135m-instruct"
    seed: int = DEFAULT_SEED
    num_prompts: int = DEFAULT_NUM_PROMPTS  # variety beats steps: 1000 prompts x 400 steps generalise better than 480 x 400
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
        from ...datasets.prompts import prompts_digest

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
