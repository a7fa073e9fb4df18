"""The engine contract every backend implements (vllm, fake), and the values that cross it."""

from __future__ import annotations

import abc
import functools
import itertools
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator

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


@dataclass(frozen=True)
class SamplingSettings:
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    ignore_eos: bool = False
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class TokenChunk:
    """Tokens that arrived together in one streamed update (speculation can deliver several)."""

    token_ids: list[int]
    text: str
    finished: bool = False
    finish_reason: str | None = None
    prompt_tokens: int | None = None  # prompt length as the engine tokenised it (first chunk)


@dataclass
class SpecCounters:
    """Cumulative speculative-decoding counters (vllm:spec_decode_*). Subtract two snapshots for a delta."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)

    def __sub__(self, other: "SpecCounters") -> "SpecCounters":
        return SpecCounters(
            self.num_drafts - other.num_drafts,
            self.num_draft_tokens - other.num_draft_tokens,
            self.num_accepted_tokens - other.num_accepted_tokens,
            [x - y for x, y in itertools.zip_longest(self.accepted_per_pos, other.accepted_per_pos, fillvalue=0)],
        )


class EngineStartError(RuntimeError):
    """The engine could not start (bad path, OOM, unsupported method...). Not retried."""


class EngineBackend(abc.ABC):
    """One engine for one EngineConfig, living inside one process (a Ray actor)."""

    kind: str

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
    def spec_counters(self) -> SpecCounters:
        """Cumulative speculative-decoding counters of this engine."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Backend-specific facts for the environment fingerprint (versions, device, attention backend)."""

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
