"""Rows as the user reads them: the results table (console and HTML report cells), CSV and JSON, the comparison
and query tables."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

from rich.console import Console
from rich.table import Table

from ..controller.plan import load_text
from ..states import TrialRole, TrialState
from ..store import CapacityResult, CrossoverRow, TrialResult

if TYPE_CHECKING:
    from ..compare import ComparedPoint

from .lines import capacity_lines, crossover_lines

# (column in trial_results, header, format)
TABLE_COLUMNS = [
    ("trial", "#", "{}"),
    ("label", "method", "{}"),
    ("num_speculative_tokens", "K", "{}"),
    ("dataset", "dataset", "{}"),
    ("concurrency", "conc", "{}"),
    ("request_rate", "rate req/s", "rate"),
    ("output_tok_s", "out tok/s", "{:.1f}"),
    ("speedup", "speedup [CI]", "speedup"),
    ("ttft_ms_p50", "TTFT p50 ms", "{:.0f}"),
    ("tpot_ms_p50", "TPOT p50 ms", "{:.1f}"),
    ("acceptance_length", "AL", "{:.2f}"),
    ("request_al_p50", "req AL p10/50/90", "request_al"),
    ("decode_tokens_per_step", "tok/step", "{:.2f}"),
    ("step_cost_ratio", "step cost", "{:.2f}"),
    ("identity_residual", "identity resid", "{:+.0%}"),
    ("verify_ms_per_step", "verify/draft/other ms", "step_split"),
    ("greedy_match_rate", "same out", "{:.2f}"),
    ("slo_attainment", "SLO met", "{:.0%}"),
    ("goodput_req_s", "goodput req/s", "{:.2f}"),
    ("state", "state", "{}"),
    ("on_pareto_front", "best", "flag"),
    ("flags", "flags", "{}"),
]


# shown only when some row has a value (open-loop load points, measurement.slo)
OPTIONAL_COLUMNS = ("request_rate", "slo_attainment", "goodput_req_s", "request_al_p50", "decode_tokens_per_step",
                    "step_cost_ratio", "identity_residual", "verify_ms_per_step")

# formats that join several columns into one cell: request-level AL p10/p50/p90 (median over windows), and the
# time per engine step inside the model runner: target forward / drafter / the rest
JOINED_CELLS = {
    "request_al": (("request_al_p10", "request_al_p50", "request_al_p90"), "{:.2f}"),
    "step_split": (("verify_ms_per_step", "drafter_ms_per_step", "other_ms_per_step"), "{:.1f}"),
}


def table_columns(rows: list[TrialResult]) -> list[tuple[str, str, str]]:
    """TABLE_COLUMNS less the optional ones no row has a value for."""
    return [c for c in TABLE_COLUMNS if c[0] not in OPTIONAL_COLUMNS or any(r.column(c[0]) is not None for r in rows)]


def _json_safe(v: Any) -> Any:
    """JSON has no infinity: a request rate of inf is written as the string "inf"."""
    return "inf" if isinstance(v, float) and math.isinf(v) else v


def _speedup(row: TrialResult) -> str:
    s = row.speedup
    if s is None:
        return "-" if row.role != TrialRole.PAIRED_BASELINE else "(baseline)"
    lo, hi = row.speedup_ci_low, row.speedup_ci_high
    return f"{s:.2f} [{lo:.2f}-{hi:.2f}]" if lo is not None and hi is not None else f"{s:.2f}"


def format_cell(value: Any, fmt: str, row: TrialResult) -> str:
    """A trial_results value as the results table shows it (console and HTML report)."""
    if fmt == "speedup":
        return _speedup(row)
    if value is None:
        return "-"
    if fmt in JOINED_CELLS:  # several columns of the row in one cell, "a/b/c"
        columns, number = JOINED_CELLS[fmt]
        return "/".join("-" if row.column(c) is None else number.format(row.column(c)) for c in columns)
    if fmt == "rate":
        return "inf" if math.isinf(value) else f"{value:g}"
    if fmt == "flag":  # booleans come back as 0/1 from SQLite views
        return "*" if value else ""
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def results_table(rows: list[TrialResult], title: str = "") -> Table:
    backends = sorted({r.backend for r in rows})
    if "fake" in backends:
        title += "  [bold red](backend=fake: simulated, not a measurement)[/]"
    table = Table(title=title, show_lines=False)
    columns = table_columns(rows)
    for _, header, _ in columns:
        table.add_column(header, justify="left" if header in ("method", "dataset", "state", "flags") else "right")
    for r in rows:
        cells = [format_cell(r.column(col), fmt, r) for col, _, fmt in columns]
        style = "red" if r.state == TrialState.FAIL else None
        table.add_row(*cells, style=style)
    return table


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
                  crossover: list[CrossoverRow] | None = None, capacity: list[CapacityResult] | None = None) -> None:
    if fmt in ("json", "csv"):
        print_records(rows, fmt, console)
    else:
        console.print(results_table(rows, title))
        for line in crossover_lines(crossover or []):
            console.print(f"crossover: {line}")
        for line in capacity_lines(capacity or []):
            console.print(f"capacity: {line}", highlight=False)
        flagged = [r for r in rows if r.flags]
        for r in flagged:
            console.print(f"[yellow]trial {r.trial} ({r.label}, {r.dataset}, {_load(r)}) "
                          f"flags:[/] {(r.flags or '').replace(',', ', ')}", highlight=False)
        if flagged:
            console.print("flags are explained in README.md (Flags); a flagged row's numbers are suspect")
        for r in rows:
            if r.state == TrialState.FAIL and r.error:
                console.print(f"[red]trial {r.trial} ({r.label}, {_load(r)}) failed:[/] "
                              f"{r.error.splitlines()[0][:300]}")


def _load(row: TrialResult) -> str:
    return load_text(row.concurrency, row.request_rate)


def compare_table(rows: list[ComparedPoint], metrics: tuple[str, ...], title: str) -> Table:
    """`specsweep compare`: A | B | B/A for each metric of each shared point."""
    table = Table(title=title)
    for h in ("method", "K", "dataset", "load", *[f"{m} A | B | B/A" for m in metrics]):
        table.add_column(h, justify="left" if h in ("method", "dataset") else "right")

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
        table.add_column(c)
    for r in rows:
        table.add_row(*["" if r[c] is None else (f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c])) for c in cols])
    return table
