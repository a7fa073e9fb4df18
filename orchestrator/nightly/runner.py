"""Run a nightly suite: take the suite's lock, run each sweep as `<spec name>@<night>`, compare every
completed point (same spec, same parameters) with the median of the previous nights whose environment
fingerprint matches, store one verdict per metric, write a report, release the lock."""

from __future__ import annotations

import datetime as dt
import socket
from dataclasses import dataclass, field
from pathlib import Path

from ..controller.events import Listener, NightlySweepStarted, Note, ignore
from ..controller.lease import Lease
from ..spec import load_spec
from ..states import TrialState
from ..store import EnvironmentRow, NewVerdict, Store, TrialResult
from ..validity import fingerprint_diff
from .suite import SuiteSpec
from .verdict import verdict_for


@dataclass
class NightlyOutcome:
    run_id: int
    status: str  # ok | regression | failed
    regressions: int = 0
    suspicious: int = 0
    insufficient: int = 0
    sweeps: list[str] = field(default_factory=list)
    failed_trials: int = 0
    report: Path | None = None


def run_nightly(suite: SuiteSpec, sweep_files: list[Path], store: Store, *, ray_address: str | None = None,
                report_dir: Path | None = None, break_lease: bool = False, emit: Listener = ignore) -> NightlyOutcome:
    """Raises LeaseHeld when another live run of the suite holds its lease."""
    with Lease(store, f"nightly:{suite.suite}", f"nightly suite {suite.suite!r}", force=break_lease,
               note=lambda message: emit(Note(message))):
        return _run_night(suite, sweep_files, store, ray_address, report_dir, emit)


def _run_night(suite: SuiteSpec, sweep_files: list[Path], store: Store, ray_address: str | None,
               report_dir: Path | None, emit: Listener) -> NightlyOutcome:
    from ..controller.runner import run_sweep

    run_id = store.create_nightly_run(suite.suite, suite.history, socket.gethostname())
    outcome = NightlyOutcome(run_id=run_id, status="failed")
    try:
        night = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
        verdict_rows: list[NewVerdict] = []
        for f in sweep_files:
            loaded = load_spec(f)
            name = f"{loaded.spec.name}@{night}-{run_id}"
            emit(NightlySweepStarted(spec=str(f), sweep=name))
            out = run_sweep(loaded, store, ray_address=ray_address, new_name=name)
            outcome.sweeps.append(name)
            outcome.failed_trials += out.failed
            store.add_nightly_sweep(run_id, out.sweep_id, loaded.spec.name)
            verdict_rows += _verdicts(suite, store, run_id, out.sweep_id, loaded.spec.name)
        store.add_verdicts(verdict_rows)
        outcome.regressions = sum(1 for v in verdict_rows if v.verdict == "regression")
        outcome.suspicious = sum(1 for v in verdict_rows if v.verdict == "suspicious")
        outcome.insufficient = sum(1 for v in verdict_rows if v.verdict == "insufficient data")
        outcome.status = "regression" if outcome.regressions else "ok"
        store.finish_nightly_run(run_id, outcome.status, outcome.regressions)
        if report_dir is not None:
            outcome.report = write_report(store, run_id, suite, Path(report_dir))
        return outcome
    except BaseException:
        store.finish_nightly_run(run_id, "failed", outcome.regressions)
        raise


def _verdicts(suite: SuiteSpec, store: Store, run_id: int, sweep_id: int, spec_name: str) -> list[NewVerdict]:
    tonight = [r for r in store.trial_results_by_id(sweep_id) if r.state == TrialState.COMPLETE]
    previous = store.previous_nightly_sweeps(suite.suite, spec_name, run_id, suite.history)
    history_rows: dict[str, list[TrialResult]] = {}
    for sid in previous:
        for r in store.trial_results_by_id(sid):
            if r.state == TrialState.COMPLETE:
                history_rows.setdefault(r.point_key, []).append(r)
    env_cache: dict[int | None, EnvironmentRow | None] = {}

    def env(eid: int | None) -> EnvironmentRow | None:
        if eid not in env_cache:
            env_cache[eid] = store.environment(eid)
        return env_cache[eid]

    out = []
    for r in tonight:
        mine = env(r.environment_id)
        comparable, excluded = [], 0
        for h in history_rows.get(r.point_key, []):
            if fingerprint_diff(mine, env(h.environment_id), same_method=True, allow=suite.allow_mismatch):
                excluded += 1
            else:
                comparable.append(h)
        noisy = "noisy" in (r.flags or "").split(",")
        for metric, th in suite.thresholds.items():
            verdict, med, change = verdict_for(r.metric(metric), [h.metric(metric) for h in comparable],
                                               direction=th.direction, threshold=th.threshold,
                                               min_history=suite.min_history, noisy=noisy)
            if r.metric(metric) is None and verdict == "insufficient data" and metric == "acceptance_length" \
                    and r.num_speculative_tokens is None:
                continue  # no acceptance length without speculation: nothing to judge
            note = f"{excluded} previous nights excluded: different environment fingerprint" if excluded else None
            out.append(NewVerdict(run_id=run_id, trial_id=r.trial_id, spec_name=spec_name, point_key=r.point_key,
                                  metric=metric, value=r.metric(metric), history_median=med,
                                  history_n=len(comparable), change=change, threshold=th.threshold, verdict=verdict,
                                  note=note))
    return out


def write_report(store: Store, run_id: int, suite: SuiteSpec, out_dir: Path) -> Path:
    """A markdown report of the night: every verdict other than ok first, then the counts."""
    rows = store.nightly_history(run_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"nightly-{suite.suite}-{run_id}.md"
    bad = [r for r in rows if r.verdict != "ok"]
    lines = [f"# Nightly {suite.suite} — run {run_id}", "",
             f"{len(rows)} verdicts: " + ", ".join(f"{v} {sum(1 for r in rows if r.verdict == v)}"
                                                 for v in ("regression", "suspicious", "ok", "insufficient data")), ""]
    if bad:
        lines += ["| verdict | sweep | method | K | dataset | conc | metric | tonight | median of previous | change | nights |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(bad, key=lambda r: (r.verdict != "regression", r.spec_name, r.label)):
            f = lambda v, p="{:.3g}": "-" if v is None else p.format(v)  # noqa: E731
            lines.append(f"| **{r.verdict}** | {r.sweep} | {r.label} | {r.num_speculative_tokens or '-'} | "
                         f"{r.dataset} | {r.concurrency} | {r.metric} | {f(r.value)} | "
                         f"{f(r.history_median)} | {f(r.change, '{:+.1%}')} | {r.history_n} |")
    else:
        lines.append("No regression, nothing suspicious.")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
