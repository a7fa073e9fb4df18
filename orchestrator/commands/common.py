"""What the commands share: the errors cli.py maps to exit codes, opening the store, the consoles."""

from __future__ import annotations

import os
from typing import Callable, TypeVar

from ..errors import EXIT_INTERRUPTED
from ..render import console, err_console
from ..store import Store
from ..store.urls import resolve_store_url

A = TypeVar("A")

__all__ = ["Interrupted", "call", "UsageError", "console", "err_console", "open_store", "open_sweep_store", "engine_output",
           "check_format"]


class UsageError(Exception):
    """Bad input: one line for the user, exit 2 (nothing was run or written)."""


class Interrupted(Exception):
    """Stopped by Ctrl-C or a stop signal after the command said what was kept; exit 130 (`call`)."""


def open_store(store: str | None) -> Store:
    """The store named by --store (else the environment's: store/urls.py resolve_store_url); StoreError if not."""
    return Store(resolve_store_url(store))


def open_sweep_store(store: str | None, *sweeps: str) -> Store:
    """The store, after checking that every named sweep is in it."""
    st = open_store(store)
    for name in sweeps:
        if st.get_sweep(name) is None:
            names = ", ".join(s.name for s in st.list_sweeps()) or "(none)"
            raise UsageError(f"no sweep named {name!r} in {st.display_url}; sweeps there: {names}")
    return st


def warn_if_privileged(url: str) -> None:
    """`query` and `report`: one note when the connection's PostgreSQL user could do more than read."""
    from ..store.roles import store_privileges

    privileges = store_privileges(url)
    note = privileges.warning() if privileges else None
    if note:
        err_console.print(f"[yellow]{note}[/]", highlight=False)


def engine_output(verbose: bool) -> None:
    """--verbose: engine actors print to the console at vLLM's INFO level (engines/engine_log.py)."""
    if verbose:
        os.environ["SPECSWEEP_ENGINE_LOG"] = "console"
        os.environ.setdefault("SPECSWEEP_ENGINE_LOG_LEVEL", "INFO")


def check_format(fmt: str) -> None:
    if fmt not in ("table", "csv", "json"):
        raise UsageError(f"--format must be one of table, csv, json (got {fmt!r})")


def call(command: Callable[[A], int], args: A) -> int:
    """Run one command and return its exit code: the one place where errors become exit codes and one-line
    messages (2: bad input, nothing run or written; 130: interrupted). Tracebacks are for bugs only."""
    from ..controller.lease import LeaseHeld, LeaseSettingError
    from ..errors import EXIT_BAD_INPUT, EXIT_STORE_UNREACHABLE, SpecError, StoreError, StoreUnavailable
    from ..store.outage import RetrySettingError
    from ..validity import FingerprintMismatch

    try:
        return command(args)
    except SpecError as e:  # every issue of a refused spec: file:line: field: what is allowed
        for issue in e.issues:
            err_console.print(f"[red]error:[/] {issue}", highlight=False, soft_wrap=True)
    except StoreUnavailable as e:  # before StoreError: its own exit code (the sweep resumes on a rerun)
        err_console.print(f"[red]error:[/] {e}", highlight=False, soft_wrap=True)
        return EXIT_STORE_UNREACHABLE
    except (UsageError, StoreError, LeaseHeld, LeaseSettingError, RetrySettingError, FingerprintMismatch) as e:
        err_console.print(f"[red]error:[/] {e}", highlight=False, soft_wrap=True)
    except Interrupted as e:
        err_console.print(f"[yellow]{e}[/]")
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_BAD_INPUT
