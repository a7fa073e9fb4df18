"""Child process: the target's greedy responses to the training prompts, through vLLM (batched).

    python -m orchestrator.drafters.train.generate MODEL PROMPTS.json OUT.jsonl MAX_TOKENS DTYPE

Writes one JSON object per prompt: {"prompt": ..., "prompt_ids": [...], "response_ids": [...]}; the file is
renamed into place only when complete. A child process keeps vLLM's memory and threads out of the trainer.
Prompts go to vLLM in chunks of CHUNK (large enough to keep its batch full); after each chunk a line
`progress DONE TOTAL TOKENS` on stdout tells the parent how far it is."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

CHUNK = 128


def main() -> None:
    model, prompts_file, out_file, max_tokens, dtype = sys.argv[1:6]
    from vllm import LLM, SamplingParams

    prompts = json.loads(Path(prompts_file).read_text())
    t0 = time.perf_counter()
    llm = LLM(model=model, dtype=dtype, max_model_len=1024, enforce_eager=True, seed=0)
    tok = llm.get_tokenizer()
    texts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
             for p in prompts]
    params = SamplingParams(temperature=0.0, max_tokens=int(max_tokens))
    print(f"engine ready in {time.perf_counter() - t0:.0f} s; generating {len(texts)} responses", flush=True)
    t1 = time.perf_counter()
    outs, n_tokens = [], 0
    for start in range(0, len(texts), CHUNK):
        chunk = llm.generate(texts[start: start + CHUNK], params, use_tqdm=False)
        outs += chunk
        n_tokens += sum(len(o.outputs[0].token_ids) for o in chunk)
        print(f"progress {len(outs)} {len(texts)} {n_tokens}", flush=True)
    tmp = Path(out_file + ".part")
    with tmp.open("w", encoding="utf-8") as f:
        for p, o in zip(prompts, outs):
            f.write(json.dumps({"prompt": p, "prompt_ids": list(o.prompt_token_ids),
                                "response_ids": list(o.outputs[0].token_ids)}) + "\n")
    os.replace(tmp, out_file)
    dt = time.perf_counter() - t1
    print(f"generated {n_tokens} tokens in {dt:.0f} s ({n_tokens / max(dt, 1e-9):.0f} tok/s)", flush=True)


if __name__ == "__main__":
    main()
