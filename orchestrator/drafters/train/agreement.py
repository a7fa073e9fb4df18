"""Does vLLM's DFlash (or xPress) drafter compute what our trainer computed? Child process:

    python -m orchestrator.drafters.train.agreement TARGET DRAFTER OUT.json [--k 3] [--max-tokens 32] [--prompts N]
                                             [--dtype float32]

Runs the target with the drafter in vLLM (T = 0, one request at a time) with the DraftProbe worker extension,
records every drafting pass (query tokens, positions, the drafted slots' logits), then recomputes each pass
with `dflash_model.DFlashDrafter` loaded from the same folder, on the target's features from transformers for
the same tokens. Writes {"calls", "max_abs_diff", "max_rel_diff", "argmax_agree", "vllm_slot_accuracy",
"trainer_slot_accuracy", ...} to OUT.json. Both accuracies are teacher-forced on the answers vLLM produced:
slot j of a pass counts as right when it equals the answer's token at its position.

An xPress drafter (the published architecture, served through specsweep's vLLM plugin as method dflash): vLLM's
recorded logits are the refined ones its `compute_logits` returned; they are compared with the trainer's head
(`xpress_head.refine`, the drafter's own `xpress_num_passes`) over the backbone's states of the same block, and
"base_argmax_agree" says how often the refinement left vLLM's drafts where the bare backbone had them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

PROMPTS = [
    "Explain what a hash table is in two sentences.",
    "Write a Python function that reverses a string.",
    "List three uses of copper.",
    "What is 17 times 23? Show the steps.",
    "Rewrite this sentence in the passive voice: The cat chased the mouse.",
    "Give two tips for writing clear emails.",
]


def _call(rec):
    """A DraftCall as it arrives over vLLM's RPC (which turns dataclasses into dicts)."""
    from .probe import DraftCall

    return DraftCall(**rec) if isinstance(rec, dict) else rec


def _features(model_path: str, seqs: list[list[int]], layers: list[int]):
    import torch
    from transformers import AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    target.eval()
    out = []
    with torch.inference_mode():
        for ids in seqs:
            hs = target.get_decoder()(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
            out.append(torch.cat([hs[layer][0] for layer in layers], -1))
    return out, target.get_input_embeddings().weight.detach().clone(), target.model.norm.weight.detach().clone()


def _run_vllm(args: argparse.Namespace) -> tuple[list[list[int]], list[list]]:
    """Each prompt's final token sequence, and the drafting calls the probe recorded while vLLM answered it."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB: vLLM's CPU default reserves most of the RAM
    from vllm import LLM, SamplingParams

    llm = LLM(model=args.target, dtype=args.dtype, max_model_len=1024, enforce_eager=True, seed=0, max_num_seqs=1,
              enable_prefix_caching=False,
              speculative_config={"method": "dflash", "model": args.drafter, "num_speculative_tokens": args.k},
              worker_extension_cls="orchestrator.drafters.train.probe.DraftProbe")
    llm.collective_rpc("probe_install")
    tok = llm.get_tokenizer()
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    seqs, calls = [], []
    for prompt in PROMPTS[: args.prompts]:
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                       add_generation_prompt=True)
        (o,) = llm.generate([text], params, use_tqdm=False)
        seqs.append(list(o.prompt_token_ids) + list(o.outputs[0].token_ids))
        calls.append([_call(r) for r in llm.collective_rpc("probe_records")[0]])
        llm.collective_rpc("probe_clear")
    del llm
    return seqs, calls


@dataclass
class _Tally:
    """What the comparison counts over every matched drafting call."""

    k: int
    calls: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    agree: int = 0
    base_agree: int = 0
    total: int = 0
    hits: dict[str, list[int]] = field(default_factory=dict)
    labelled: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.hits = {"vllm": [0] * self.k, "trainer": [0] * self.k}
        self.labelled = [0] * self.k


def _compare(args: argparse.Namespace, seqs: list[list[int]], calls: list[list]) -> tuple[_Tally, object]:
    """The trainer's logits (refined by the xPress head where the drafter has one) against vLLM's, per call."""
    import torch

    from ..layout import XPRESS_ARCHS
    from ..xpress_head import refine
    from .dflash_model import load_dflash

    drafter_cfg = json.loads((Path(args.drafter) / "config.json").read_text())
    layers = [i + 1 for i in drafter_cfg["dflash_config"]["target_layer_ids"]]  # vLLM adds 1
    feats, embed, final_norm = _features(args.target, seqs, layers)
    head = None
    if set(drafter_cfg.get("architectures") or []) & set(XPRESS_ARCHS):
        from .xpress_train import load_xpress, target_to_head

        model, head = load_xpress(args.drafter, embed, final_norm)
        t2h = target_to_head(model, head.cfg.head_vocab)
    else:
        model = load_dflash(args.drafter, embed, final_norm)
    K = args.k
    t = _Tally(K)
    with torch.no_grad():
        for seq, recs, f in zip(seqs, calls, feats):
            x = torch.tensor(seq)
            for rec in recs:
                p = rec.positions[0]
                if len(rec.input_ids) != K + 1 or p >= len(seq) or rec.input_ids[0] != seq[p]:
                    continue  # not one request's block on the final sequence (e.g. a warm-up pass)
                states = model(x[None], f[None], torch.tensor([[p]]), block_size=K + 1)
                mine = model.logits(states[0, 0, 1:]).float()
                base_pick = mine.argmax(-1)
                if head is not None:
                    mine = refine(head, states[0, :, :].float(), mine[None], t2h[x[p]].reshape(1),
                                  head.cfg.num_passes)[0]
                logits = rec.logits()
                theirs = logits[:, : mine.shape[-1]] if model.draft_ids is None else logits[:, model.draft_ids]
                diff = (mine - theirs).abs().max().item()
                t.max_abs = max(t.max_abs, diff)
                t.max_rel = max(t.max_rel, diff / max(theirs.abs().max().item(), 1e-6))
                a, b = mine.argmax(-1), theirs.argmax(-1)
                t.agree += int((a == b).sum())
                t.base_agree += int((base_pick == b).sum())
                t.total += K
                t.calls += 1
                for j in range(K):
                    if p + 1 + j < len(seq):
                        t.labelled[j] += 1
                        want = seq[p + 1 + j]
                        t.hits["trainer"][j] += int(model.to_target_ids(a[j]) == want)
                        t.hits["vllm"][j] += int(model.to_target_ids(b[j]) == want)
    return t, head


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("drafter")
    ap.add_argument("out")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS))
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args(argv)

    seqs, calls = _run_vllm(args)
    t, head = _compare(args, seqs, calls)
    result = {"calls": t.calls, "max_abs_diff": t.max_abs, "max_rel_diff": t.max_rel,
              "argmax_agree": t.agree / max(t.total, 1),
              "vllm_slot_accuracy": [h / max(n, 1) for h, n in zip(t.hits["vllm"], t.labelled)],
              "trainer_slot_accuracy": [h / max(n, 1) for h, n in zip(t.hits["trainer"], t.labelled)],
              "k": args.k, "dtype": args.dtype, "tokens": sum(len(s) for s in seqs),
              "xpress_passes": None if head is None else head.cfg.num_passes,  # type: ignore[attr-defined]
              "base_argmax_agree": t.base_agree / max(t.total, 1)}
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    if not t.calls:
        print(f"no drafting pass of {args.drafter} could be matched to its answer: nothing was compared "
              f"(is it a DFlash drafter with block size >= K + 1 = {args.k + 1}?)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
