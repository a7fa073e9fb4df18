"""What a running command shows: the consoles, a sweep's events as lines and a progress bar, a training's
progress."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import TaskID

from ..controller import events as ev

if TYPE_CHECKING:
    pass
from .lines import capacity_text


def _width(stream: object) -> int | None:
    """The terminal's width; not a terminal (ray job logs, CI, pipes): $COLUMNS when set, else a wide 160."""
    if getattr(stream, "isatty", lambda: False)() or os.environ.get("COLUMNS", "").isdigit():
        return None  # rich reads the terminal, or $COLUMNS
    return 160


console = Console(stderr=False, width=_width(sys.stdout))
err_console = Console(stderr=True, width=_width(sys.stderr))


class SweepConsole:
    """Turns a sweep's events (controller/events.py) into console lines and a progress bar: the one place
    where what a running sweep says is worded."""

    def __init__(self, console: Console, err_console: Console):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console, self.err = console, err_console
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=console,
                                 transient=False, disable=not console.is_terminal)
        self.task: TaskID | None = None
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
        elif isinstance(event, ev.StoreUnreachable):
            self.err.print(f"[yellow]store unreachable:[/] {event.store}: {event.reason}; retrying for up to "
                           f"{event.retry_s:g} s (SPECSWEEP_STORE_RETRY_S)", highlight=False, soft_wrap=True)
        elif isinstance(event, ev.StoreReachable):
            self.err.print(f"store reachable again after {_duration(event.after_s)}: {event.store}", highlight=False)
        elif isinstance(event, ev.RayConnected):
            c.print(f"ray: {event.description}")
        elif isinstance(event, (ev.EngineStarting, ev.EngineReady, ev.EngineFailed)):
            self._engine(event)
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


    def _engine(self, event: ev.EngineStarting | ev.EngineReady | ev.EngineFailed) -> None:
        c = self.console
        if isinstance(event, ev.EngineStarting):
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
        else:
            from rich.markup import escape

            c.print(f"[red]engine {event.label} failed to start[/]: {escape(event.error[-6000:])}", highlight=False)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


class TrainProgress:
    """`specsweep drafters train` progress: a bar on a terminal, a line every 15 s (and at each stage's end)
    otherwise; a note that starts with "budget:" (a stage cut by the time budget) is always printed as a line."""

    def __init__(self, err_console: Console):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

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
