"""Reading drafter and target checkpoint configs (local folders or the Hugging Face cache, never the network)
and what the installed vLLM supports — so a bad configuration is refused before any engine starts."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import MethodError


def _cached_hub_file(repo_id: str, filename: str) -> str | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo_id, filename)
    except Exception:
        return None
    return found if isinstance(found, str) else None


def read_model_config(model: str, param: str = "model") -> dict[str, Any] | None:
    """config.json of a local folder or a hub id in the local HF cache; None when only the hub has it.
    `trained:<method>` names a drafter made by `specsweep drafters train`."""
    from ..drafters.trained import is_trained_alias, resolve_trained

    if is_trained_alias(model):
        try:
            model = str(resolve_trained(model))
        except FileNotFoundError as e:
            raise MethodError(param, str(e)) from None
    p = Path(model).expanduser()
    if p.is_dir():
        cfg = p / "config.json"
        if not cfg.is_file():
            raise MethodError(param, f"folder {p} has no config.json (not a checkpoint folder)")
        try:
            return json.loads(cfg.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise MethodError(param, f"cannot read {cfg}: {e}") from None
    if model.startswith((".", "/", "~")) or p.exists():
        raise MethodError(param, f"path does not exist: {model}")
    cached = _cached_hub_file(model, "config.json")
    if cached:
        return json.loads(Path(cached).read_text(encoding="utf-8"))
    return None


def nested(cfg: dict[str, Any], section: str, key: str, default: Any = None) -> Any:
    """cfg[section][key], else cfg[key] (DFlash keeps keys in dflash_config or at the top level)."""
    sub = cfg.get(section) or {}
    if isinstance(sub, dict) and key in sub:
        return sub[key]
    return cfg.get(key, default)


def vllm_speculative_methods() -> set[str] | None:
    """Speculative methods the installed vLLM knows, read from its source without importing it (importing
    vLLM takes seconds). None when vLLM is not installed in this environment."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    src = Path(list(spec.submodule_search_locations)[0]) / "config" / "speculative.py"
    try:
        text = src.read_text(encoding="utf-8")
    except OSError:
        return None
    known = {"ngram", "draft_model", "eagle", "eagle3", "dflash", "dspark", "xpress", "medusa", "suffix", "mtp"}
    return {m for m in known if f'"{m}"' in text}


@dataclass
class CheckContext:
    """What a method may check its points against."""

    backend: str
    target_config: dict[str, Any] | None  # None: target not local, cross-checks skipped
    vllm_methods: set[str] | None  # None: vLLM not installed here, capability not checked
    notes: list[str] = field(default_factory=list)  # checks that could not run, said aloud

    def require_vllm_method(self, method: str, how_to_get: str) -> None:
        if self.backend != "vllm":
            return
        if self.vllm_methods is None:
            self.notes.append(f"vLLM is not installed where the controller runs: method {method!r} not checked")
            return
        if method not in self.vllm_methods:
            raise MethodError("", f"the installed vLLM has no speculative method {method!r}; {how_to_get}")


def check_drafter_matches_target(ctx: CheckContext, drafter: dict[str, Any], layer_ids: list[int] | None,
                                 layer_key: str) -> None:
    """Hidden size, vocabulary and feature-layer indices of a drafter against its target."""
    t = ctx.target_config
    if t is None:
        return
    t_cfg = t.get("text_config", t)
    t_hidden, t_vocab, t_layers = t_cfg.get("hidden_size"), t_cfg.get("vocab_size"), t_cfg.get("num_hidden_layers")
    d_hidden = drafter.get("target_hidden_size") or drafter.get("hidden_size")
    if t_hidden and d_hidden and d_hidden != t_hidden:
        raise MethodError("model", f"drafter hidden size {d_hidden} does not match the target's {t_hidden}: "
                                   f"this drafter was trained for another model")
    d_vocab = drafter.get("vocab_size")
    if t_vocab and d_vocab and d_vocab != t_vocab:
        raise MethodError("model", f"drafter vocabulary size {d_vocab} does not match the target's {t_vocab}: "
                                   f"this drafter was trained for another model")
    if layer_ids and t_layers:
        bad = [i for i in layer_ids if not (0 <= int(i) < t_layers)]
        if bad:
            raise MethodError("model", f"drafter {layer_key} {layer_ids} reference layers {bad} outside the "
                                       f"target's 0..{t_layers - 1}")
