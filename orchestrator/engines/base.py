"""The engine contract every backend implements (vllm, fake). The values that cross it are in records.py."""

from __future__ import annotations

import abc
import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator

from ..records import DraftCounters, SamplingSettings, StepTiming, TokenChunk

if TYPE_CHECKING:
    from ..datasets import Prompt


@dataclass(frozen=True)
class EngineConfig:
    """Everything fixed at engine start. One engine (one Ray actor, one process) per distinct config."""

    backend: str  # "vllm" | "fake"
    model: str  # as written in the spec (alias, path or hub id)
    model_path: str  # resolved local path or hub id passed to the engine
    revision: str | None
    dtype: str
    max_model_len: int
    method_label: str
    method: str
    speculative_config: dict[str, Any] | None
    engine_args: dict[str, Any] = field(default_factory=dict)  # enforce_eager, max_num_seqs, ...
    fake: dict[str, Any] = field(default_factory=dict)  # fake-backend knobs (empty for vllm)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @functools.cached_property
    def config_hash(self) -> str:
        """Stable hash of what the engine is started with (machine-independent: model_path excluded)."""
        d = self.to_dict()
        d.pop("model_path")
        d.pop("method_label")
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


class EngineStartError(RuntimeError):
    """The engine could not start (bad path, OOM, unsupported method...). Not retried."""


class EngineBackend(abc.ABC):
    """One engine for one EngineConfig, living inside one process (a Ray actor)."""

    kind: str

    @classmethod
    def process_env(cls, engine_spec: Any, cache_root: str) -> dict[str, str]:
        """Environment variables the engine's process needs, set before it starts (the actor's runtime_env).
        `engine_spec`: the sweep spec's `engine` section."""
        return {}

    def __init__(self, config: EngineConfig):
        self.config = config

    @abc.abstractmethod
    async def start(self) -> None:
        """Load the model; raise EngineStartError with the cause on failure."""

    @abc.abstractmethod
    def generate(self, request_id: str, prompt: "Prompt", sampling: SamplingSettings) -> AsyncIterator[TokenChunk]:
        """Stream the completion of one prompt: chat messages (the backend applies the chat template) or,
        for `random` prompts, `prompt.input_len` random token ids seeded by the prompt id."""

    @abc.abstractmethod
    def draft_counters(self) -> DraftCounters:
        """Cumulative draft/accept counters of this engine (vllm:spec_decode_*)."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Backend-specific facts for the environment fingerprint (versions, device, attention backend)."""

    async def step_timing(self) -> StepTiming | None:
        """Cumulative time inside the engine's steps (target forward, drafting, the rest); None where the
        backend cannot time its steps."""
        return None

    async def score_top3(self, prompt: "Prompt", sampling: SamplingSettings) -> list[list[float]] | None:
        """A check pass outside every measured window: `prompt` answered again greedily, with this engine's top three
        at every position it produced: [the token it chose, the 2nd, |logprob margin to it|, the 3rd, |margin to
        it|]. None: not available."""
        return None

    def begin_window(self) -> None:
        """Called before each measurement window (the fake backend draws its injected noise here)."""

    def cache_counters(self) -> tuple[int, int]:
        """Cumulative prefix-cache (queries, hits) in tokens; (0, 0) where the backend has no prefix cache."""
        return (0, 0)

    def kv_cache_tokens(self) -> int | None:
        """KV-cache capacity in tokens, when the backend knows it."""
        return None

    async def stop(self) -> None:
        """Release what can be released in-process (the actor is killed afterwards anyway)."""
