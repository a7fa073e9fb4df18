"""Exceptions users see, each with a documented CLI exit code."""

from __future__ import annotations

from dataclasses import dataclass

# Exit codes of the `specsweep` CLI (documented in docs/src/guides/running-sweeps.md, Exit codes).
EXIT_OK = 0
EXIT_TRIALS_FAILED = 1  # the sweep ran, but one or more trials failed
EXIT_BAD_INPUT = 2  # spec / arguments refused before anything ran or was written
EXIT_REGRESSION = 3  # specsweep nightly: a regression was detected
EXIT_STORE_UNREACHABLE = 4  # the store stayed unreachable past SPECSWEEP_STORE_RETRY_S: stopped, rerun to resume
EXIT_INTERRUPTED = 130


@dataclass
class SpecIssue:
    """One problem in a sweep spec: where it is and what is allowed."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        field = f" {self.path}:" if self.path else ""
        return f"{where}:{field} {self.message}"


class SpecError(Exception):
    """A sweep spec was refused. Carries every issue found, each with file, line and field path."""

    def __init__(self, issues: list[SpecIssue]):
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


class StoreError(Exception):
    """The results store cannot be opened or written."""


class StoreUnavailable(StoreError):
    """The store stayed unreachable past the retry bound (store/outage.py): the command stopped."""


class StoreLeaseLost(StoreError):
    """While the store was unreachable another controller took this one's lease: nothing more is written."""


class StoreConflict(StoreError):
    """A write broke a uniqueness or foreign-key constraint (e.g. two controllers inserted the same row at once)."""
