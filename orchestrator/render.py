"""Render trial_results rows as a rich table, CSV or JSON (no computation here)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table

# (column in trial_results, header, format)
TABLE_COLUMNS = [
    ("trial", "#", "{}"),
    ("label", "method", "{}"),
    ("num_speculative_tokens", "K", "{}"),
    ("dataset", "dataset", "{}"),
    ("concurrency", "conc", "{}"),
    ("output_tok_s", "out tok/s", "{:.1f}"),
    ("req_s", "req/s", "{:.2f}"),
    ("ttft_ms_p50", "TTFT p50 ms", "{:.0f}"),
    ("ttft_ms_p99", "TTFT p99 ms", "{:.0f}"),
    ("tpot_ms_p50", "TPOT p50 ms", "{:.1f}"),
    ("itl_ms_p50", "ITL p50 ms", "{:.1f}"),
    ("e2e_ms_p50", "e2e p50 ms", "{:.0f}"),
    ("acceptance_length", "AL", "{:.2f}"),
    ("acceptance_rate", "acc rate", "{:.2f}"),
    ("state", "state", "{}"),
    ("on_pareto_front", "best", "flag"),
]


def _fmt(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "flag":  # booleans come back as 0/1 from SQLite views
        return "*" if value else ""
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def results_table(rows: list[dict], title: str = "") -> Table:
    backends = sorted({r["backend"] for r in rows})
    if "fake" in backends:
        title += "  [bold red](backend=fake: simulated, not a measurement)[/]"
    table = Table(title=title, show_lines=False)
    for _, header, _ in TABLE_COLUMNS:
        table.add_column(header, justify="left" if header in ("method", "dataset", "state") else "right")
    for r in rows:
        cells = [_fmt(r.get(col), fmt) for col, _, fmt in TABLE_COLUMNS]
        style = "red" if r.get("state") == "FAIL" else None
        table.add_row(*cells, style=style)
    return table


def print_results(rows: list[dict], fmt: str, console: Console, title: str = "") -> None:
    if fmt == "json":
        console.print_json(json.dumps(rows, default=str))
    elif fmt == "csv":
        buf = io.StringIO()
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]))
            w.writeheader()
            for r in rows:
                w.writerow({k: ("" if v is None else v) for k, v in r.items()})
        console.file.write(buf.getvalue())
        console.file.flush()
    else:
        console.print(results_table(rows, title))
        for r in rows:
            if r.get("state") == "FAIL" and r.get("error"):
                console.print(f"[red]trial {r['trial']} ({r['label']}, concurrency {r['concurrency']}) failed:[/] "
                              f"{r['error'].splitlines()[0][:300]}")
