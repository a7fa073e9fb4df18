"""`demo-heldout`: 64 prompts from the demo drafters' own training distribution that the default training set
does not contain — the prompts that follow the first `TrainSettings.num_prompts` (1,000) in the same template
stream (`datasets/prompts.py`, seed `DEFAULT_SEED`), each distinct from every one of those.

Beside `smoke` (hand-written, out of the training distribution) it answers the question a user training a
drafter on their own traffic asks: how well does it draft on *new* requests of that traffic? The responses to
these prompts were never generated, featurised or trained on. A drafter trained with other `--prompts` or
`--seed` than the defaults may have seen them: compare with `smoke` then."""

from __future__ import annotations

from .base import Prompt, register

HELD_OUT = 64


def heldout_prompts(num_train: int, seed: int, n: int = HELD_OUT) -> list[str]:
    """The `n` prompts that follow the first `num_train` of the training stream (`training_prompts` is a prefix
    of itself for larger n, and never repeats a prompt: these are none of the first `num_train`; tested)."""
    from .prompts import training_prompts

    return training_prompts(num_train + n, seed)[num_train:]


@register("demo-heldout")
def load_demo_heldout(path: str | None = None, **_) -> list[Prompt]:
    from .prompts import DEFAULT_NUM_PROMPTS, DEFAULT_SEED

    return [Prompt(id=f"demo-heldout-{i}", messages=({"role": "user", "content": p},), category="demo-heldout")
            for i, p in enumerate(heldout_prompts(DEFAULT_NUM_PROMPTS, DEFAULT_SEED))]
