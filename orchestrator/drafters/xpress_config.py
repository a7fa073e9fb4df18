"""An xPress checkpoint's head settings and tensor names, without torch: read by the `xpress` method's check in
the controller (before any engine starts) and by the head (`xpress_head.py`) where vLLM or the trainer loads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PREFIX = "xpress_head."
# name -> shape as a function of (V, H, r, m, B)
TENSORS = {
    "w1.weight": lambda V, H, r, m, B: (V, r),
    "down_h.weight": lambda V, H, r, m, B: (r, H),
    "down_g.weight": lambda V, H, r, m, B: (r, H),
    "in_proj.weight": lambda V, H, r, m, B: (r, 3 * r),
    "mix.L": lambda V, H, r, m, B: (r, B, B),
    "mlp.gate_proj.weight": lambda V, H, r, m, B: (m, r),
    "mlp.up_proj.weight": lambda V, H, r, m, B: (m, r),
    "mlp.down_proj.weight": lambda V, H, r, m, B: (r, m),
    "w2.weight": lambda V, H, r, m, B: (V, r),
}
# config.json keys of the published layout this implementation honours or refuses
DEFAULT_PASSES = 6  # the xPress project's default when config.json has none


class XPressCheckpointError(ValueError):
    """An xPress checkpoint this implementation cannot serve; the message names the file, key or tensor."""


@dataclass(frozen=True)
class HeadConfig:
    """The head's shape and serving settings, read from a drafter's config.json."""

    hidden: int
    vocab: int  # rows of w1 / w2
    rank: int
    mlp_hidden: int
    block_size: int  # the mixer's B: the longest block the head serves (K <= B - 1)
    num_passes: int
    head_vocab: str  # "target" (published layout) or "draft" (the drafter's d2t vocabulary)

    @classmethod
    def from_config(cls, cfg: dict[str, Any], where: str = "config.json") -> "HeadConfig":
        def need(key: str) -> int:
            v = cfg.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise XPressCheckpointError(f"{where}: {key} must be a positive integer (got {v!r}): "
                                            f"not an xPress drafter config")
            return v

        if cfg.get("sample_from_anchor") or (cfg.get("dflash_config") or {}).get("sample_from_anchor"):
            raise XPressCheckpointError(f"{where}: sample_from_anchor is true; xPress drafts with it false")
        if cfg.get("xpress_topc", 0) not in (0, None):
            raise XPressCheckpointError(f"{where}: xpress_topc={cfg['xpress_topc']} (a top-c approximation of the "
                                        f"readout) is not supported: only the exact head (xpress_topc 0)")
        head_vocab = cfg.get("xpress_head_vocab", "target")
        if head_vocab not in ("target", "draft"):
            raise XPressCheckpointError(f"{where}: xpress_head_vocab={head_vocab!r}; allowed 'target', 'draft'")
        if head_vocab == "draft":
            vocab = need("draft_vocab_size")
        else:
            vocab = need("vocab_size")
        rank = need("xpress_rank")
        passes = cfg.get("xpress_num_passes", DEFAULT_PASSES)
        if not isinstance(passes, int) or isinstance(passes, bool) or not 0 <= passes <= 64:
            raise XPressCheckpointError(f"{where}: xpress_num_passes must be an integer in [0, 64] (got {passes!r})")
        return cls(hidden=need("hidden_size"), vocab=vocab, rank=rank,
                   mlp_hidden=cfg.get("xpress_mlp_hidden") or 2 * rank,
                   block_size=need("xpress_block_size"), num_passes=passes, head_vocab=head_vocab)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every head tensor's name (with the `xpress_head.` prefix) and shape."""
        dims = (self.vocab, self.hidden, self.rank, self.mlp_hidden, self.block_size)
        return {PREFIX + name: tuple(f(*dims)) for name, f in TENSORS.items()}


def split_weights(weights, cfg: HeadConfig, where: str = "the checkpoint") -> tuple[dict, list]:
    """(head tensors by their name under `xpress_head.`, every other (name, tensor) in order). Raises
    XPressCheckpointError naming missing, unknown and mis-shaped head tensors."""
    head: dict[str, Any] = {}
    rest = []
    for name, t in weights:
        if name.startswith(PREFIX):
            head[name] = t
        else:
            rest.append((name, t))
    want = cfg.shapes()
    problems = []
    missing = sorted(set(want) - set(head))
    unknown = sorted(set(head) - set(want))
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if unknown:
        problems.append(f"unknown {', '.join(unknown)} (known: {', '.join(PREFIX + n for n in TENSORS)})")
    for name in sorted(set(want) & set(head)):
        if tuple(head[name].shape) != want[name]:
            problems.append(f"{name} has shape {tuple(head[name].shape)}, config.json implies {want[name]} "
                            f"(xpress_rank={cfg.rank}, xpress_mlp_hidden={cfg.mlp_hidden}, "
                            f"xpress_block_size={cfg.block_size}, head vocabulary {cfg.vocab} ({cfg.head_vocab}))")
    if problems:
        raise XPressCheckpointError(f"{where}: xPress head tensors do not match config.json: " + "; ".join(problems))
    return {name[len(PREFIX):]: t for name, t in head.items()}, rest
