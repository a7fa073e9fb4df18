"""Store records built in tests without a database: every column None but those given (JSON columns may be
given as text, as SQLite's views return it)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from orchestrator.store import TrialResult
from orchestrator.store.rows import Row

R = TypeVar("R", bound=Row)


def record(cls: type[R], **values: Any) -> R:
    return cls.from_mapping({f.name: None for f in fields(cls)} | values)


def trial_result(**values: Any) -> TrialResult:
    return record(TrialResult, **values)
