"""search.sampler: capacity — per engine configuration, the highest request rate whose SLO attainment stays at or
above a target.

Each configuration (method point x engine settings x dataset, and the no-speculation baseline's) gets its own
search: probe `start_rate`; while probes pass, double the rate (up to `max_rate`); while they fail, halve it
(down to `min_rate`); once one rate passes and a higher one fails, bisect (geometric midpoint, three significant
digits) until failing / passing <= 1 + resolution or `max_probes` is spent. A probe is a trial at that rate,
measured with `measurement.repeats` windows on the same warm engine; its attainment is the median over them.
The result is a bracket: `max_rate_within_slo` (the highest passing rate) and `first_failing_rate` (the lowest
failing one): the capacity lies between them.

Rates are offered rates (issue 51): a probe is placed at a nominal rate, but the bracket, the bisection and the
result use the rate its windows really offered (the median of their `offered_rate`, from the send times), so the
capacity figure is the load the engine was seen to carry. With the default `workload.schedule: exact` the two
agree to rounding; with `raw` schedules of a few prompts they scatter by ~1/sqrt(n) (+-25 % at 16 prompts), and a
bracket on the nominal rate would inherit that error. A probe without an offered rate (a failed trial; rows of
earlier versions) counts at its nominal rate.

Resume: probes are trials like any other; a rerun replays the stored ones (same point key) without engine
time, so a killed search continues where it stopped and a finished one is rebuilt from its rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..records import TrialSummary
from ..spec.models import CapacitySpec
from ..states import TrialRole, TrialState
from ..store import NewCapacity, Store, TrialRow
from .plan import PlannedTrial, SearchSpace, point_key
from .pool import EnginePool, TrialRun


def round_rate(rate: float) -> float:
    """Three significant digits: probe rates (and so point keys) stay readable and repeatable."""
    return float(f"{rate:.3g}")


@dataclass(frozen=True)
class Probe:
    rate: float  # the nominal rate the probe was placed at
    attainment: float | None  # None: the probe's trial failed
    trial_id: int | None = None
    offered_rate: float | None = None  # what its windows really offered (median); None: not measured

    @property
    def load(self) -> float:
        """The rate the search counts the probe at: offered when measured, else nominal; three significant digits
        as the probe rates (so an exact schedule's offered rate, equal to the nominal one but for float rounding,
        counts as the nominal rate itself)."""
        return round_rate(self.offered_rate) if self.offered_rate is not None else self.rate


@dataclass
class CapacitySearch:
    """The bracketing / bisection state of one configuration (pure: no I/O)."""

    settings: CapacitySpec
    rate: float = 0.0  # the next rate to probe
    passing: float | None = None  # highest rate that met the target
    failing: float | None = None  # lowest rate that missed it
    probes: list[Probe] = field(default_factory=list)
    # None while searching; bracketed | above_max | below_min | probe_limit | failed | non_monotone (a rate passed
    # above one that failed: noise, repeat more) | stalled (the next probe would repeat one: the bracket is wider
    # than the resolution)
    status: str | None = None

    def __post_init__(self) -> None:
        self.rate = round_rate(self.settings.start_rate)

    def next_rate(self) -> float | None:
        """The rate to probe next; None when the search is over."""
        if self.status is None and len(self.probes) >= self.settings.max_probes:
            self.status = "probe_limit"
        return None if self.status is not None else self.rate

    def observe(self, rate: float, attainment: float | None, trial_id: int | None = None,
                offered_rate: float | None = None) -> None:
        """A probe placed at nominal `rate` measured `attainment` while offering `offered_rate`."""
        s = self.settings
        probe = Probe(rate, attainment, trial_id, offered_rate)
        self.probes.append(probe)
        if attainment is None:
            self.status = "failed"
            return
        load = probe.load
        if attainment >= s.target_attainment:
            self.passing = load if self.passing is None else max(self.passing, load)
        else:
            self.failing = load if self.failing is None else min(self.failing, load)
        if self.failing is None:  # every probe passed: climb
            if rate >= s.max_rate:
                self.status = "above_max"
            else:
                self.rate = min(round_rate(rate * 2), s.max_rate)
        elif self.passing is None:  # every probe failed: descend
            if rate <= s.min_rate:
                self.status = "below_min"
            else:
                self.rate = max(round_rate(rate / 2), s.min_rate)
        elif self.passing >= self.failing:  # a rate passed above one that failed: attainment is not monotone
            self.status = "non_monotone"
        else:
            mid = math.sqrt(self.passing * self.failing)  # the offered rate to try next
            nominal = round_rate(mid * self._nominal_per_offered())  # placed so that it offers about `mid`
            if self.failing / self.passing <= 1 + s.resolution or not self.passing < round_rate(mid) < self.failing:
                self.status = "bracketed"
            elif any(p.rate == nominal for p in self.probes):  # offered rates led back to a probed rate
                self.status = "stalled"
            else:
                self.rate = nominal

    def _nominal_per_offered(self) -> float:
        """How much nominal rate it took per offered req/s so far (median over probes; 1 without offered rates):
        a systematic gap (send lag, a max_concurrency cap) moves the next probe, a draw's scatter barely."""
        ratios = sorted(p.rate / p.offered_rate for p in self.probes if p.offered_rate)
        return ratios[len(ratios) // 2] if ratios else 1.0


@dataclass(frozen=True)
class CapacityResult:
    """One configuration's capacity (a sweep_capacity row)."""

    config: dict[str, Any]  # the configuration's parameters, without a load point
    status: str
    max_rate_within_slo: float | None
    first_failing_rate: float | None
    probes: list[Probe]


def capacity_record(result: CapacityResult, planned: PlannedTrial | None, target_attainment: float,
                    slo: dict[str, Any]) -> NewCapacity:
    """The sweep_capacity row of one configuration's result (`planned`: any of its probes' trial, for the
    configuration's method and engine facts; None when it has no probe)."""
    cfg = result.config
    return NewCapacity(
        config_key=point_key(cfg),
        method_label=cfg["method"],
        method=planned.point.method if planned else None,
        num_speculative_tokens=planned.point.num_speculative_tokens if planned else None,
        drafter=planned.point.params.get("model") if planned else None,
        dataset=cfg["dataset"],
        max_num_seqs=planned.engine.engine_args.get("max_num_seqs") if planned else None,
        max_num_batched_tokens=planned.engine.engine_args.get("max_num_batched_tokens") if planned else None,
        engine_config_hash=planned.engine.config_hash if planned else None,
        target_attainment=target_attainment,
        slo=slo,
        status=result.status,
        max_rate_within_slo=result.max_rate_within_slo,
        first_failing_rate=result.first_failing_rate,
        probes=[{"rate": p.rate, "offered_rate": p.offered_rate, "attainment": p.attainment, "trial_id": p.trial_id}
                for p in result.probes],
    )


class CapacityStrategy:
    """Runs one capacity search per configuration, at most as many configurations at once as the pool has engine
    slots (so an engine stays warm between its configuration's probes and is never retired mid-search)."""

    def __init__(self, store: Store, space: SearchSpace, *, sweep_id: int, settings: CapacitySpec, repeats: int,
                 with_baseline: bool, retry_failed: bool, on_result: Callable[[CapacityResult], None]):
        self.store, self.space, self.sweep_id, self.repeats = store, space, sweep_id, repeats
        self.retry_failed, self.on_result = retry_failed, on_result
        self.configs = space.configurations(with_baseline=with_baseline)
        self.baseline_keys = {point_key(c) for c in self.configs
                              if c["method"] == space.baseline_label and space.baseline_label not in space.labels}
        self.searches = {point_key(c): CapacitySearch(settings) for c in self.configs}
        self.queue = [point_key(c) for c in self.configs]  # not started yet
        self.active: dict[str, TrialRun | None] = {}  # started configurations -> the probe in flight
        self.by_key = {point_key(c): c for c in self.configs}
        self.todo = len(self.configs) * settings.max_probes  # an upper bound: searches usually stop sooner
        self.engines = len(self.configs)
        self.waiting: list[TrialRun] = []  # never holds trials back between rounds

    def _stored(self) -> dict[str, TrialRow]:
        return {r.point_key: r for r in self.store.trials(self.sweep_id)}

    def next_runs(self, pool: EnginePool) -> Iterator[TrialRun]:
        while self.queue and len(self.active) < pool.max_engines:
            self.active[self.queue.pop(0)] = None
        stored = None
        for key in list(self.active):
            if self.active[key] is not None:
                continue  # its probe is being measured
            search, config = self.searches[key], self.by_key[key]
            while True:
                rate = search.next_rate()
                if rate is None:
                    self._finish(key)
                    break
                params = {**config, "request_rate": rate}
                stored = stored if stored is not None else self._stored()
                row = stored.get(point_key(params))
                if row is not None and row.state == TrialState.COMPLETE:  # measured before (resume): replay it
                    summary = self.store.trial_result(row.id).summary()
                    search.observe(rate, summary.slo_attainment, row.id, summary.offered_rate)
                    continue
                if row is not None and row.state == TrialState.FAIL and not self.retry_failed:
                    search.observe(rate, None, row.id)
                    continue
                planned = self.space.planned_trial(params)
                role = TrialRole.PAIRED_BASELINE if key in self.baseline_keys else TrialRole.SEARCH
                if row is None:
                    (row_id,) = self.store.add_trials(self.sweep_id, [planned.new_trial(params, role)])
                else:
                    row_id = row.id
                    if row.state == TrialState.FAIL:
                        self.store.requeue_trial(row_id)
                run = TrialRun(trial_id=row_id, planned=planned, params=params, role=role, windows_wanted=self.repeats)
                self.active[key] = run
                yield run
                break
        # configurations whose searches ended while replaying make room for the next ones
        if self.queue and len(self.active) < pool.max_engines:
            yield from self.next_runs(pool)

    def _finish(self, key: str) -> None:
        search = self.searches[key]
        self.active.pop(key, None)
        result = CapacityResult(config=self.by_key[key], status=search.status or "failed",
                                max_rate_within_slo=search.passing, first_failing_rate=search.failing,
                                probes=list(search.probes))
        self.on_result(result)

    def finished(self, run: TrialRun, summary: TrialSummary | None) -> None:
        """A probe's trial was recorded (summary None: it failed)."""
        key = point_key({k: v for k, v in run.params.items() if k != "request_rate"})
        if self.active.get(key) is run:
            self.active[key] = None
            self.searches[key].observe(float(run.params["request_rate"]),
                                       None if summary is None else summary.slo_attainment, run.trial_id,
                                       None if summary is None else summary.offered_rate)

    def window_done(self, run: TrialRun) -> bool:
        return len(run.windows) >= self.repeats

    def exhausted(self, pool: EnginePool) -> bool:
        return not self.queue and not self.active
