"""specsweep's vLLM plugin: serves xPress drafters on a stock vLLM, with no fork and no patch.

vLLM loads every function of the `vllm.general_plugins` entry-point group in each of its processes (the front
process, its model-inspection subprocess, the engine core, every worker; inside a specsweep Ray actor too).
specsweep's distribution declares one, named `specsweep` (pyproject.toml), pointing at `register` below. It only
*registers* architecture names with vLLM's model registry, lazily (the class module is imported by vLLM when a
drafter of that architecture loads, in the worker). It never raises: vLLM calls a plugin function unguarded in
the front process, so an exception here would stop every engine of the environment, baselines included.

What it registers: the xPress project's published architecture `Qwen3XPressModel` and `DFlashQwen3XPressModel`,
the name vLLM's DFlash config handling rewrites it to when the drafter is served with `method: dflash` (which is
how specsweep serves it: vLLM's DFlash proposer drafts, the plugin's subclass of vLLM's DFlash model refines the
logits it drafts from; `xpress_model.py`). A name the installed vLLM already registers natively is left alone:
the native path serves it, and the method check records which path served each row.

`VLLM_PLUGINS` (a comma-separated allow-list of plugin names, vLLM's own variable) must include `specsweep`
where it is set, or vLLM does not load this plugin and cannot load an xPress drafter; `plugin_problem()` says so
before an engine starts.
"""

from __future__ import annotations

import logging
import os

PLUGIN_NAME = "specsweep"
ENTRY_POINT_GROUP = "vllm.general_plugins"
ENTRY_POINT_VALUE = "orchestrator.vllm_plugin:register"
MODEL_CLASS = "orchestrator.vllm_plugin.xpress_model:XPressDFlashForCausalLM"

logger = logging.getLogger(__name__)


def architectures() -> tuple[str, ...]:
    from ..drafters.layout import XPRESS_ARCHS

    return XPRESS_ARCHS


def register() -> None:
    """The entry point vLLM calls in each of its processes. Never raises."""
    try:
        from vllm import ModelRegistry

        known = set(ModelRegistry.get_supported_archs())
        for arch in architectures():
            if arch not in known:  # a native (or earlier registered) architecture is left alone
                ModelRegistry.register_model(arch, MODEL_CLASS)
    except Exception as e:  # noqa: BLE001 - a plugin must never stop vLLM's engines
        logger.warning("specsweep vLLM plugin: xPress architectures not registered (%s: %s); xPress drafters "
                       "will not load, every other model is unaffected", type(e).__name__, e)


def plugin_problem(environ: dict[str, str] | None = None) -> str | None:
    """Why vLLM would not load this plugin in this Python environment (None: it will): the entry point is not
    installed (specsweep installed without its metadata, e.g. only on the controller's node) or `VLLM_PLUGINS`
    leaves it out."""
    from importlib.metadata import entry_points

    env = os.environ if environ is None else environ
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == PLUGIN_NAME]
    if not found:
        return (f"specsweep's vLLM plugin is not installed in this Python environment (no `{PLUGIN_NAME}` entry "
                f"point in group {ENTRY_POINT_GROUP}): install specsweep here (`pip install specsweep` or "
                f"`pip install -e .` in a checkout) so vLLM can load xPress drafters")
    if found[0].value != ENTRY_POINT_VALUE:
        return (f"the `{PLUGIN_NAME}` entry point of group {ENTRY_POINT_GROUP} points at {found[0].value!r}, not "
                f"{ENTRY_POINT_VALUE!r}: another distribution took the name, or an old specsweep is installed")
    allowed = env.get("VLLM_PLUGINS")
    if allowed is not None and PLUGIN_NAME not in [p.strip() for p in allowed.split(",")]:
        return (f"VLLM_PLUGINS={allowed!r} leaves out `{PLUGIN_NAME}`, so vLLM will not load specsweep's plugin and "
                f"cannot load an xPress drafter: add `{PLUGIN_NAME}` to VLLM_PLUGINS or unset it")
    return None


def native_architectures() -> set[str]:
    """The xPress architecture names the installed vLLM registers itself (read from its source without
    importing vLLM; empty when vLLM is not installed here)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return set()
    src = Path(list(spec.submodule_search_locations)[0]) / "model_executor" / "models" / "registry.py"
    try:
        text = src.read_text(encoding="utf-8")
    except OSError:
        return set()
    return {a for a in architectures() if f'"{a}"' in text}
