"""The results table never cuts a value: rendered at 80, 100, 120 and 160 columns, every cell it shows is whole,
the speedup cell is the stored figure formatted, and hidden columns are named in the footer. Pure."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from orchestrator.render import print_results
from orchestrator.render.results_table import COMPACT, format_cell, hide_order, named_columns
from orchestrator.states import TrialRole, TrialState
from tests.records import trial_result

pytestmark = pytest.mark.pure


def demo_rows(fail: bool = False):
    """Rows shaped like `make demo`'s (sweeps/smoke-cpu.yaml) and the drafter demo's: long labels and flags."""
    rows, trial = [], 0
    for label, method, k in [("baseline", "baseline", None), ("ngram", "ngram", 4), ("eagle3-demo", "eagle3", 3),
                             ("dflash-demo", "dflash", 3), ("xpress-demo-2-passes", "xpress", 3)]:
        for conc in (1, 4, 16):
            trial += 1
            base = label == "baseline"
            rows.append(trial_result(
                sweep="demo-cpu", trial=trial, label=label, method=method, backend="vllm", num_speculative_tokens=k,
                dataset="demo-heldout", concurrency=conc, output_tok_s=1234.5678 / conc, ttft_ms_p50=85.3 * conc,
                tpot_ms_p50=12.345 * conc, acceptance_length=None if base else 1.8743,
                speedup=None if base else 1.0 + 0.1234 * conc, speedup_ci_low=None if base else 0.9012,
                speedup_ci_high=None if base else 2.4056, greedy_match_rate=1.0 if base else 0.25,
                role=TrialRole.PAIRED_BASELINE if base else TrialRole.SEARCH,
                state=TrialState.FAIL if fail and trial == 7 else TrialState.COMPLETE,
                on_pareto_front=trial == 14, flags=None if base else "lossy?,noisy,fingerprint_mismatch"))
    return rows


def render(rows, width: int, **kw) -> str:
    out = io.StringIO()
    print_results(rows, "table", Console(file=out, width=width, color_system=None, legacy_windows=False),
                  title="sweep demo-cpu", **kw)
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 100, 120, 160])
@pytest.mark.parametrize("fail", [False, True])
def test_no_value_is_cut_at_any_width(width, fail):
    rows = demo_rows(fail)
    text = render(rows, width)
    assert "…" not in text, text
    table_lines = text.split("hidden:")[0].splitlines()
    assert max(len(line) for line in table_lines) <= width or width < 100, text
    hidden = re.search(r"hidden: (.*) \(--wide shows every column\)", text)
    shown = [c for c in COMPACT if not hidden or c.header not in hidden.group(1).split(", ")]
    if not fail:
        shown = [c for c in shown if c.key != "state"]  # only when some trial is not COMPLETE
    for r in rows:
        for c in shown:
            if c.key == "slo_attainment":
                continue  # no SLO in this sweep: the column is not shown at all
            cell = format_cell(r.column(c.key) if c.key != "load" else None, c.fmt, r)
            assert cell in text, (width, c.key, cell, text)
    for r in rows:
        if r.speedup is not None:
            assert f"{r.speedup:.2f} [{r.speedup_ci_low:.2f}-{r.speedup_ci_high:.2f}]" in text
    assert ("FAIL" in text) is fail  # the state column appears only when a trial is not COMPLETE
    assert "xpress-demo-2-passes *" in text and "* best:" in text
    if width >= 160:
        assert hidden is None, text
    if width <= 100:
        assert hidden is not None, text
        names = hidden.group(1).split(", ")
        assert set(names) <= {c.header for k in hide_order(rows) for c in COMPACT if c.key == k}, text
        assert names[0] == "dataset", text  # one dataset: it tells no row apart, so it goes first


def test_the_demo_sweep_fits_100_columns_with_its_answer():
    """The demo's sweep (one dataset name short enough) shows method, K, load, tok/s, speedup, AL and the flags
    in 100 columns."""
    rows = [r for r in demo_rows() if r.label in ("baseline", "ngram")]
    for r in rows:
        object.__setattr__(r, "dataset", "smoke")
        object.__setattr__(r, "flags", "lossy?" if r.label == "ngram" else None)
        object.__setattr__(r, "on_pareto_front", False)
    text = render(rows, 100)
    assert "hidden:" not in text and "…" not in text, text
    header = [line for line in text.splitlines() if "speedup [CI]" in line][0]
    for h in ("method", "K", "dataset", "load", "tok/s", "speedup [CI]", "AL", "TTFT ms", "TPOT ms", "flags"):
        assert h in header, header


def test_wide_and_named_columns():
    rows = demo_rows()
    text = render(rows, 100, view="wide")
    for h in ("same out", "state", "best", "conc"):
        assert h in text, h
    assert "…" not in text and "hidden:" not in text
    text = render(rows, 80, names=["label", "concurrency", "greedy_match_rate", "params"])
    header = [line for line in text.splitlines() if "method" in line][0]
    assert header.split() == ["method", "conc", "same", "out", "params"], header
    assert "0.25" in text and "…" not in text
    with pytest.raises(ValueError, match="unknown column.*nope.*the trial_results view has: sweep, trial"):
        named_columns(["label", "nope"])


def test_query_and_compare_tables_are_printed_whole():
    from orchestrator.render import print_table, query_table

    out = io.StringIO()
    long = "fingerprint_mismatch:" + "x" * 120
    print_table(Console(file=out, width=80, color_system=None), query_table(["flags", "n"], [{"flags": long, "n": 1}],
                                                                            "saved"))
    assert long in out.getvalue(), out.getvalue()


def test_crossover_lines_say_where_the_speedup_first_drops_below_one():
    from orchestrator.render.lines import crossover_lines
    from orchestrator.store import CrossoverRow

    def row(crossover, best):
        return CrossoverRow(sweep="s", label="dflash", method="dflash", num_speculative_tokens=3, drafter=None,
                            max_num_seqs=None, max_num_batched_tokens=None, dataset="smoke",
                            crossover_concurrency=crossover, min_concurrency=1, max_concurrency=16, best_speedup=best)

    below_at_4, dips_at_1, never = crossover_lines([row(4, 1.3), row(1, 1.04), row(None, 1.2)])
    assert below_at_4 == "dflash K=3 on smoke: speedup first below 1.0 at concurrency 4 (measured 1-16, best speedup 1.30)"
    # below 1.0 at the lowest concurrency yet 1.04 somewhere: a higher one (the demo's DFlash row, 2026-12-08)
    assert dips_at_1.endswith("first below 1.0 at concurrency 1 (and >= 1.0 again at a higher one) (measured 1-16, "
                              "best speedup 1.04)")
    assert "no crossover in range" in never
