"""The xPress drafter as vLLM serves it through specsweep's plugin: vLLM's own DFlash draft model (the backbone
drafts as it always does) plus the refiner head (`drafters/xpress_head.py`) applied where vLLM turns the
drafter's states into draft tokens, `compute_logits`. Imported by vLLM's model registry in the worker, only when
a drafter of a registered architecture loads (`orchestrator/vllm_plugin/__init__.py`).

What `compute_logits` is not given, `forward` keeps: the anchor rows (slot 0 of each request's block: its
normed state h_0 and its token id), found at `query_start_loc` of the forward context's attention metadata.
`compute_logits` then gets the K drafted rows of each request, consecutive, in the same request order; the
head sees blocks of S = K + 1 slots, as in training.

Loading checks what this relies on (`contract.py`) and refuses with the reason and vLLM's version.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from vllm.model_executor.models.qwen3_dflash import DFlashQwen3ForCausalLM

from ..drafters.xpress_head import HeadConfig, XPressCheckpointError, XPressHead, refine, split_weights
from .contract import class_problems, refusal, serving_problems


class XPressServingError(RuntimeError):
    pass


class XPressDFlashForCausalLM(DFlashQwen3ForCausalLM):
    # served by specsweep's plugin (not a vLLM-native class): recorded by the method check with every row
    specsweep_xpress = True

    def __init__(self, *, vllm_config, prefix: str = ""):
        problems = class_problems() + serving_problems(vllm_config.speculative_config,
                                                       bool(getattr(vllm_config, "use_v2_model_runner", False)))
        if problems:
            raise XPressServingError(refusal(problems))
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        try:
            self.xpress_cfg = HeadConfig.from_config(self.config.to_dict(), "the xPress drafter's config.json")
        except XPressCheckpointError as e:
            raise XPressServingError(str(e)) from None
        self.xpress_head = XPressHead(self.xpress_cfg)
        self.xpress_passes = self.xpress_cfg.num_passes
        # a step that drafts nothing (K = 0 in a dynamic-K schedule) skips the decoder: its query K/V is rewritten by
        # the next drafting step, the context K/V (written before forward) is kept. Opt-in (not stock vLLM).
        self.k0_skip = bool(getattr(self.config, "specsweep_k0_skip", False))
        self._anchor_states: torch.Tensor | None = None
        self._anchor_ids: torch.Tensor | None = None
        self._target_to_head: torch.Tensor | None = None  # target id -> head vocabulary id (-1: outside)
        self._head_to_target: torch.Tensor | None = None

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]):
        try:
            head, rest = split_weights(weights, self.xpress_cfg, "the xPress drafter's weights")
        except XPressCheckpointError as e:
            raise XPressServingError(str(e)) from None
        with torch.no_grad():
            for name, p in self.xpress_head.named_parameters():
                p.copy_(head[name].to(dtype=p.dtype, device=p.device))
        return super().load_weights(rest)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        starts = self._query_starts()
        if self.k0_skip and starts is not None and starts.numel() == input_ids.shape[0]:
            # one query row per request: K = 0, nothing will be drafted from this forward
            self._anchor_states = self._anchor_ids = None
            return torch.zeros(input_ids.shape[0], self.config.hidden_size, dtype=self.lm_head.weight.dtype,
                               device=input_ids.device)
        out = super().forward(input_ids, positions, inputs_embeds)
        if starts is None:  # a profiling / dummy pass: nothing is drafted from it
            self._anchor_states = self._anchor_ids = None
        else:
            self._anchor_states = out[starts]
            self._anchor_ids = input_ids[starts]
        return out

    @staticmethod
    def _query_starts() -> torch.Tensor | None:
        from vllm.forward_context import get_forward_context, is_forward_context_available

        if not is_forward_context_available():
            return None
        meta = get_forward_context().attn_metadata
        if isinstance(meta, list):
            meta = meta[0] if meta else None
        if not meta:
            return None
        first = next(iter(meta.values())) if isinstance(meta, dict) else meta
        qsl = getattr(first, "query_start_loc", None)
        return None if qsl is None else qsl[:-1].long()

    def _vocab_maps(self, device) -> None:
        if self._head_to_target is not None:
            return
        vocab = self.config.vocab_size
        if self.xpress_cfg.head_vocab == "draft":
            if self.draft_id_to_target_id is None:
                raise XPressServingError("xpress_head_vocab is 'draft' but the drafter has no d2t (reduced draft "
                                         "vocabulary)")
            ids = torch.arange(self.xpress_cfg.vocab, device=device) + self.draft_id_to_target_id.to(device)
        else:
            ids = torch.arange(vocab, device=device)
        t2h = torch.full((vocab,), -1, dtype=torch.long, device=device)
        t2h[ids] = torch.arange(len(ids), device=device)
        self._head_to_target, self._target_to_head = ids, t2h

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        logits = super().compute_logits(hidden_states)
        if logits is None or self.xpress_passes <= 0 or self._anchor_states is None or hidden_states.shape[0] == 0:
            return logits
        n = self._anchor_states.shape[0]
        rows = hidden_states.shape[0]
        if rows % n:
            raise XPressServingError(f"compute_logits got {rows} rows for {n} requests: not K rows per request, "
                                     f"so the drafted rows cannot be matched to their anchors (vLLM changed)")
        k = rows // n
        if k + 1 > self.xpress_cfg.block_size:
            raise XPressServingError(f"K = {k} needs a block of {k + 1} slots; the head was trained for at most "
                                     f"{self.xpress_cfg.block_size} (xpress_block_size)")
        self._vocab_maps(logits.device)
        assert self._anchor_ids is not None and self._target_to_head is not None  # set above
        states = torch.cat([self._anchor_states.unsqueeze(1), hidden_states.view(n, k, -1)], dim=1)
        states = states.to(self.xpress_head.w2.weight.dtype)
        anchor = self._target_to_head[self._anchor_ids.long()]
        base = logits.float()[:, self._head_to_target].view(n, k, -1)
        refined = refine(self.xpress_head, states, base, anchor, self.xpress_passes).reshape(rows, -1)
        out = torch.full_like(logits, float("-inf"), dtype=torch.float32) if self.xpress_cfg.head_vocab == "draft" \
            else torch.empty_like(logits, dtype=torch.float32)
        out[:, self._head_to_target] = refined
        return out
