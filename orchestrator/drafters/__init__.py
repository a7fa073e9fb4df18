"""Drafter checkpoints in the exact formats vLLM loads (EAGLE-3 today): writing the folder layout, from given
or random weights. Random-weight drafters exercise the real plumbing (acceptance ~0); trained ones predict."""

from .layout import eagle3_config, write_eagle3_drafter

__all__ = ["eagle3_config", "write_eagle3_drafter"]
