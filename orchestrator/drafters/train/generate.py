"""Child process: the target's greedy responses to the training prompts, through vLLM (batched).

    python -m orchestrator.drafters.train.generate MODEL PROMPTS.json OUT.jsonl MAX_TOKENS DTYPE [SECONDS]

Appends one JSON object per prompt to OUT.jsonl, in prompt order: {"prompt": ..., "prompt_ids": [...],
"response_ids": [...]}, continuing after the prompts the file already holds (a run that was stopped, or cut
by its time budget, is continued, never redone). Prompts go to vLLM in chunks of CHUNK, which is also the
engine's max_num_seqs (one chunk fills the batch; 256 ran 1.2x faster than chunks of 128 on a 2-core AMD EPYC
with AVX512-BF16, whose batch drained at each chunk's end); each chunk is flushed and fsynced before the next
starts, so a kill loses at most the chunk in flight. After each chunk a line `progress DONE TOTAL TOKENS` on
stdout tells the parent how far it is.
SECONDS (optional): stop before a chunk that would end after that many seconds from this process's start,
judged from the last chunk's time (the first chunk always runs). A child process keeps vLLM's memory and
threads out of the trainer."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

CHUNK = 256


def read_responses(path: Path) -> list[dict]:
    """The complete records of a responses file; a torn last line (a kill mid-write) is cut off the file."""
    if not path.is_file():
        return []
    good, size = [], 0
    with path.open("rb") as f:
        for raw in f:
            try:
                record = json.loads(raw)
            except ValueError:
                break
            if not raw.endswith(b"\n"):
                break
            good.append(record)
            size += len(raw)
    if size != path.stat().st_size:
        with path.open("r+b") as f:
            f.truncate(size)
    return good


def generate_into(llm, prompts: list[str], out: Path, params, seconds: float | None,
                  t_start: float, clock: Callable[[], float] = time.perf_counter,
                  emit: Callable[[str], None] = lambda line: print(line, flush=True), chunk: int = CHUNK) -> int:
    """Append `llm`'s greedy responses to the prompts `out` does not hold yet, a chunk at a time; stop before a
    chunk that would end more than `seconds` after `t_start` (the last chunk's time is the estimate; the first
    chunk always runs); `params` are vLLM's SamplingParams. Returns how many prompts `out` holds."""
    have = read_responses(out)
    if [r["prompt"] for r in have] != prompts[: len(have)]:
        raise SystemExit(f"{out} holds responses to other prompts: remove it")
    n_tokens = sum(len(r["response_ids"]) for r in have)
    todo = prompts[len(have):]
    tok = llm.get_tokenizer()
    emit(f"engine ready in {clock() - t_start:.0f} s; generating {len(todo)} responses ({len(have)} already made)")
    t1 = clock()
    done, new_tokens, last_chunk = len(have), 0, 0.0
    with out.open("a", encoding="utf-8") as f:
        for start in range(0, len(todo), chunk):
            if seconds is not None and start and clock() - t_start + last_chunk > seconds:
                emit(f"budget: stopped after {done} of {len(prompts)} prompts ({seconds:.0f} s)")
                break
            t_chunk = clock()
            part = todo[start: start + chunk]
            texts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                             add_generation_prompt=True) for p in part]
            outs = llm.generate(texts, params, use_tqdm=False)
            for p, o in zip(part, outs):
                f.write(json.dumps({"prompt": p, "prompt_ids": list(o.prompt_token_ids),
                                    "response_ids": list(o.outputs[0].token_ids)}) + "\n")
            f.flush()
            os.fsync(f.fileno())
            last_chunk = clock() - t_chunk
            done += len(part)
            new_tokens += sum(len(o.outputs[0].token_ids) for o in outs)
            emit(f"progress {done} {len(prompts)} {n_tokens + new_tokens}")
    dt = clock() - t1
    emit(f"generated {new_tokens} tokens in {dt:.0f} s ({new_tokens / max(dt, 1e-9):.0f} tok/s)")
    return done


def main() -> None:
    model, prompts_file, out_file, max_tokens, dtype = sys.argv[1:6]
    seconds = float(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[6] != "none" else None
    t_start = time.perf_counter()
    prompts = json.loads(Path(prompts_file).read_text())
    out = Path(out_file)
    have = read_responses(out)
    if len(have) >= len(prompts):
        print(f"progress {len(prompts)} {len(prompts)} {sum(len(r['response_ids']) for r in have)}", flush=True)
        return
    from vllm import LLM, SamplingParams

    llm = LLM(model=model, dtype=dtype, max_model_len=1024, enforce_eager=True, seed=0, max_num_seqs=CHUNK)
    generate_into(llm, prompts, out, SamplingParams(temperature=0.0, max_tokens=int(max_tokens)), seconds, t_start)


if __name__ == "__main__":
    main()
