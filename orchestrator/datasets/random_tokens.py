"""`random`: prompts of exactly `random_input_len` token ids drawn from the target's vocabulary, sent without a
chat template (as `vllm bench serve --dataset-name random` does); with `ignore_eos: true` and `max_tokens`
the output length is fixed too, so a run matches one-to-one against `vllm bench serve`. The engine draws the
ids (it has the tokenizer), seeded by the prompt id: every method gets the same prompts."""

from __future__ import annotations

from .base import Prompt, register

DEFAULT_INPUT_LEN = 128
MAX_RANDOM_PROMPTS = 10_000  # num_prompts above this is capped


@register("random")
def load_random(path: str | None = None, input_len: int = DEFAULT_INPUT_LEN) -> list[Prompt]:
    return [Prompt(id=f"random-{i}", messages=(), category="random", input_len=input_len)
            for i in range(MAX_RANDOM_PROMPTS)]
