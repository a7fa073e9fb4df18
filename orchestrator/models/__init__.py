"""Model identities: builtin aliases (the offline demo model) and resolution of spec model strings."""

from .demo import DEMO_ALIASES, ModelError, ensure_demo_model, resolve_model

__all__ = ["DEMO_ALIASES", "ModelError", "ensure_demo_model", "resolve_model"]
