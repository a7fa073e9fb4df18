"""Rows as the user reads them: the results table with the lines below it (its columns and cells: results_table.py),
CSV and JSON, the comparison and query tables."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

from rich.console import Console
from rich.table import Table

from ..controller.plan import load_text
from ..states import TrialState
from ..store import CapacityResult, CrossoverRow, TrialResult
from ..validity.flags import INFORMATIONAL_FLAGS

if TYPE_CHECKING:
    from ..compare import ComparedPoint

from .lines import capacity_lines, crossover_lines
from .results_table import natural_width, results_table


def _json_safe(v: Any) -> Any:
    """JSON has no infinity: a request rate of inf is written as the string "inf"."""
    return "inf" if isinstance(v, float) and math.isinf(v) else v


class Record(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


def _columns_of(row: Record | Mapping[str, Any]) -> Mapping[str, Any]:
    return row if isinstance(row, Mapping) else row.as_dict()


def print_records(rows: Sequence[Record | Mapping[str, Any]], fmt: str, console: Console) -> None:
    """Rows as JSON (a list of objects) or CSV (a header from the first row), fields in the record's order.
    A row is a store record, or a mapping where its columns are only known at run time (`specsweep query`)."""
    if fmt == "json":
        console.print_json(json.dumps([{k: _json_safe(v) for k, v in _columns_of(r).items()} for r in rows],
                                      default=str))
        return
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(_columns_of(rows[0])))
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in _columns_of(r).items()})
    console.file.write(buf.getvalue())
    console.file.flush()


def print_results(rows: list[TrialResult], fmt: str, console: Console, title: str = "",
                  crossover: list[CrossoverRow] | None = None, capacity: list[CapacityResult] | None = None,
                  view: str = "compact", names: list[str] | None = None) -> None:
    """A sweep's results: a table fitted to the console (results_table.py) and the lines below it, or every
    column as CSV / JSON. `view`: compact | wide; `names`: the trial_results columns to show (--columns)."""
    if fmt in ("json", "csv"):
        print_records(rows, fmt, console)
    else:
        fitted = results_table(rows, title, console, view, names)
        _print_whole(console, fitted.table, fitted.width)
        if fitted.hidden:
            console.print(f"hidden: {', '.join(fitted.hidden)} (--wide shows every column)", highlight=False)
        if view == "compact" and not names and any(r.on_pareto_front for r in rows):
            console.print("* best: on the Pareto front of the sweep's objectives", highlight=False)
        for line in crossover_lines(crossover or []):
            console.print(f"crossover: {line}")
        for line in capacity_lines(capacity or []):
            console.print(f"capacity: {line}", highlight=False)
        suspect = [r for r in rows if any(f not in INFORMATIONAL_FLAGS for f in (r.flags or "").split(",") if f)]
        for r in suspect:
            console.print(f"[yellow]trial {r.trial} ({r.label}, {r.dataset}, {_load(r)}) "
                          f"flags:[/] {(r.flags or '').replace(',', ', ')}", highlight=False)
        for r in rows:
            if "inexact_numerics" in (r.flags or "").split(","):
                console.print(f"trial {r.trial} ({r.label}, {r.dataset}, {_load(r)}): inexact numerics: "
                              f"{r.near_tie_departures} of {r.departures} departures from the baseline's text are at "
                              "near ties of its own top three (rounding of a batched verify), not a loss", highlight=False)
        if suspect:
            console.print("flags are explained in docs/src/concepts/measurement.md (Flags); a flagged row's numbers are suspect")
        for r in rows:
            if r.state == TrialState.FAIL and r.error:
                console.print(f"[red]trial {r.trial} ({r.label}, {_load(r)}) failed:[/] "
                              f"{r.error.splitlines()[0][:300]}")


def print_table(console: Console, table: Table) -> None:
    """Print a table whole (`compare`, `query`): never squeezed into the console's width."""
    _print_whole(console, table, natural_width(table, console))


def _print_whole(console: Console, table: Table, width: int) -> None:
    """Print `table` at least `width` wide (rich would squeeze it into the console's width, cutting values): a
    line wider than the terminal wraps there, whole."""
    if width <= console.width:
        console.print(table)
        return
    Console(file=console.file, width=width, color_system=console.color_system,  # type: ignore[arg-type]
            force_terminal=console.is_terminal, highlight=False).print(table)


def _load(row: TrialResult) -> str:
    return load_text(row.concurrency, row.request_rate)


def compare_table(rows: list[ComparedPoint], metrics: tuple[str, ...], title: str) -> Table:
    """`specsweep compare`: A | B | B/A for each metric of each shared point."""
    table = Table(title=title)
    for h in ("method", "K", "dataset", "load", *[f"{m} A | B | B/A" for m in metrics]):
        table.add_column(h, justify="left" if h in ("method", "dataset") else "right", no_wrap=True)

    def f(v):
        return "-" if v is None else f"{v:.3g}"

    for r in rows:
        load = str(r.concurrency) if r.request_rate is None else load_text(r.concurrency, r.request_rate)
        table.add_row(r.label, str(r.k if r.k is not None else "-"), r.dataset, load,
                      *[f"{f(r.metrics[m].a)} | {f(r.metrics[m].b)} | {f(r.metrics[m].ratio)}" for m in metrics])
    return table


def query_table(cols: list[str], rows: list[dict], title: str | None) -> Table:
    table = Table(title=title)
    for c in cols:
        table.add_column(c, no_wrap=True)
    for r in rows:
        table.add_row(*["" if r[c] is None else (f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c])) for c in cols])
    return table
