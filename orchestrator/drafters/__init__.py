"""Drafter checkpoints in the exact formats vLLM loads (EAGLE-3, DFlash): writing the folder layout, from given
or random weights. Random-weight drafters exercise the real plumbing (acceptance ~0); trained ones predict."""

from .layout import dflash_config, eagle3_config, write_dflash_drafter, write_eagle3_drafter

__all__ = ["dflash_config", "eagle3_config", "write_dflash_drafter", "write_eagle3_drafter"]
