"""`specsweep recommend`: a draft-length schedule by batch size (vLLM's num_speculative_tokens_per_batch_size)
derived from a sweep's measured K x concurrency grid, with the evidence for each choice.

Rules (docs/src/guides/recommend.md), per dataset and method label, from COMPLETE closed-loop
rows that carry a speedup against their paired baseline:
  - at each measured concurrency, a K *beats the baseline* when its speedup interval lies above 1.0 (a row
    without an interval — one repeat — when its speedup is above 1.0; the choice is then marked unproven);
  - among the K that beat it, the smallest wins unless a larger K's interval lies wholly above the current
    choice's (better beyond the confidence interval);
  - K = 0 (no drafting) where no K beats the baseline;
  - batch sizes map to the measured concurrencies conservatively: a batch of b uses the choice made at the
    smallest measured concurrency >= b (speculation pays less as the batch grows), and above the largest
    measured concurrency vLLM keeps the last K. Adjacent equal choices merge.
A closed-loop sweep at concurrency c keeps about c requests in flight, i.e. a batch of about c.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from .methods.schedule import Schedule, format_schedule
from .states import TrialState
from .store import NewRecommendation, Store


@dataclass(frozen=True)
class KOption:
    """One measured K at one concurrency (a trial_results row)."""

    k: int
    trial: int
    speedup: float
    low: float | None
    high: float | None
    flags: str | None = None

    @property
    def beats_baseline(self) -> bool:
        return self.low > 1.0 if self.low is not None else self.speedup > 1.0

    def text(self) -> str:
        ci = f" [{self.low:.2f}-{self.high:.2f}]" if self.low is not None and self.high is not None else " (no interval)"
        return f"K={self.k} {self.speedup:.2f}x{ci}"


@dataclass(frozen=True)
class Choice:
    concurrency: int
    k: int  # 0: no drafting
    reason: str
    options: tuple[KOption, ...]
    proven: bool  # the choice rests on intervals (False: one repeat, or nothing measured)


def choose_k(concurrency: int, options: list[KOption]) -> Choice:
    opts = tuple(sorted(options, key=lambda o: o.k))
    winners = [o for o in opts if o.beats_baseline]
    if not winners:
        return Choice(concurrency, 0, "no K beats the baseline here", opts, all(o.low is not None for o in opts))
    best = winners[0]
    why = "smallest K that beats the baseline"
    for o in winners[1:]:
        if o.low is not None and best.high is not None and o.low > best.high:
            best, why = o, f"K={o.k} is faster than K={best.k} beyond both intervals"
    return Choice(concurrency, best.k, why, opts, best.low is not None)


def schedule_from(choices: list[Choice]) -> Schedule:
    """Batch-size ranges from per-concurrency choices (sorted by concurrency), merged where K repeats."""
    out: list[list[int]] = []
    start = 1
    for c in sorted(choices, key=lambda c: c.concurrency):
        if out and out[-1][2] == c.k:
            out[-1][1] = c.concurrency
        else:
            out.append([start, c.concurrency, c.k])
        start = c.concurrency + 1
    return tuple((start, end, k) for start, end, k in out)


@dataclass(frozen=True)
class Recommendation:
    sweep: str
    label: str
    method: str
    dataset: str
    choices: tuple[Choice, ...]
    schedule: Schedule
    speculative_config: dict | None  # None: no K beats the baseline anywhere (do not speculate)
    best_fixed_k: int | None  # the single K with the highest geometric-mean speedup over the measured loads

    @property
    def schedule_text(self) -> str:
        return format_schedule(self.schedule)

    def record(self) -> NewRecommendation:
        """The sweep_recommendations row."""
        return NewRecommendation(
            label=self.label, method=self.method, dataset=self.dataset, schedule=self.schedule_text,
            speculative_config=self.speculative_config, best_fixed_k=self.best_fixed_k,
            evidence=[{"concurrency": c.concurrency, "k": c.k, "reason": c.reason, "proven": c.proven,
                       "options": [asdict(o) for o in c.options]} for c in self.choices])


def recommend(store: Store, sweep: str, label: str | None = None) -> list[Recommendation]:
    """One recommendation per (speculative method label, dataset) of the sweep whose rows measure more than one
    load point; raises ValueError when there is nothing to derive from."""
    rows = [r for r in store.trial_results(sweep) if r.state == TrialState.COMPLETE and r.request_rate is None
            and r.speedup is not None and r.num_speculative_tokens]
    if label is not None:
        rows = [r for r in rows if r.label == label]
    if not rows:
        raise ValueError(f"sweep {sweep!r} has no completed closed-loop speculative row with a speedup"
                         + (f" for method {label!r}" if label else "") + ": nothing to derive a schedule from")
    out = []
    for (lab, ds) in sorted({(r.label, r.dataset) for r in rows}):
        mine = [r for r in rows if r.label == lab and r.dataset == ds]
        by_c: dict[int, list[KOption]] = {}
        for r in mine:
            assert r.num_speculative_tokens is not None and r.speedup is not None  # rows filtered above
            by_c.setdefault(r.concurrency, []).append(KOption(
                k=r.num_speculative_tokens, trial=r.trial, speedup=r.speedup, low=r.speedup_ci_low,
                high=r.speedup_ci_high, flags=r.flags))
        choices = [choose_k(c, opts) for c, opts in sorted(by_c.items())]
        schedule = schedule_from(choices)
        top = max(k for _, _, k in schedule)
        ks = sorted({o.k for opts in by_c.values() for o in opts})
        best_fixed = max(ks, key=lambda k: _geo_mean([o.speedup for opts in by_c.values() for o in opts if o.k == k]))
        config = None
        if top > 0:
            template = next(r for r in mine if r.num_speculative_tokens == top)
            # the speculative_config the engine was given (drafter aliases such as trained:eagle3 resolved to
            # the folder vLLM loaded), less its K: ready for vLLM as it stands
            stored = store.trial(template.trial_id)
            engine_config = stored.engine_config if stored else {}
            engine_config = json.loads(engine_config) if isinstance(engine_config, str) else (engine_config or {})
            given = engine_config.get("speculative_config") or {"method": template.method}
            config = {**{k: v for k, v in given.items()
                         if k not in ("num_speculative_tokens", "num_speculative_tokens_per_batch_size")},
                      "num_speculative_tokens": top,
                      "num_speculative_tokens_per_batch_size": [list(e) for e in schedule]}
        out.append(Recommendation(sweep, lab, mine[0].method, ds, tuple(choices), schedule, config, best_fixed))
    return out


def _geo_mean(values: list[float]) -> float:
    import math

    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else 0.0


def verify_spec(spec: dict, rec: Recommendation, name: str, repeats: int | None = None) -> dict:
    """A follow-up sweep: the schedule against the best fixed K and the baseline at every measured concurrency,
    on the original sweep's target, engine, workload and measurement settings (paired, repeated; `repeats`
    windows per point instead of the sweep's own, for intervals narrow enough to show "never loses")."""
    doc = json.loads(json.dumps(spec))  # a deep copy of the stored (validated) spec
    original = doc["methods"][rec.label]
    base = {k: v for k, v in original.items() if k not in ("num_speculative_tokens", "num_speculative_tokens_per_batch_size")}
    top = max(k for _, _, k in rec.schedule)
    doc["name"] = name
    doc["description"] = f"recommend --verify of {rec.sweep} ({rec.label}, {rec.dataset}): schedule {rec.schedule_text}"
    doc["methods"] = {"baseline": {},
                      f"{rec.label}-fixed": {**base, "method": rec.method, "num_speculative_tokens": rec.best_fixed_k},
                      f"{rec.label}-schedule": {**base, "method": rec.method, "num_speculative_tokens": top,
                                                "num_speculative_tokens_per_batch_size": rec.schedule_text}}
    doc["workload"]["dataset"] = rec.dataset
    doc["space"] = {**doc.get("space", {}), "concurrency": [c.concurrency for c in rec.choices], "request_rate": None}
    doc["search"] = {**doc.get("search", {}), "sampler": "grid", "n_trials": None}
    # rotated: repeat r of the schedule, the fixed K and the baseline run in one round, so drift over the run
    # (a neighbour, thermals) hits all three alike; blocked let a baseline measured minutes earlier decide
    doc["measurement"] = {**doc.get("measurement", {}), "order": "rotated"}
    if repeats is not None:
        doc["measurement"]["repeats"] = repeats
    return doc
