"""The target's hidden states at the drafter's feature layers, on prompt + response, from transformers.

Layer indices follow vLLM's EAGLE-3 convention: feature layer l is the input of decoder layer l, i.e.
transformers' `hidden_states[l]` (index 0 is the embedding output)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

TOPK = 16  # the target's next-token distribution kept per position (soft labels)


def _quiet_transformers() -> None:
    """No per-tensor "Loading weights" bar in the console or a job log: the stage's own progress says enough."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


MIN_EXAMPLES = 8  # a budget never leaves fewer examples than this (one training batch)


def compute_features(model_path: str, examples: list[dict], layers: list[int], out: Path, dtype: str = "bfloat16",
                     progress: Callable[[int, int], None] | None = None, seconds: float | None = None,
                     existing: dict | None = None) -> dict:
    """Save {"features": [(L, len(layers) * hidden)], "tokens": [(L,)], "prompt_lens": [...],
    "topk_ids"/"topk_probs": [(L, TOPK)] the target's most likely next tokens at each position from the last
    prompt token on (zeros before it)} to `out`
    (written to a temporary name, then renamed) and return it. The data covers a prefix of `examples`:
    `existing` (features of the first examples, from an earlier run) is continued, and with `seconds` the
    stage stops before an example that would end after that many seconds (judged from the mean so far)."""
    import torch
    from transformers import AutoModelForCausalLM

    _quiet_transformers()
    torch_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}[dtype]
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype)
    model.eval()
    decoder, lm_head = model.get_decoder(), model.get_output_embeddings()  # any causal LM, not only Llama's names
    old = existing or {}
    feats, tokens, prompt_lens = list(old.get("features", [])), list(old.get("tokens", [])), list(old.get("prompt_lens", []))
    topk_ids, topk_probs = list(old.get("topk_ids", [])), list(old.get("topk_probs", []))
    t0 = time.perf_counter()
    n_tok, first_new = 0, len(tokens)
    with torch.inference_mode():
        for i in range(first_new, len(examples)):
            ex = examples[i]
            elapsed = time.perf_counter() - t0
            if (seconds is not None and i >= MIN_EXAMPLES and i > first_new
                    and elapsed + elapsed / (i - first_new) > seconds):
                break
            ids = torch.tensor([ex["prompt_ids"] + ex["response_ids"]])
            res = decoder(input_ids=ids, output_hidden_states=True)
            hs = res.hidden_states
            feats.append(torch.cat([hs[layer][0] for layer in layers], dim=-1).to(torch.bfloat16))
            # next-token distribution only where it predicts a response token (the only labelled rows): the
            # vocabulary projection over the prompt rows is skipped, and zeros stand there
            first = max(0, len(ex["prompt_ids"]) - 1)
            logits = lm_head(res.last_hidden_state[0, first:]).float()
            values, indices = logits.topk(TOPK, dim=-1)
            probs = (values - torch.logsumexp(logits, -1, keepdim=True)).exp()
            top_ids = torch.zeros(ids.shape[1], TOPK, dtype=torch.int32)
            top_probs = torch.zeros(ids.shape[1], TOPK, dtype=torch.float16)
            top_ids[first:], top_probs[first:] = indices.to(torch.int32), probs.to(torch.float16)
            topk_ids.append(top_ids)
            topk_probs.append(top_probs)
            tokens.append(ids[0])
            prompt_lens.append(len(ex["prompt_ids"]))
            n_tok += ids.shape[1]
            if progress:
                progress(i + 1, len(examples))
    data = {"features": feats, "tokens": tokens, "prompt_lens": prompt_lens, "layers": layers,
            "topk_ids": topk_ids, "topk_probs": topk_probs,
            "seconds": old.get("seconds", 0.0) + time.perf_counter() - t0,
            "tokens_total": old.get("tokens_total", 0) + n_tok}
    tmp = out.with_suffix(".part")
    torch.save(data, tmp)
    tmp.replace(out)
    return data


def target_tensors(model_path: str) -> dict:
    """The target's input embedding and final norm weights (the drafter shares / starts from them)."""
    import torch
    from transformers import AutoModelForCausalLM

    _quiet_transformers()
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    return {"embed": model.get_input_embeddings().weight.detach().clone(),
            "final_norm": model.model.norm.weight.detach().clone()}
