"""What a running sweep prints when its output is not a terminal (CI, `ray job submit`, a log file): no
progress bar can be drawn there, so every finished trial says how far the sweep is and the time left."""

from __future__ import annotations

import io
import re

from rich.console import Console

from orchestrator.controller import events as ev
from orchestrator.records import TrialSummary
from orchestrator.render import SweepConsole


def _run(is_terminal: bool, monkeypatch) -> str:
    clock = iter(range(0, 1000, 10))  # every call to the clock: 10 s later
    monkeypatch.setattr("time.monotonic", lambda: float(next(clock)))
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=is_terminal, width=200)
    out = SweepConsole(console, Console(file=io.StringIO()))
    with out:
        out(ev.SweepPlanned("s", 1, "grid", 3, 0, 1, "sqlite://"))
        out(ev.EngineReady("ngram", 12.5, "float32", "auto: this CPU has no native bfloat16"))
        for i in range(3):
            t = ev.TrialRef(i, "ngram", 3, 1 + i, "smoke")
            out(ev.TrialStarted(t, 1))
            if i == 1:
                out(ev.TrialFailed(t, "boom"))
            else:
                out(ev.TrialDone(t, TrialSummary(output_tok_s=50.0), ()))
    return buf.getvalue()


def test_progress_lines_without_a_terminal(monkeypatch):
    text = _run(False, monkeypatch)
    lines = [line for line in text.splitlines() if "concurrency" in line]
    assert re.search(r"\[1/3, 10 s, about 20 s left\] ngram K=3 smoke @ concurrency 1: 50\.0 out tok/s", lines[0]), text
    assert "[2/3, 20 s, about 10 s left]" in lines[1] and "failed" in lines[1], text  # failed trials count too
    assert "[3/3, 30 s] ngram K=3 smoke @ concurrency 3" in lines[2], text  # the last one: no time left to guess
    assert "engine ngram ready in 12.5 s; dtype float32 (auto: this CPU has no native bfloat16)" in text


def test_a_terminal_gets_the_bar_not_the_counts(monkeypatch):
    text = _run(True, monkeypatch)
    assert "[1/3" not in text and "left]" not in text


def test_drafter_training_lines_off_a_terminal_and_budget_notes_everywhere(monkeypatch):
    """`drafters train` off a terminal: a line every 15 s and at a stage's end; a stage cut by the time budget
    always says so as a line (on a terminal too, where the bar would hide it)."""
    from orchestrator.render import TrainProgress

    now = [100.0]
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    for terminal in (False, True):
        buf = io.StringIO()
        with TrainProgress(Console(file=buf, force_terminal=terminal, width=200)) as progress:
            progress("responses", 128, 1000, "12000 tokens")
            now[0] += 5
            progress("responses", 256, 1000, "24000 tokens")  # 5 s later: no line
            progress("responses", 640, 1000, "budget: 640 of 1000 prompts")
            now[0] += 20
            progress("training", 10, 400, "loss 3.1")
        text = buf.getvalue()
        assert "budget: 640 of 1000 prompts" in text, (terminal, text)
        if not terminal:
            lines = [line for line in text.splitlines() if line.strip()]
            assert lines == ["responses: 128/1000 12000 tokens", "responses: 640/1000 budget: 640 of 1000 prompts",
                             "training: 10/400 loss 3.1"], lines
