"""Nightly regression runs through real Ray and SQLite/PostgreSQL with the fake backend: nights of history
with injected per-window noise, a night on another fingerprint (excluded), a night with an injected slowdown
(detected, exit 3, report) and a night of plain noise (no regression); the suite lease; verdict arithmetic."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.nightly import verdict_for
from orchestrator.store import Store

SPEC = """
name: nightly-fake
target: {{model: fake-model}}
engine: {{backend: fake, fake: {{step_seconds: {step}, noise: 0.02, noise_seed: {night}, seed: {night}}}}}
workload: {{dataset: smoke, num_prompts: 6, max_tokens: 24, ignore_eos: true}}
methods:
  ngram: {{num_speculative_tokens: 2}}
space: {{concurrency: [2]}}
measurement: {{repeats: 3, order: blocked, warmup_requests: 1, discard_first_window: false}}
"""
SUITE = """
suite: fake-suite
sweeps: [sweep.yaml]
history: 7
min_history: 3
thresholds:
  output_tok_s: {direction: higher_is_better, threshold: 0.25}
  tpot_ms_p50: {direction: lower_is_better, threshold: 0.4}
"""


def test_verdicts():
    hist = [100, 102, 98, 101, 99]
    assert verdict_for(70, hist, direction="higher_is_better", threshold=0.1, min_history=3)[0] == "regression"
    assert verdict_for(93, hist, direction="higher_is_better", threshold=0.1, min_history=3)[0] == "suspicious"
    assert verdict_for(70, hist, direction="higher_is_better", threshold=0.1, min_history=3, noisy=True)[0] == "suspicious"
    assert verdict_for(130, hist, direction="higher_is_better", threshold=0.1, min_history=3)[0] == "ok"
    assert verdict_for(130, hist, direction="lower_is_better", threshold=0.2, min_history=3)[0] == "regression"
    v, med, change = verdict_for(90, [100, 100], direction="higher_is_better", threshold=0.1, min_history=3)
    assert v == "insufficient data" and med == 100 and change is None


def test_nights_of_history_a_regression_and_plain_noise(ray_session, store_url, tmp_path):
    """On SQLite and PostgreSQL: four nights of history, a night on another fingerprint (excluded from every
    later history), a night with an injected slowdown (exit 3, report) and a night of plain noise."""
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    runner = CliRunner()

    def night(n: int, step: float = 0.02, dtype: str = "bfloat16"):
        text = SPEC.format(step=step, night=n).replace("{model: fake-model}", f"{{model: fake-model, dtype: {dtype}}}")
        (tmp_path / "sweep.yaml").write_text(text)
        return runner.invoke(app, ["nightly", str(suite), "--store", store_url, "--report-dir", str(tmp_path / "r")])

    for n in range(4):
        res = night(n)
        assert res.exit_code == 0, res.output
    st = Store(store_url)
    first = st.nightly_history(1)
    assert first and {r.verdict for r in first} == {"insufficient data"}  # no history on night 1
    assert {r.history_n for r in st.nightly_history(4)} == {3}  # nights 1-3 before night 4
    # night 5 runs in another environment (dtype): nothing before it is comparable, and it is no history later
    res = night(4, dtype="float32")
    assert res.exit_code == 0, res.output
    other = st.nightly_history(5)
    assert {(r.verdict, r.history_n) for r in other} == {("insufficient data", 0)}
    assert all("4 previous nights excluded: different environment fingerprint" in r.note for r in other)
    # night 6: every engine step twice as slow -> throughput halves, TPOT doubles (steps of 20 ms, not 4: on a
    # loaded 2-core CI machine the per-step overhead of 4 ms steps hid the slowdown of ngram's fewer steps)
    res = night(5, step=0.04)
    assert res.exit_code == 3, res.output
    assert "regression" in res.output
    bad = [r for r in st.nightly_history(6) if r.verdict == "regression"]
    assert {(r.label, r.metric) for r in bad} >= {("ngram", "output_tok_s"), ("ngram", "tpot_ms_p50")}
    assert all(r.history_n == 4 and "1 previous nights excluded" in r.note for r in bad)  # night 5 left out
    report = (tmp_path / "r" / "nightly-fake-suite-6.md").read_text()
    assert "**regression**" in report and "output_tok_s" in report
    # night 7: plain noise again (the regressed night is in its history, the median shrugs it off)
    res = night(6)
    assert res.exit_code == 0, res.output
    assert {r.history_n for r in st.nightly_history(7)} == {5}
    assert not [r for r in st.nightly_history(7) if r.verdict == "regression"]
    # the saved query users run
    res = runner.invoke(app, ["query", "--saved", "nightly-regressions", "--store", store_url, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert {(r["metric"], r["verdict"]) for r in json.loads(res.stdout)} >= {("output_tok_s", "regression")}
    # night 8: steps 18.5 % slower -> throughput ~15.6 % lower, between half the threshold (12.5 %) and the
    # threshold (25 %): suspicious, not a regression (exit 0); TPOT +18.5 % stays under half its 40 %: ok.
    # (Simulated time: the only scatter is the injected 2 % noise.)
    res = night(7, step=0.0237)
    assert res.exit_code == 0, res.output
    verdicts = {(r.label, r.metric): r.verdict for r in st.nightly_history(8)}
    assert verdicts == {(label, metric): verdict for label in ("baseline", "ngram")  # (its paired baseline too)
                        for metric, verdict in (("output_tok_s", "suspicious"), ("tpot_ms_p50", "ok"))}, verdicts
    assert "0 regressions, 2 suspicious" in res.output, res.output
    # night 9 with `history: 3`: only the last three nights are history (without the limit: 7, six comparable)
    suite.write_text(SUITE.replace("history: 7", "history: 3"))
    res = night(8)
    assert res.exit_code == 0, res.output
    assert {r.history_n for r in st.nightly_history(9)} == {3}


def test_two_nightly_runs_never_overlap(ray_session, store_url, tmp_path):
    """The suite lease on SQLite and PostgreSQL (there a held lease is met by the insert's IntegrityError)."""
    sqlite_url = store_url
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    (tmp_path / "sweep.yaml").write_text(SPEC.format(step=0.002, night=0))
    st = Store(sqlite_url)
    assert st.acquire_lease("nightly:fake-suite", "otherhost:123:x", "otherhost", 123, 3600).acquired  # another run
    res = CliRunner().invoke(app, ["nightly", str(suite), "--store", sqlite_url])
    assert res.exit_code == 2 and "otherhost pid 123" in res.output and "--break-lease" in res.output
    res = CliRunner().invoke(app, ["nightly", str(suite), "--store", sqlite_url, "--break-lease",
                                   "--report-dir", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert st.lease_holder("nightly:fake-suite") is None  # released after the run


def test_bad_suite_file(tmp_path, sqlite_url):
    suite = tmp_path / "suite.yaml"
    suite.write_text("suite: s\nsweeps: [missing.yaml]\nthresholds: {bogus_metric: {direction: higher_is_better, threshold: 0.1}}\n")
    res = CliRunner().invoke(app, ["nightly", str(suite), "--store", sqlite_url])
    assert res.exit_code == 2
    assert "thresholds.bogus_metric" in res.output and "no such file" in res.output
