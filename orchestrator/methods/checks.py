"""Run every method's checks (drafter files, installed vLLM) over a loaded spec, before any engine starts."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..errors import SpecError, SpecIssue
from .base import MethodError
from .drafter import CheckContext, read_model_config, vllm_speculative_methods
from .registry import get_method

if TYPE_CHECKING:
    from ..spec import LoadedSpec


def check_methods(loaded: "LoadedSpec", target_path: str | None) -> list[str]:
    """Raise SpecError listing every refused method point (file, line, field, why); return notes on checks
    that could not run (e.g. a drafter that is only on the hub)."""
    backend = loaded.spec.engine.backend
    target_cfg = None
    issues: list[SpecIssue] = []
    if target_path is not None:
        try:
            target_cfg = read_model_config(target_path)
        except MethodError as e:
            issues.append(loaded.issue(("target", "model"), str(e)))
    ctx = CheckContext(backend=backend, target_config=target_cfg,
                       vllm_methods=vllm_speculative_methods() if backend == "vllm" else None)
    if target_cfg is None and target_path is not None and not issues:
        ctx.notes.append(f"target {target_path} is not local: drafters are not cross-checked against it")
    seen: set[tuple] = set()
    checked = []
    for point in loaded.method_points:
        try:
            facts = get_method(point.method).check(point, ctx) or {}
            checked.append(dataclasses.replace(point, facts=dict(facts), checked=True))
        except MethodError as e:
            loc = ("methods", point.label) + ((e.param,) if e.param else ())
            key = (loc, str(e))
            if key not in seen:
                seen.add(key)
                issues.append(loaded.issue(loc, f"method {point.method!r}: {e}"))
    if issues:
        raise SpecError(issues)
    loaded.method_points[:] = checked  # the checked copies (facts recorded); planning requires them
    return sorted(set(ctx.notes))
