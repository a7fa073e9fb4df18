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
    ("speedup", "speedup [CI]", "speedup"),
    ("ttft_ms_p50", "TTFT p50 ms", "{:.0f}"),
    ("tpot_ms_p50", "TPOT p50 ms", "{:.1f}"),
    ("acceptance_length", "AL", "{:.2f}"),
    ("greedy_match_rate", "same out", "{:.2f}"),
    ("state", "state", "{}"),
    ("on_pareto_front", "best", "flag"),
    ("flags", "flags", "{}"),
]


def _speedup(row: dict) -> str:
    s = row.get("speedup")
    if s is None:
        return "-" if row.get("role") != "paired_baseline" else "(baseline)"
    lo, hi = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    return f"{s:.2f} [{lo:.2f}-{hi:.2f}]" if lo is not None and hi is not None else f"{s:.2f}"


def _fmt(value: Any, fmt: str, row: dict | None = None) -> str:
    if fmt == "speedup":
        return _speedup(row or {})
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
        table.add_column(header, justify="left" if header in ("method", "dataset", "state", "flags") else "right")
    for r in rows:
        cells = [_fmt(r.get(col), fmt, r) for col, _, fmt in TABLE_COLUMNS]
        style = "red" if r.get("state") == "FAIL" else None
        table.add_row(*cells, style=style)
    return table


def crossover_lines(crossover: list[dict]) -> list[str]:
    """One line per method configuration and dataset: where speculation stops paying."""
    out = []
    for c in crossover:
        k = "" if c["num_speculative_tokens"] is None else f" K={c['num_speculative_tokens']}"
        seqs = "" if c["max_num_seqs"] is None else f" max_num_seqs={c['max_num_seqs']}"
        where = (f"speedup below 1.0 from concurrency {c['crossover_concurrency']}" if c["crossover_concurrency"]
                 is not None else "no crossover in range (speedup >= 1.0 throughout)")
        out.append(f"{c['label']}{k}{seqs} on {c['dataset']}: {where} (measured {c['min_concurrency']}-"
                   f"{c['max_concurrency']}, best speedup {c['best_speedup']:.2f})")
    return out


def print_results(rows: list[dict], fmt: str, console: Console, title: str = "",
                  crossover: list[dict] | None = None) -> None:
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
        for line in crossover_lines(crossover or []):
            console.print(f"crossover: {line}")
        flagged = [r for r in rows if r.get("flags")]
        for r in flagged:
            console.print(f"[yellow]trial {r['trial']} ({r['label']}, {r['dataset']}, concurrency {r['concurrency']}) "
                          f"flags:[/] {r['flags'].replace(',', ', ')}", highlight=False)
        if flagged:
            console.print("flags are explained in README.md (Flags); a flagged row's numbers are suspect")
        for r in rows:
            if r.get("state") == "FAIL" and r.get("error"):
                console.print(f"[red]trial {r['trial']} ({r['label']}, concurrency {r['concurrency']}) failed:[/] "
                              f"{r['error'].splitlines()[0][:300]}")
