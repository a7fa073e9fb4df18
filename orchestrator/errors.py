"""Exceptions users see, each with a documented CLI exit code."""

from __future__ import annotations

from dataclasses import dataclass

# Exit codes of the `specsweep` CLI (described in EXIT_CODES below; the reference page is generated from it).
EXIT_OK = 0
EXIT_TRIALS_FAILED = 1  # the sweep ran, but one or more trials failed
EXIT_BAD_INPUT = 2  # spec / arguments refused before anything ran or was written
EXIT_REGRESSION = 3  # specsweep nightly: a regression was detected
EXIT_STORE_UNREACHABLE = 4  # the store stayed unreachable past SPECSWEEP_STORE_RETRY_S: stopped, rerun to resume
EXIT_INTERRUPTED = 130

# What each code means to a user: the one description (docs/gen_reference.py renders it; a test checks every
# EXIT_ constant is here).
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "every trial of the sweep is COMPLETE (other commands: done)",
    EXIT_TRIALS_FAILED: "the sweep ran, but some of its trials are not COMPLETE: failed (their `error` column says "
    "why), or still PENDING (e.g. `search.timeout_s` reached); `report --screenshot`: the page raised JavaScript "
    "errors (listed)",
    EXIT_BAD_INPUT: "bad input: spec, dataset, model or store refused before anything ran, or the sweep (nightly "
    "suite) is leased by a live controller; nothing written",
    EXIT_REGRESSION: "`specsweep nightly`: a regression was detected (report written)",
    EXIT_STORE_UNREACHABLE: "the store stayed unreachable past `SPECSWEEP_STORE_RETRY_S` (default 300 s): engines "
    "stopped, nothing lost; run the same command again once it is back (trials it was measuring run again)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C / SIGTERM / SIGHUP): the running trials go back to PENDING (they run on "
    "resume), completed trials are kept; every process the command started (a local Ray, engine actors, vLLM's "
    "EngineCore; `drafters train`'s vLLM child and its engine) is stopped, none left running",
}


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
