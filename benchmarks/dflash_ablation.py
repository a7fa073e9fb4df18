"""Why the demo DFlash drafter accepts so little, measured: train one recipe change at a time for the same
number of steps on the cached demo training data (`specsweep drafters train` makes it), hold the last
`--eval` responses out, and print each recipe's training accuracy (slots 1 and 2, mean of the last 20 steps)
and its teacher-forced acceptance on the held-out responses at K = 3 and 7 — computed with the block of K + 1
slots vLLM runs (dflash_model.teacher_forced). The variants' AL is the mean over *every* answer position; vLLM
drafts only where its previous step left off, crossing an easy stretch in few steps, so its counters report less
(`--drafter` prints both: on the demo drafter, 1.546 every position / 1.460 along vLLM's walk on smoke;
2026-12-04, 2-core AMD EPYC with AVX512-BF16, no AMX).
It also scores the same drafters on the `smoke` prompts (hand-written, disjoint from the training prompts: what
`benchmarks/demo_drafters.py` measures in vLLM), teacher-forced on the target's greedy answers to them
(made once with transformers and cached beside the training data).

    .venv/bin/python benchmarks/dflash_ablation.py --steps 120 [--only base,value_identity ...] [--json out.json]
        [--eval-sets smoke,demo-heldout]  # also each variant's AL along vLLM's walk on those sets, K = 3 and 7
    .venv/bin/python benchmarks/dflash_ablation.py --drafter FOLDER [--eval-sets smoke,demo-heldout] [--eval-prompts 16]
        [--answers transformers|vllm]
        # score an exported drafter on those sets' greedy answers (made once, cached) at K = 3, 7, 15

Every variant starts from the same seed and draws the same batches. Prints the CPU it ran on.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.drafters.train.dflash_model import teacher_forced  # noqa: E402
from orchestrator.drafters.train.dflash_train import RECIPE, DFlashRecipe, fit  # noqa: E402

OLD = DFlashRecipe(layers=1, kv_heads=None, draft_vocab=None, anchors_per_seq=8, block_lens=(16,),
                   soft_labels=False, loss_decay=7.0)  # what `drafters train` shipped before this work

SHIPPED = RECIPE
# name -> (recipe, peak learning rate). The first block changes one thing of what shipped before (at its
# learning rate, 1e-3); the second removes one thing from what ships now (at its 3e-3).
VARIANTS: dict[str, tuple[DFlashRecipe, float]] = {
    "base": (OLD, 1e-3),
    "ctx_through_p": (replace(OLD, ctx_extra=1), 1e-3),  # a leak (the feature at p): what vLLM cannot give
    "fc_random": (replace(OLD, fc_init="random"), 1e-3),
    "mask_token_emb": (replace(OLD, mask_init="token"), 1e-3),
    "uniform_loss": (replace(OLD, loss_decay=None), 1e-3),
    "soft_labels": (replace(OLD, soft_labels=True), 1e-3),
    "block_len_mix": (replace(OLD, block_lens=(4, 8, 16)), 1e-3),
    "vocab_8k": (replace(OLD, draft_vocab=8192), 1e-3),
    "kv_heads_9": (replace(OLD, kv_heads=9), 1e-3),
    "layers_2": (replace(OLD, layers=2), 1e-3),
    "guide": (replace(OLD, guide=1.0), 1e-3),
    "value_identity": (replace(OLD, value_init="identity"), 1e-3),
    "leak_value_identity": (replace(OLD, value_init="identity", ctx_extra=1), 1e-3),
    "shipped": (SHIPPED, 3e-3),
    "shipped-identity": (replace(SHIPPED, value_init="random", kv_heads=None), 3e-3),
    "shipped-guide": (replace(SHIPPED, guide=0.0), 3e-3),
    "shipped-decay1": (replace(SHIPPED, loss_decay=7.0), 3e-3),
    "shipped-soft": (replace(SHIPPED, soft_labels=False), 3e-3),
    "shipped-mix": (replace(SHIPPED, block_lens=(16,)), 3e-3),
    "shipped-lr3e-3": (SHIPPED, 1e-3),
    "shipped+layers_2": (replace(SHIPPED, layers=2), 3e-3),
    # one change to what shipped after the 400-step drafter (AL 1.36 in vLLM): where does it go from there
    "shipped+slots6": (replace(SHIPPED, loss_max_slot=6), 3e-3),  # same training, no logits past slot 6
    "shipped+freeze_head": (replace(SHIPPED, freeze_lm_head=True), 3e-3),
    "shipped+dropout": (replace(SHIPPED, ctx_dropout=0.1), 3e-3),
    "shipped+layers_2+slots6": (replace(SHIPPED, layers=2, loss_max_slot=6), 3e-3),
    "slots6+decay2": (replace(SHIPPED, loss_max_slot=6, loss_decay=2.0), 3e-3),
    "slots6-guide": (replace(SHIPPED, loss_max_slot=6, guide=0.0), 3e-3),
    "slots6-soft": (replace(SHIPPED, loss_max_slot=6, soft_labels=False), 3e-3),
    "slots6+lr5e-3": (replace(SHIPPED, loss_max_slot=6), 5e-3),
    # acceptance-aware slot weights (slot j weighted by the drafter's chance that slots 1..j-1 are right),
    # on the fastest plateau recipe (slots <= 6, no guidance): instead of the fixed decay, and on top of it
    "s6g0+accept": (replace(SHIPPED, loss_max_slot=6, guide=0.0, accept_weight=True, loss_decay=None), 3e-3),
    "s6g0+accept+decay1": (replace(SHIPPED, loss_max_slot=6, guide=0.0, accept_weight=True), 3e-3),
    # issue 17's K = 7 target: under decay 1, slot 4 weighs exp(-3) = 0.05 of slot 1 and slot 7 gets no loss at
    # all, so the slots K = 7 adds are barely trained; these give slots 1..7 more of the loss
    "slots7+decay2": (replace(SHIPPED, loss_max_slot=7, loss_decay=2.0), 3e-3),
    "slots7+uniform": (replace(SHIPPED, loss_max_slot=7, loss_decay=None), 3e-3),
    # one layer gives every mask slot the same query before RoPE (vLLM embeds them all with one mask vector);
    # a second layer gives each its own. With slots 1-7 weighted (decay 2), at full and at half MLP width
    "layers2+slots7+decay2": (replace(SHIPPED, layers=2, loss_max_slot=7, loss_decay=2.0), 3e-3),
    "layers2+slots7+decay2+ffn768": (replace(SHIPPED, layers=2, loss_max_slot=7, loss_decay=2.0,
                                             intermediate_size=768), 3e-3),
    "layers2+slots7+decay1.5+ffn768": (replace(SHIPPED, layers=2, loss_max_slot=7, loss_decay=1.5,
                                               intermediate_size=768), 3e-3),
}


def transformers_eval_data(model_path: str, layers: list[int], dtype: str, folder: Path, max_tokens: int,
                    dataset: str = "smoke") -> dict:
    """The target's greedy answers to a dataset's prompts (`smoke`: all 40; transformers, `dtype`) with their
    features, cached."""
    import torch

    from orchestrator.datasets.base import load_prompts
    from orchestrator.drafters.train.features import compute_features

    out = folder / f"{dataset}-eval-{dtype}-{max_tokens}.pt"
    if out.is_file():
        return torch.load(out, weights_only=False)
    prompts = load_prompts(dataset, num_prompts=1000)
    return compute_features(model_path, transformers_answers(model_path, dtype, max_tokens, prompts, dataset),
                            layers, out, dtype=dtype)


def prompt_ids(tok, prompt) -> list[int]:
    """A prompt's token ids under the target's chat template, as both answer makers feed it."""
    text = tok.apply_chat_template(list(prompt.messages), tokenize=False, add_generation_prompt=True)
    return tok(text, add_special_tokens=False)["input_ids"]


def transformers_answers(model_path: str, dtype: str, max_tokens: int, prompts: list, dataset: str) -> list[dict]:
    """Greedy answers from transformers, one prompt at a time: [{"prompt_ids", "response_ids"}]."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    lm = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype)).eval()
    examples = []
    for n, p in enumerate(prompts):
        if n % 16 == 0:
            print(f"  {dataset} answers: {n}/{len(prompts)}", flush=True)
        ids = prompt_ids(tok, p)
        with torch.inference_mode():
            gen = lm.generate(torch.tensor([ids]), max_new_tokens=max_tokens, do_sample=False)
        examples.append({"prompt_ids": ids, "response_ids": gen[0, len(ids):].tolist()})
    return examples


def vllm_eval_data(model_path: str, layers: list[int], dtype: str, folder: Path, max_tokens: int, dataset: str,
                   n: int) -> dict:
    """The first `n` prompts' greedy answers from vLLM itself (no speculation, one request at a time, as the
    baseline of `demo_drafters.py` runs) with transformers' features of them, cached: teacher-forcing on these
    instead of transformers' answers tells whether the answers explain a gap to vLLM's counters."""
    import os

    import torch

    from orchestrator.datasets.base import load_prompts
    from orchestrator.drafters.train.features import compute_features

    out = folder / f"{dataset}-eval-vllm-{dtype}-{max_tokens}-{n}.pt"
    if out.is_file():
        return torch.load(out, weights_only=False)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    tok = AutoTokenizer.from_pretrained(model_path)
    ids = [prompt_ids(tok, p) for p in load_prompts(dataset, num_prompts=n)]
    llm = LLM(model=model_path, dtype=dtype, max_model_len=1024, enforce_eager=True, seed=0, max_num_seqs=1)
    outs = llm.generate([{"prompt_token_ids": i} for i in ids], SamplingParams(temperature=0.0, max_tokens=max_tokens))
    examples = [{"prompt_ids": i, "response_ids": list(o.outputs[0].token_ids)} for i, o in zip(ids, outs)]
    del llm
    return compute_features(model_path, examples, layers, out, dtype=dtype)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--eval", type=int, default=32, help="responses held out (the last ones of the data)")
    ap.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--smoke-tokens", type=int, default=96, help="answer length of the smoke evaluation set")
    ap.add_argument("--drafter", default="", help="score this exported drafter folder (loaded as vLLM loads it) "
                    "on the --eval-sets prompts instead of training variants")
    ap.add_argument("--eval-sets", default="smoke", help="comma-separated datasets to score on (e.g. "
                    "smoke,demo-heldout): with --drafter, that drafter; else each variant, along vLLM's walk at K = 3 "
                    "and 7, on a line of its own below its row")
    ap.add_argument("--answers", choices=("transformers", "vllm"), default="transformers", help="with --drafter: "
                    "whose greedy answers to teacher-force on (vllm: vLLM's own, no speculation, one at a time)")
    ap.add_argument("--eval-prompts", type=int, default=0, help="with --drafter: score the first N answers of each "
                    "set only (demo_drafters.py measures the first 16); 0 = all")
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    import torch

    from orchestrator.drafters.train.features import target_tensors
    from orchestrator.drafters.train.run import TrainSettings, _target, target_name
    from orchestrator.environment import _cpu_model, cpu_flags
    from orchestrator.paths import cache_dir

    s0 = TrainSettings(method="dflash", steps=args.steps, block_size=args.block_size)
    model_path, target_cfg = _target(s0.target)
    feat_file = cache_dir() / "drafters" / "data" / f"{target_name(s0)}-{s0.data_key()}" / "features.pt"
    if not feat_file.is_file():
        print(f"no training data at {feat_file}: run `specsweep drafters train --method eagle3` first")
        return 2
    data = torch.load(feat_file, weights_only=False)
    tensors = target_tensors(model_path)
    dtype = s0.resolved_dtype().dtype
    smoke = transformers_eval_data(str(model_path), data["layers"], dtype, feat_file.parent, args.smoke_tokens)

    def transformers_set(name: str) -> dict:
        return smoke if name == "smoke" else transformers_eval_data(str(model_path), data["layers"], dtype,
                                                                   feat_file.parent, args.smoke_tokens, name)

    n = len(data["tokens"])
    train_idx, eval_idx = list(range(n - args.eval)), list(range(n - args.eval, n))
    flags = sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    print(f"CPU: {_cpu_model()} ({' '.join(flags)}), {torch.get_num_threads()} threads; autocast bf16: "
          f"{s0.autocast}; {len(train_idx)} training / {len(eval_idx)} held-out responses; {args.steps} steps")
    if args.drafter:
        from orchestrator.datasets.base import load_prompts
        from orchestrator.drafters.layout import XPRESS_ARCHS
        from orchestrator.drafters.train.dflash_model import load_dflash

        archs = set(json.loads((Path(args.drafter) / "config.json").read_text()).get("architectures") or [])
        if archs & set(XPRESS_ARCHS):  # an xPress drafter: its bare backbone, then the head at each pass count
            from orchestrator.drafters.train.xpress_train import RefinedDrafter, load_xpress

            backbone, head = load_xpress(args.drafter, tensors["embed"], tensors["final_norm"])
            models = {"bare DFlash backbone": backbone}
            models.update({f"xPress, {p} passes": RefinedDrafter(backbone, head, p)
                           for p in sorted({1, 2, head.cfg.num_passes, head.cfg.block_size - 1})})
            ks = tuple(k for k in (3, 7) if k < head.cfg.block_size)
        else:
            models = {"": load_dflash(args.drafter, tensors["embed"], tensors["final_norm"])}
            ks = (3, 7, 15)
        for name in [x for x in args.eval_sets.split(",") if x]:
            if args.answers == "vllm":
                count = args.eval_prompts or len(load_prompts(name, num_prompts=1000))
                ds = vllm_eval_data(str(model_path), data["layers"], dtype, feat_file.parent, args.smoke_tokens, name, count)
            else:
                ds = transformers_set(name)
            print(f"{args.drafter} on {args.eval_prompts or len(ds['tokens'])} {name} {args.answers} answers (<= {args.smoke_tokens} tokens), teacher-forced "
                  "(AL at every position / along vLLM's walk):")
            for (what, model), K in ((m, k) for m in models.items() for k in ks):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s0.autocast):
                    ev = teacher_forced(model, ds, list(range(len(ds["tokens"])))[:args.eval_prompts or None], K)
                print(f"  {what + ' ' if what else ''}K={K:2}: AL {ev['al']:.3f} / {ev['al_walk']:.3f} ({ev['steps']} steps); accepted by position "
                      + " ".join(f"{a:.2f}" for a in ev["accept_by_pos"])
                      + "; slot accuracy " + " ".join(f"{a:.2f}" for a in ev["slot_acc"])
                      + "; slot repeats its previous slot's token " + " ".join(f"{a:.2f}" for a in ev["slot_lag"][1:]), flush=True)
        return 0
    names = [x for x in args.only.split(",") if x] or list(VARIANTS)
    eval_sets = {name: transformers_set(name) for name in [x for x in args.eval_sets.split(",") if x]}
    rows = []
    print(f"{'variant':22} {'s/step':>6} {'tr1':>5} {'tr2':>5} | {'AL K=3':>6} {'AL K=7':>6} | smoke {'K=3':>5} "
          f"{'K=7':>5} | acceptance by position (K=7, smoke)")
    for name in names:
        recipe, lr = VARIANTS[name]
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            _, model, run = fit(replace(s0, lr=lr), recipe, target_cfg, data, tensors, Path(tmp) / "ckpt.pt",
                                   lambda *a: None, examples=train_idx)
            secs = time.perf_counter() - t0
        tail = run["history"][-20:]
        tr = [sum(h["accuracy"][j] for h in tail) / len(tail) for j in (0, 1)]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s0.autocast):
            ev = {K: teacher_forced(model, data, eval_idx, K) for K in (3, 7)}
            scored = {set_name: {K: teacher_forced(model, ds, list(range(len(ds["tokens"]))), K) for K in (3, 7)}
                      for set_name, ds in ({"smoke": smoke} | eval_sets).items()}  # each set once, smoke included
        ev_smoke = scored["smoke"]
        row = {"variant": name, "recipe": recipe.describe(), "lr": lr, "s_per_step": secs / args.steps,
               "train_acc_slot1": tr[0], "train_acc_slot2": tr[1],
               "al_k3": ev[3]["al"], "al_k7": ev[7]["al"], "accept_by_pos_k7": ev[7]["accept_by_pos"],
               "slot_acc_k7": ev[7]["slot_acc"], "blocks": ev[7]["blocks"],
               "smoke_al_k3": ev_smoke[3]["al"], "smoke_al_k7": ev_smoke[7]["al"],
               "smoke_accept_by_pos_k7": ev_smoke[7]["accept_by_pos"], "smoke_blocks": ev_smoke[7]["blocks"]}
        rows.append(row)
        print(f"{name:22} {row['s_per_step']:6.2f} {tr[0]:5.2f} {tr[1]:5.2f} | {ev[3]['al']:6.3f} {ev[7]['al']:6.3f} | "
              f"smoke {ev_smoke[3]['al']:5.3f} {ev_smoke[7]['al']:5.3f} | "
              + " ".join(f"{a:.2f}" for a in ev_smoke[7]["accept_by_pos"]), flush=True)
        row["walk"] = {}
        for set_name, ds in eval_sets.items():
            w = scored[set_name]
            row["walk"][set_name] = {f"al_walk_k{K}": w[K]["al_walk"] for K in w} | \
                {f"al_k{K}": w[K]["al"] for K in w} | {"accept_by_pos_k7": w[7]["accept_by_pos"]}
            print(f"{'':22} {set_name} ({len(ds['tokens'])}), along vLLM's walk: AL K=3 {w[3]['al_walk']:.3f}  "
                  f"K=7 {w[7]['al_walk']:.3f} (K=7 - K=3 {w[7]['al_walk'] - w[3]['al_walk']:+.3f}); accepted by "
                  "position (K=7, every position) " + " ".join(f"{a:.3f}" for a in w[7]["accept_by_pos"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": _cpu_model(), "flags": flags, "steps": args.steps,
                                               "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
