"""Everything specsweep prints: trial_results rows as a rich table, CSV or JSON; comparisons and query
results as tables; a running sweep's events and a drafter training's progress as console lines. No
computation here."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from rich.console import Console
from rich.table import Table

from .controller import events as ev

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


def table_columns(rows: list[dict]) -> list[tuple[str, str, str]]:
    """TABLE_COLUMNS less the optional ones no row has a value for."""
    return [c for c in TABLE_COLUMNS if c[0] not in OPTIONAL_COLUMNS or any(r.get(c[0]) is not None for r in rows)]


def _json_safe(v: Any) -> Any:
    """JSON has no infinity: a request rate of inf is written as the string "inf"."""
    return "inf" if isinstance(v, float) and math.isinf(v) else v


def _speedup(row: dict) -> str:
    s = row.get("speedup")
    if s is None:
        return "-" if row.get("role") != "paired_baseline" else "(baseline)"
    lo, hi = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    return f"{s:.2f} [{lo:.2f}-{hi:.2f}]" if lo is not None and hi is not None else f"{s:.2f}"


def format_cell(value: Any, fmt: str, row: dict | None = None) -> str:
    """A trial_results value as the results table shows it (console and HTML report)."""
    if fmt == "speedup":
        return _speedup(row or {})
    if value is None:
        return "-"
    if fmt in JOINED_CELLS:  # several columns of the row in one cell, "a/b/c"
        columns, number = JOINED_CELLS[fmt]
        r = row or {}
        return "/".join("-" if r.get(c) is None else number.format(r[c]) for c in columns)
    if fmt == "rate":
        return "inf" if math.isinf(value) else f"{value:g}"
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
    columns = table_columns(rows)
    for _, header, _ in columns:
        table.add_column(header, justify="left" if header in ("method", "dataset", "state", "flags") else "right")
    for r in rows:
        cells = [format_cell(r.get(col), fmt, r) for col, _, fmt in columns]
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
                  crossover: list[dict] | None = None, capacity: list[dict] | None = None) -> None:
    if fmt == "json":
        console.print_json(json.dumps([{k: _json_safe(v) for k, v in r.items()} for r in rows], default=str))
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
        for line in capacity_lines(capacity or []):
            console.print(f"capacity: {line}", highlight=False)
        flagged = [r for r in rows if r.get("flags")]
        for r in flagged:
            console.print(f"[yellow]trial {r['trial']} ({r['label']}, {r['dataset']}, {_load(r)}) "
                          f"flags:[/] {r['flags'].replace(',', ', ')}", highlight=False)
        if flagged:
            console.print("flags are explained in README.md (Flags); a flagged row's numbers are suspect")
        for r in rows:
            if r.get("state") == "FAIL" and r.get("error"):
                console.print(f"[red]trial {r['trial']} ({r['label']}, {_load(r)}) failed:[/] "
                              f"{r['error'].splitlines()[0][:300]}")


def _load(row: dict) -> str:
    from .controller.plan import load_text

    return load_text(row["concurrency"], row.get("request_rate"))


def capacity_lines(capacity: list[dict]) -> list[str]:
    """`results` of a capacity search: one line per configuration, with its ratio to the baseline."""
    out = []
    for c in capacity:
        k = "" if c["num_speculative_tokens"] is None else f" K={c['num_speculative_tokens']}"
        ratio = "" if c.get("capacity_ratio") is None or c["method"] == "baseline" else \
            f"; {c['capacity_ratio']:.2f}x the baseline's {c['baseline_max_rate_within_slo']:g} req/s"
        slo = ", ".join(f"{key} <= {v:g}" for key, v in (c.get("slo") or {}).items())
        out.append(f"{c['label']}{k} on {c['dataset']}: {capacity_text(c['status'], c['max_rate_within_slo'], c['first_failing_rate'])}"
                   f"{ratio} (>= {c['target_attainment']:.0%} of requests with {slo}; {len(c['probes'])} probes)")
    return out


class SweepConsole:
    """Turns a sweep's events (controller/events.py) into console lines and a progress bar: the one place
    where what a running sweep says is worded."""

    def __init__(self, console: Console, err_console: Console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console, self.err = console, err_console
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=console,
                                 transient=False, disable=not console.is_terminal)
        self.task = None
        self.log_folder_shown = False
        self.todo = 0  # trials this run measures
        self.done = 0
        self.t0 = 0.0

    def __enter__(self):
        self.progress.__enter__()
        return self

    def _count(self) -> str:
        """`[i/n]` and the time left, from the trials measured so far (when output is not a terminal, where
        no progress bar can be drawn: CI, `ray job submit`, a log file)."""
        import time

        self.done += 1
        if self.console.is_terminal or not self.todo:
            return ""
        elapsed = time.monotonic() - self.t0
        left = elapsed / self.done * max(0, self.todo - self.done)
        eta = "" if self.done >= self.todo else f", about {_duration(left)} left"
        return f"[{self.done}/{self.todo}, {_duration(elapsed)}{eta}] "

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def _status(self, text: str) -> None:
        if self.task is not None:
            self.progress.update(self.task, status=text)

    def _advance(self) -> None:
        if self.task is not None:
            self.progress.advance(self.task)

    @staticmethod
    def _k(k: int | None) -> str:
        return "" if k is None else f" K={k}"

    def __call__(self, event: ev.Event) -> None:
        c = self.console
        if isinstance(event, ev.SweepPlanned):
            engines = f" on {event.engines} engine configurations" if event.engines is not None else ""
            most = "at most " if event.sampler == "capacity" else ""
            c.print(f"sweep [bold]{event.sweep}[/] ({event.sampler}): {most}{event.todo} trials to run, {event.skipped} "
                    f"done before{engines} → {event.store}")
            self.task = self.progress.add_task(event.sweep, total=event.todo, status="")
            import time

            self.todo, self.done, self.t0 = event.todo, 0, time.monotonic()
        elif isinstance(event, ev.PoolSized):
            c.print(f"engines at once: {event.max_engines}")
        elif isinstance(event, ev.EngineRetired):
            if not c.is_terminal:
                c.print(f"engine {event.label} retired after {event.served} trials")
        elif isinstance(event, ev.Note):
            c.print(f"note: {event.message}")
        elif isinstance(event, ev.SweepWarning):
            self.err.print(f"[yellow]warning:[/] {event.message}")
        elif isinstance(event, ev.RayConnected):
            c.print(f"ray: {event.description}")
        elif isinstance(event, ev.EngineStarting):
            self._status(f"starting engine {event.label} ({event.config_hash})")
            if not c.is_terminal:
                c.print(f"starting engine {event.label} ({event.config_hash})")
        elif isinstance(event, ev.EngineReady):
            dtype = f"; dtype {event.dtype} ({event.dtype_reason})" if event.dtype else ""
            c.print(f"engine {event.label} ready in {event.start_s:.1f} s{dtype}", highlight=False)
            if event.log_path and not self.log_folder_shown:
                import os

                self.log_folder_shown = True
                c.print(f"engine logs (vLLM and third-party output, one file per engine; --verbose shows it here): "
                        f"{os.path.dirname(event.log_path)}", highlight=False)
        elif isinstance(event, ev.EngineFailed):
            from rich.markup import escape

            c.print(f"[red]engine {event.label} failed to start[/]: {escape(event.error[-6000:])}", highlight=False)
        elif isinstance(event, ev.TrialStarted):
            self._status(f"{event.trial.label}{self._k(event.trial.k)} {event.trial.load}")
        elif isinstance(event, ev.WindowDone):
            if not c.is_terminal:
                c.print(f"  {event.trial.label}{self._k(event.trial.k)} @ {event.trial.load}: "
                        f"window {event.windows} measured")
        elif isinstance(event, ev.TrialDone):
            s, t = event.summary, event.trial
            al = "" if s.acceptance_length is None else f", AL {s.acceptance_length:.2f}"
            tok = "-" if s.output_tok_s is None else f"{s.output_tok_s:.1f}"
            slo = "" if s.slo_attainment is None else f", SLO met by {s.slo_attainment:.0%}" + (
                "" if s.goodput_req_s is None else f" (goodput {s.goodput_req_s:.2f} req/s)")
            c.print(f"  {self._count()}{t.label}{self._k(t.k)} {t.dataset} @ {t.load}: {tok} out tok/s{al}{slo}")
            self._advance()
        elif isinstance(event, ev.TrialFailed):
            t = event.trial
            c.print(f"[red]  {self._count()}{t.label}{self._k(t.k)} @ {t.load} failed:[/] {event.error[:500]}")
            self._advance()
        elif isinstance(event, ev.CapacityFound):
            c.print(f"capacity {event.label}{self._k(event.k)} {event.dataset}: {capacity_text(event.status, event.max_rate_within_slo, event.first_failing_rate)} "
                    f"({event.probes} probes)", highlight=False)
        elif isinstance(event, ev.SweepInterrupted):
            c.print(f"[yellow]interrupted ({event.why}): the running trial is marked FAIL; completed trials are kept[/]")
        elif isinstance(event, ev.NightlySweepStarted):
            c.print(f"nightly: running {event.spec} as {event.sweep}")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def sweep_state_line(outcome) -> str:
    """The last word on a sweep: how many of its trials are COMPLETE, and what every other one is."""
    states = outcome.states
    done = states.get("COMPLETE", 0)
    if outcome.total and done == outcome.total:
        return f"sweep {outcome.sweep}: all {done} trials COMPLETE"
    rest = ", ".join(f"{n} {state}" for state, n in sorted(states.items()) if state != "COMPLETE" and n)
    hint = "run the same command again to resume" + ("" if not states.get("FAIL") else
                                                        "; --retry-failed runs FAIL trials again")
    return f"sweep {outcome.sweep}: {done} of {outcome.total} trials COMPLETE, not complete: {rest or 'none'} ({hint})"


def compare_table(rows: list[dict], metrics: tuple[str, ...], title: str) -> Table:
    """`specsweep compare`: A | B | B/A for each metric of each shared point."""
    table = Table(title=title)
    for h in ("method", "K", "dataset", "load", *[f"{m} A | B | B/A" for m in metrics]):
        table.add_column(h, justify="left" if h in ("method", "dataset") else "right")

    def f(v):
        return "-" if v is None else f"{v:.3g}"

    for r in rows:
        load = str(r["concurrency"]) if r.get("request_rate") is None else _load(r)
        table.add_row(r["label"], str(r["K"] if r["K"] is not None else "-"), r["dataset"], load,
                      *[f"{f(r[m + '_a'])} | {f(r[m + '_b'])} | {f(r[m + '_ratio'])}" for m in metrics])
    return table


def query_table(cols: list[str], rows: list[dict], title: str | None) -> Table:
    table = Table(title=title)
    for c in cols:
        table.add_column(c)
    for r in rows:
        table.add_row(*["" if r[c] is None else (f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c])) for c in cols])
    return table


class TrainProgress:
    """`specsweep drafters train` progress: a bar on a terminal, a line every 15 s (and at each stage's end)
    otherwise; a note that starts with "budget:" (a stage cut by the time budget) is always printed as a line."""

    def __init__(self, err_console: Console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.err = err_console
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=err_console,
                                 disable=not err_console.is_terminal)
        self.tasks: dict[str, Any] = {}
        self.last_print = 0.0

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def __call__(self, stage: str, done: int, total: int, note: str) -> None:
        import time

        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=total, status="")
        self.progress.update(self.tasks[stage], completed=done, total=total, status=note)
        now = time.monotonic()
        if note.startswith("budget:") or (not self.err.is_terminal and (now - self.last_print > 15 or done == total)):
            self.last_print = now
            self.err.print(f"{stage}: {done}/{total} {note}", highlight=False)


def capacity_text(status: str, passing: float | None, failing: float | None) -> str:
    """One configuration's capacity in words (run output, `results`)."""
    if status == "failed":
        return "search failed (a probe's trial failed; see its error)"
    if status == "above_max":
        return f"meets the SLO up to the highest rate probed, {passing:g} req/s (search.capacity.max_rate)"
    if status == "below_min" or passing is None:
        return f"misses the SLO even at {failing:g} req/s (search.capacity.min_rate)"
    bracket = f" (fails at {failing:g})" if failing is not None else ""
    limit = " [probe limit reached]" if status == "probe_limit" else ""
    return f"{passing:g} req/s within the SLO{bracket}{limit}"


def recommendation_lines(rec) -> list[str]:
    """`specsweep recommend`: the schedule, the evidence per concurrency, the ready --speculative-config."""
    out = [f"{rec.label} ({rec.method}) on {rec.dataset}: schedule {rec.schedule_text} "
           f"(batch sizes : K; best single K over the measured loads: {rec.best_fixed_k})"]
    for c in rec.choices:
        opts = "; ".join(("* " if o.k == c.k else "") + o.text() for o in c.options)
        proof = "" if c.proven else " [no interval: one repeat — measure with repeats before deploying]"
        out.append(f"  concurrency {c.concurrency}: K={c.k} — {c.reason}{proof}  ({opts})")
    if rec.speculative_config is None:
        out.append("  no K beats the baseline at any measured load: deploy without speculation")
    else:
        out.append(f"  --speculative-config '{json.dumps(rec.speculative_config, separators=(',', ':'))}'")
        from .methods.registry import get_method

        cost = get_method(rec.method).k0_cost
        if cost and any(k == 0 for _, _, k in rec.schedule):
            out.append(f"  caution: K = 0 is not free for {rec.method}: {cost}; verify with --verify")
    return out
