"""The report's verdict and figures, from constructed rows (no store, no browser): what the verdict says at
each load point follows from the speedups and their intervals; the figures carry the crossover, the
measured concurrencies as ticks, and say when no interval exists."""

from __future__ import annotations

import dataclasses
import json

import pytest

from orchestrator.report.content import ReportContext, ReportData, Verdict, verdicts
from orchestrator.report.figures import NO_INTERVAL_NOTE, build_figures
from orchestrator.states import TrialState
from orchestrator.store import CrossoverRow, RequestAcceptanceRow, TrialResult
from tests.records import record

_trial = iter(range(10_000))


_record = record


def row(label, k, conc, speedup, lo=None, hi=None, dataset="smoke", flags=None, **extra):
    trial = next(_trial)
    r = {"trial": trial, "trial_id": trial, "label": label, "method": label, "num_speculative_tokens": k,
         "concurrency": conc, "dataset": dataset, "speedup": speedup, "speedup_ci_low": lo, "speedup_ci_high": hi,
         "state": TrialState.COMPLETE, "flags": flags, "role": "search", "max_num_seqs": None, "max_num_batched_tokens": None,
         "output_tok_s": 100.0 * (speedup or 1), "tpot_ms_p99": 10.0 / (speedup or 1), "acceptance_length": 2.0,
         "acceptance_per_pos": json.dumps([0.8, 0.5]), "backend": "fake"}
    r.update(extra)
    return _record(TrialResult, **r)


def request(trial_id, request_al):
    return _record(RequestAcceptanceRow, trial_id=trial_id, request_al=request_al)


def baseline(conc, dataset="smoke"):
    return row("baseline", None, conc, None, dataset=dataset, role="paired_baseline", acceptance_length=None,
               acceptance_per_pos=None)


def test_faster_names_the_fastest_configuration_whose_interval_is_above_one():
    rows = [row("ngram", 3, 1, 1.40, 0.90, 1.90),  # higher point estimate, interval contains 1.0
            row("eagle3", 3, 1, 1.22, 1.10, 1.29), row("eagle3", 5, 1, 1.15, 1.05, 1.25), baseline(1)]
    (v,) = verdicts(rows)
    (c,) = v.clauses
    assert (c.kind, c.label, c.trial) == ("faster", "eagle3 K=3", rows[1].trial)
    assert v.sentence() == "smoke: At concurrency 1 eagle3 K=3 is 1.22× [1.10–1.29] faster than no speculation."


def test_slower_only_when_every_configuration_is_below_one_and_runs_are_merged():
    rows = [row("e", 3, 1, 1.3, 1.2, 1.4),
            row("e", 3, 2, 0.9, 0.8, 0.95), row("n", 2, 2, 0.97, 0.90, 1.02),  # n's interval contains 1: unclear
            row("e", 3, 4, 0.8, 0.7, 0.9), row("n", 2, 4, 0.85, 0.8, 0.9),
            row("e", 3, 8, 0.6, 0.5, 0.7), row("n", 2, 8, 0.7, 0.6, 0.8)]
    (v,) = verdicts(rows)
    assert [c.kind for c in v.clauses] == ["faster", "unclear", "slower", "slower"]
    assert v.sentence() == ("smoke: At concurrency 1 e K=3 is 1.30× [1.20–1.40] faster than no speculation; "
                            "at concurrency 2 no method is clearly faster or slower than no speculation "
                            "(best: n K=2 0.97× [0.90–1.02]); from concurrency 4 every method is slower than no "
                            "speculation.")
    # a run of slower points that does not reach the end is a range, a single one names its best configuration
    rows += [row("e", 3, 16, 1.1, 1.05, 1.2)]
    (v,) = verdicts(rows)
    assert "at concurrency 4–8 every method is slower" in v.sentence()
    (v,) = verdicts([row("e", 3, 1, 0.8, 0.7, 0.9), row("e", 3, 2, 1.2, 1.1, 1.3)])
    assert v.sentence().startswith("smoke: At concurrency 1 every method is slower than no speculation "
                                   "(best: e K=3 0.80× [0.70–0.90])")


def test_one_repeat_says_there_is_no_interval():
    (v,) = verdicts([row("e", 3, 1, 1.3), row("e", 3, 4, 0.8)])
    assert [c.kind for c in v.clauses] == ["no_interval", "no_interval"]
    assert v.sentence() == ("smoke: At concurrency 1 e K=3 is 1.30× (faster; 1 repeat: no interval); "
                            "at concurrency 4 e K=3 is 0.80× (slower; 1 repeat: no interval).")


def test_suspect_rows_say_so_and_datasets_are_separate():
    rows = [row("e", 3, 1, 1.5, 1.2, 1.8, flags="lossy?,noisy"), row("e", 3, 1, 1.1, 1.0, 1.2, dataset="code"),
            baseline(1, dataset="mt")]
    by = {v.dataset: v for v in verdicts(rows)}
    assert set(by) == {"code", "mt", "smoke"}
    assert by["smoke"].sentence().endswith("— flagged lossy?: see the table.")  # noisy is not a suspect flag
    assert by["code"].clauses[0].kind == "unclear"
    assert by["mt"].sentence() == "mt: no speculative row has a speedup (no paired baseline completed)."


def test_failed_rows_and_baselines_do_not_enter_the_verdict():
    rows = [row("e", 3, 1, 2.0, 1.9, 2.1, state=TrialState.FAIL), row("e", 5, 1, 1.2, 1.1, 1.3), baseline(1)]
    (v,) = verdicts(rows)
    assert v.clauses[0].label == "e K=5"


def _data(rows, crossover=()):
    ctx = ReportContext(sweep="s", store="sqlite://", spec_path=None, spec_hash=None, commits=(), backends=("fake",),
                        environments=(), environment_differences=(), workload=(), measurement=())
    done = [r for r in rows if r.state == TrialState.COMPLETE]
    return ReportData(sweep="s", rows=rows, completed=done, verdicts=verdicts(rows), context=ctx,
                      crossover=list(crossover))


def _fig(figs, name):
    (f,) = [f for f in figs if f.name == name]
    return json.loads(f.plotly_json)


@pytest.fixture(scope="module")
def grid_figures(tmp_path_factory):
    # throughput grows and p99 TPOT worsens with concurrency: every e point is on e's front ...
    rows = [row("e", 3, c, s, s - 0.05, s + 0.05, output_tok_s=100 * c * s, tpot_ms_p99=5.0 * c)
            for c, s in ((1, 1.4), (2, 1.1), (4, 0.9), (8, 0.7))]
    rows += [row("e", 3, 8, 0.5, 0.4, 0.6, dataset="other", output_tok_s=300, tpot_ms_p99=45)]  # ... but this one
    rows += [row("n", 2, c, s) for c, s in ((1, 1.2), (4, 1.05))] + [baseline(c) for c in (1, 2, 4, 8)]
    cross = [_record(CrossoverRow, label="e", num_speculative_tokens=3, dataset="smoke", crossover_concurrency=4)]
    out = tmp_path_factory.mktemp("figs")
    return build_figures(_data(rows, cross), out), out


def test_speedup_axis_has_the_measured_concurrencies_and_notes_missing_intervals(grid_figures):
    figs, out = grid_figures
    f = _fig(figs, "speedup")
    assert f["layout"]["xaxis"]["type"] == "log"
    assert f["layout"]["xaxis"]["tickvals"] == [1, 2, 4, 8] and f["layout"]["xaxis"]["ticktext"] == ["1", "2", "4", "8"]
    lines = {t["name"]: t for t in f["data"] if t.get("name")}
    assert lines["e K=3 / smoke"]["error_y"]["visible"] is True and lines["n K=2 / smoke"]["error_y"]["visible"] is False
    assert any(NO_INTERVAL_NOTE in a["text"] for a in f["layout"]["annotations"])
    for name in ("pareto", "speedup", "acceptance_by_position", "acceptance_length"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_note_when_every_point_has_an_interval(tmp_path):
    rows = [row("e", 3, c, 1.2, 1.1, 1.3) for c in (1, 2)] + [baseline(1), baseline(2)]
    f = _fig(build_figures(_data(rows), None), "speedup")
    assert not any(NO_INTERVAL_NOTE in a.get("text", "") for a in f["layout"].get("annotations", []))


def test_heat_map_outlines_the_crossover_cell(grid_figures):
    figs, _ = grid_figures
    f = _fig(figs, "heatmap-smoke")
    (hm,) = [t for t in f["data"] if t["type"] == "heatmap"]
    assert hm["y"] == ["e K=3", "n K=2"]
    assert f["layout"]["xaxis"]["ticktext"] == ["1", "2", "4", "8"]
    assert hm["z"][0] == [1.4, 1.1, 0.9, 0.7] and hm["z"][1] == [1.2, None, 1.05, None]
    assert "[1.35–1.45]" in hm["customdata"][0][0] and NO_INTERVAL_NOTE in hm["customdata"][1][0]
    (rect,) = [s for s in f["layout"]["shapes"] if s.get("name") == "crossover"]
    assert (rect["x0"], rect["x1"], rect["y0"], rect["y1"]) == (1.5, 2.5, -0.5, 0.5)  # column of concurrency 4, row e


def test_pareto_draws_a_front_per_method(grid_figures):
    figs, _ = grid_figures
    f = _fig(figs, "pareto")
    fronts = {t["name"]: t for t in f["data"] if t["mode"] == "lines"}
    assert set(fronts) == {"e K=3 front", "n K=2 front", "baseline front"}
    assert fronts["e K=3 front"]["x"] == [5.0, 10.0, 20.0, 40.0]  # the dominated point (45 ms, 300 tok/s) is not


def test_verdict_dataclass_sentence_with_no_clauses():
    assert Verdict("x", ()).sentence() == "x: no speculative row has a speedup (no paired baseline completed)."


def test_where_the_time_goes_per_token_request_al_and_al_by_position(tmp_path):
    """Issue 15's figures from constructed rows: the stacked bars are each part's ms per step over the tokens a
    step yields, baseline first at each concurrency; the histogram holds every request's AL of its method; AL
    by position is the median over load points per bucket. Rows without step timing draw no bars."""
    split = dict(verify_ms_per_step=20.0, drafter_ms_per_step=4.0, other_ms_per_step=6.0)
    rows = [row("e", 3, 1, 1.3, 1.2, 1.4, tokens_per_engine_step=2.0, al_by_position=json.dumps([2.0, 1.5]), **split),
            row("e", 3, 4, 0.9, 0.8, 1.0, tokens_per_engine_step=6.0, al_by_position=json.dumps([2.4, 1.3]),
                **dict(split, verify_ms_per_step=30.0)),
            row("e", 3, 8, 0.7, 0.6, 0.8, al_by_position=json.dumps([1.8, 1.0])),  # not timed: no bar
            row("n", 2, 1, 1.0, 0.9, 1.1),
            dataclasses.replace(baseline(1), tokens_per_engine_step=1.0, verify_ms_per_step=15.0,
                                drafter_ms_per_step=0.0, other_ms_per_step=5.0)]
    data = _data(rows)
    data.requests = [request(rows[0].trial, a) for a in (1.0, 1.5, 2.25, 3.0)]
    data.requests += [request(rows[3].trial, 1.25), request(-1, 2.0)]
    figs = build_figures(data, tmp_path)
    t = _fig(figs, "time_per_token")
    bars = {tr["name"]: dict(zip(tr["x"], tr["y"])) for tr in t["data"]}
    assert list(bars["target forward (verify)"]) == ["c=1 baseline", "c=1 e K=3", "c=4 e K=3"]
    assert bars["target forward (verify)"] == {"c=1 baseline": 15.0, "c=1 e K=3": 10.0, "c=4 e K=3": 5.0}
    assert bars["drafter"]["c=1 e K=3"] == 2.0 and bars["rest of the step"]["c=4 e K=3"] == 1.0
    h = {tr["name"]: tr["x"] for tr in _fig(figs, "request_al")["data"]}
    assert h == {"e K=3 (n=4)": [1.0, 1.5, 2.25, 3.0], "n K=2 (n=1)": [1.25]}  # a request of no shown trial: out
    pos = {tr["name"]: tr for tr in _fig(figs, "al_by_output_position")["data"]}
    assert pos["e K=3"]["x"] == [0, 16] and pos["e K=3"]["y"] == [2.0, 1.3]
    for name in ("time_per_token", "request_al", "al_by_output_position"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # no row timed, no request stats, no positions: none of the three figures
    plain = {f.name for f in build_figures(_data([row("n", 2, 1, 1.0, 0.9, 1.1), baseline(1)]), None)}
    assert not plain & {"time_per_token", "request_al", "al_by_output_position"}


def test_figure_medians_of_an_even_count_are_the_mean_of_the_middle_two():
    # as the store's medians are (statistics.median): two load points 1.0 and 2.0 give 1.5, not the upper 2.0
    from orchestrator.report.plotting import _median_by_index

    assert _median_by_index([[1.0, 4.0], [2.0, 2.0], [None, 3.0]]) == [1.5, 3.0]


def test_the_load_axis_names_the_offered_rate_where_it_differs_from_the_nominal(tmp_path):
    """Issue 51: a nominal rate whose windows offered another load (a raw draw, send lag) says so on the axis;
    one that offered it (the default exact schedule) is named plainly."""
    rows = [row("e", 3, 4, 1.1, request_rate=2.0, offered_rate=2.0000001, slo_attainment=1.0),
            row("e", 3, 4, 1.0, request_rate=4.0, offered_rate=3.2, slo_attainment=0.5)]
    f = _fig(build_figures(_data(rows), tmp_path), "load")
    assert f["layout"]["xaxis"]["categoryarray"] == ["2", "4 (offered 3.2)"]
