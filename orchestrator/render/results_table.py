"""The results table (`results`, `run`'s closing table): which columns, each cell's text, and fitting the table to
the terminal by hiding whole columns — a value is never cut.

Three views: the compact default (the answer in 100 columns), `--wide` (every column) and `--columns a,b,c`
(the `trial_results` view's own names). When the console is narrower than the compact table, columns are hidden
in the order of HIDE_ORDER and named in one footer line; `--wide` and `--columns` hide nothing (a line wider than
the terminal wraps, whole)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from ..states import TrialRole, TrialState
from ..store import TrialResult


@dataclass(frozen=True)
class Column:
    key: str  # a trial_results column, or `load` (concurrency or request rate)
    header: str
    fmt: str  # a format string, or one of the named formats of format_cell


# Every column the wide table can show, in its order. (column in trial_results, header, format)
WIDE = [Column(*c) for c in [
    ("trial", "#", "{}"),
    ("label", "method", "{}"),
    ("num_speculative_tokens", "K", "{}"),
    ("dataset", "dataset", "{}"),
    ("concurrency", "conc", "{}"),
    ("request_rate", "rate req/s", "rate"),
    ("offered_rate", "offered req/s", "{:.3g}"),
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
]]

# The compact default: the method (best marked *), its point, the verdict and the diagnostics that explain it.
COMPACT = [Column(*c) for c in [
    ("label", "method", "best_label"),
    ("num_speculative_tokens", "K", "{}"),
    ("dataset", "dataset", "{}"),
    ("load", "load", "load"),
    ("offered_rate", "offered/s", "{:.3g}"),
    ("output_tok_s", "tok/s", "{:.1f}"),
    ("speedup", "speedup [CI]", "speedup"),
    ("acceptance_length", "AL", "{:.2f}"),
    ("ttft_ms_p50", "TTFT ms", "{:.0f}"),
    ("tpot_ms_p50", "TPOT ms", "{:.1f}"),
    ("slo_attainment", "SLO met", "{:.0%}"),
    ("state", "state", "{}"),
    ("flags", "flags", "{}"),
]]

# Compact columns hidden first when the console is too narrow (the method, speedup, load and tok/s stay). A column
# that tells rows nothing apart goes first: the dataset when there is one, K when each method has one.
HIDE_ORDER = ("offered_rate", "ttft_ms_p50", "slo_attainment", "tpot_ms_p50", "acceptance_length", "flags", "state",
              "num_speculative_tokens", "dataset")


def hide_order(rows: list[TrialResult]) -> list[str]:
    """HIDE_ORDER with the columns whose values distinguish no row moved to the front."""
    first = []
    if len({r.dataset for r in rows}) <= 1:
        first.append("dataset")
    if all(len({r.num_speculative_tokens for r in rows if r.label == label}) == 1 for label in {r.label for r in rows}):
        first.append("num_speculative_tokens")
    return first + [k for k in HIDE_ORDER if k not in first]

# shown only when some row has a value (open-loop load points, measurement.slo, step timing)
OPTIONAL = ("request_rate", "offered_rate", "slo_attainment", "goodput_req_s", "request_al_p50", "decode_tokens_per_step",
            "step_cost_ratio", "identity_residual", "verify_ms_per_step")

# formats that join several columns into one cell: request-level AL p10/p50/p90 (median over windows), and the
# time per engine step inside the model runner: target forward / drafter / the rest
JOINED_CELLS = {
    "request_al": (("request_al_p10", "request_al_p50", "request_al_p90"), "{:.2f}"),
    "step_split": (("verify_ms_per_step", "drafter_ms_per_step", "other_ms_per_step"), "{:.1f}"),
}
LEFT = frozenset({"label", "dataset", "state", "flags"})  # text columns, left-aligned (console and HTML report)


def table_columns(rows: list[TrialResult]) -> list[tuple[str, str, str]]:
    """The wide table's columns less the optional ones no row has a value for (HTML report, --wide)."""
    return [(c.key, c.header, c.fmt) for c in _present(WIDE, rows)]


def _present(columns: list[Column], rows: list[TrialResult], state_when_needed: bool = False) -> list[Column]:
    """`columns` less the optional ones no row has a value for; with `state_when_needed`, less the state column
    when every trial is COMPLETE (the compact table)."""
    out = [c for c in columns if c.key not in OPTIONAL or any(r.column(c.key) is not None for r in rows)]
    if state_when_needed and all(r.state == TrialState.COMPLETE for r in rows):
        out = [c for c in out if c.key != "state"]
    return out


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
    if fmt == "load":
        rate = row.request_rate
        return f"conc {row.concurrency}" if rate is None else ("rate inf" if math.isinf(rate) else f"{rate:g}/s")
    if fmt == "best_label":
        return f"{row.label} *" if row.on_pareto_front else row.label
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


def named_columns(names: list[str]) -> list[Column]:
    """--columns: trial_results columns by name, each with the wide table's header and format where it has one.
    ValueError names the unknown ones and what exists."""
    known = {c.key: c for c in WIDE}
    fields = [f.name for f in dataclasses.fields(TrialResult)]
    unknown = [n for n in names if n not in fields]
    if unknown or not names:
        raise ValueError(f"--columns: unknown column(s) {', '.join(unknown) or '(none given)'}; the trial_results "
                         f"view has: {', '.join(fields)}")
    return [known.get(n) or Column(n, n, "{:.4g}") for n in names]


def _table(columns: list[Column], rows: list[TrialResult], title: str) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), title_justify="left")
    for c in columns:
        table.add_column(c.header, justify="left" if c.key in LEFT else "right", no_wrap=True, overflow="ignore")
    for r in rows:
        table.add_row(*[format_cell(r.column(c.key) if c.key != "load" else None, c.fmt, r) for c in columns],
                      style="red" if r.state == TrialState.FAIL else None)
    return table


def natural_width(table: Table, console: Console) -> int:
    """The width `table` takes when nothing is squeezed (rich would otherwise cut values to the console's width)."""
    return Measurement.get(console, console.options.update(width=100_000), table).maximum


@dataclass(frozen=True)
class FittedTable:
    table: Table
    width: int  # the table's natural width: print it at least this wide and no value is cut
    hidden: list[str]  # headers of the compact columns hidden to fit the console


def results_table(rows: list[TrialResult], title: str = "", console: Console | None = None,
                  view: str = "compact", names: list[str] | None = None) -> FittedTable:
    """The results table for `console` (its width): compact (hiding columns by HIDE_ORDER to fit), wide (every
    column) or the named columns."""
    if any(r.backend == "fake" for r in rows):
        title += "  [bold red](backend=fake: simulated, not a measurement)[/]"
    console = console or Console(width=100_000)
    compact = _present(COMPACT, rows, state_when_needed=True)
    columns = named_columns(names) if names else _present(WIDE, rows) if view == "wide" else compact
    hidden: list[str] = []
    table = _table(columns, rows, title)
    width = natural_width(table, console)
    if not names and view == "compact":
        for key in hide_order(rows):
            if width <= console.width:
                break
            drop = next((c for c in columns if c.key == key), None)
            if drop is not None:
                columns = [c for c in columns if c is not drop]
                hidden.append(drop.header)
                table = _table(columns, rows, title)
                width = natural_width(table, console)
        for header in list(reversed(hidden)):  # give back what still fits (the last hidden may have made room)
            trial = [c for c in compact if c in columns or c.header == header]
            wider = _table(trial, rows, title)
            wider_width = natural_width(wider, console)
            if wider_width <= console.width:
                columns, table, width = trial, wider, wider_width
                hidden.remove(header)
    return FittedTable(table, width, hidden)
