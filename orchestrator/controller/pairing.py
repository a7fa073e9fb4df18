"""Paired baselines: every speculative trial is compared with a no-speculation trial at the same target,
workload, sampling, load point and engine batch settings. `Baselines` makes sure that trial exists (adaptive
samplers ask for it as they go; grids plan it up front) and compares whatever became comparable when a trial
finished; `compare_with_baseline` computes and stores one comparison: speedup with its confidence interval,
latency ratios, the step-cost identity (metrics/decomposition.py), the lossless check and the pairing flags. It refuses (no speedup, flag
`fingerprint_mismatch`) when the two ran in environments whose compared fingerprint fields differ."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..metrics.decomposition import identity
from ..records import Comparison
from ..spec.models import MeasurementSpec
from ..states import QUEUED, BaselineState, TrialState
from ..store import EnvironmentRow, Store, TrialRow
from ..validity import fingerprint_diff, first_token_test, greedy_match, pairing_flags, speedup_interval
from ..validity.lossless import near_tie_margin


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def _environments(store: Store, trial_id: int, fallback: int | None) -> list[EnvironmentRow | None]:
    envs = {m.environment_id for m in store.measurements(trial_id) if m.environment_id is not None}
    if not envs and fallback is not None:
        envs = {fallback}
    return [store.environment(e) for e in sorted(envs)]


def ran_dtype(env: EnvironmentRow | None) -> str | None:
    """The dtype the baseline's engine computed in: what vLLM reported it ran (a GPU's `auto` resolves to the
    checkpoint's), else what specsweep chose."""
    if env is None:
        return None
    engine = env.fact("engine") or {}
    return engine.get("model_dtype_effective") or env.dtype


def compare_with_baseline(store: Store, trial_id: int, baseline_id: int, *, temperature: float,
                          confidence: float, resamples: int, threshold: float, allow_mismatch: list[str],
                          seed: int = 0) -> Comparison:
    """Compute and store the comparison of `trial_id` with `baseline_id` (both rows of sweep_trials)."""
    trial, base = store.trial(trial_id), store.trial(baseline_id)
    if base is None or base.state != TrialState.COMPLETE or trial is None or trial.state != TrialState.COMPLETE:
        flags = pairing_flags(temperature=temperature, match=None, distribution=None, threshold=threshold,
                              mismatch=[], baseline_state=base.state if base else TrialState.FAIL)
        comparison = Comparison(baseline_trial_id=baseline_id, confidence=confidence,
                                pairing_flags=",".join(flags) or None)
        store.save_comparison(trial_id, comparison)
        return comparison
    mismatch: list[str] = []
    base_envs = _environments(store, baseline_id, base.environment_id)  # read once: the mismatch and the dtype
    for a in _environments(store, trial_id, trial.environment_id):
        for b in base_envs:
            mismatch += [d for d in fingerprint_diff(a, b, same_method=False, allow=allow_mismatch) if d not in mismatch]
    speed: dict[str, Any] = {}
    if not mismatch:
        spec_m, base_m = store.measurements(trial_id), store.measurements(baseline_id)
        spec_row, base_row = store.trial_result(trial_id), store.trial_result(baseline_id)
        ci = speedup_interval([m.output_tok_s for m in spec_m], [m.output_tok_s for m in base_m],
                              confidence=confidence, resamples=resamples, seed=seed)
        speed = dict(speedup=_ratio(spec_row.output_tok_s, base_row.output_tok_s),
                     speedup_ci_low=ci["low"], speedup_ci_high=ci["high"], speedup_ci_method=ci["method"],
                     tpot_ratio=_ratio(spec_row.tpot_ms_p50, base_row.tpot_ms_p50),
                     ttft_ratio=_ratio(spec_row.ttft_ms_p50, base_row.ttft_ms_p50))
        speed.update(identity(spec_row.decode_tokens_per_step, spec_row.decode_step_ms, base_row.decode_step_ms,
                              speed["speedup"]))
    spec_out, base_out = store.request_outputs(trial_id, None), store.request_outputs(baseline_id, None)
    match = dist = None
    if temperature == 0:
        # the baseline's top three where it was scored (its first window): near ties are numerics, not a loss
        top3 = {o.prompt_id: o.top3 for o in base_out if o.ok and o.top3}
        base_env = next((e for e in base_envs if e is not None), None)
        match = greedy_match({(o.repeat, o.prompt_id): o.output_token_ids or [] for o in spec_out if o.ok},
                             {(o.repeat, o.prompt_id): o.output_token_ids or [] for o in base_out if o.ok},
                             top3, near_tie_margin(ran_dtype(base_env)))
    else:
        dist = first_token_test([o.output_token_ids[0] for o in spec_out if o.ok and o.output_token_ids],
                                [o.output_token_ids[0] for o in base_out if o.ok and o.output_token_ids])
    flags = pairing_flags(temperature=temperature, match=match, distribution=dist, threshold=threshold,
                          mismatch=mismatch, baseline_state=base.state)
    comparison = Comparison(baseline_trial_id=baseline_id, confidence=confidence, fingerprint_diff=mismatch,
                            distribution_test=dist, pairing_flags=",".join(flags) or None, **speed, **(match or {}))
    store.save_comparison(trial_id, comparison)
    return comparison


@dataclass(frozen=True)
class PairingSettings:
    temperature: float
    measurement: MeasurementSpec
    seed: int


class Baselines:
    """The sweep's paired baselines: which row measures each load point's baseline, and the comparisons."""

    def __init__(self, store: Store, sweep_id: int, settings: PairingSettings, warn: Callable[[str], None]):
        self.store, self.sweep_id, self.settings, self.warn = store, sweep_id, settings, warn
        self.rows: dict[str, tuple[int, BaselineState]] = {}  # adaptive: baseline point key -> (row id, state)

    def known(self, key: str, row_id: int, state: BaselineState) -> None:
        """A baseline row found on resume (state PENDING: it is measured again when a trial asks for it)."""
        self.rows[key] = (row_id, state)

    def claim(self, key: str, new_row: Callable[[], int]) -> tuple[int, bool]:
        """The row of the baseline with point key `key`, creating it with `new_row` if the sweep has none;
        and whether it must be measured now (it is PENDING and not queued yet)."""
        if key not in self.rows:
            row = next((r for r in self.store.trials(self.sweep_id) if r.point_key == key), None)
            self.rows[key] = (new_row(), TrialState.PENDING) if row is None else (row.id, row.state)
        rid, state = self.rows[key]
        self.rows[key] = (rid, QUEUED if state == TrialState.PENDING else state)
        return rid, state == TrialState.PENDING

    def pair(self, trial_id: int) -> None:
        """Compare whatever became comparable when `trial_id` finished: the trial with its baseline, or a
        baseline with the trials that wait for it."""
        row = self.store.trial(trial_id)
        todo = []
        if row and row.baseline_trial_id is not None and row.state == TrialState.COMPLETE:
            base = self.store.trial(row.baseline_trial_id)
            if base and base.state in (TrialState.COMPLETE, TrialState.FAIL):
                todo.append((trial_id, row.baseline_trial_id))
        if row and row.state in (TrialState.COMPLETE, TrialState.FAIL):
            todo += [(t.id, trial_id) for t in self.store.paired_trials(trial_id) if t.state == TrialState.COMPLETE]
        m = self.settings.measurement
        for tid, bid in todo:
            try:
                compare_with_baseline(self.store, tid, bid, temperature=self.settings.temperature,
                                      confidence=m.confidence, resamples=m.bootstrap_resamples,
                                      threshold=m.lossless_threshold, allow_mismatch=m.allow_mismatch,
                                      seed=self.settings.seed)
            except Exception as e:  # the measurements are stored; a comparison can be recomputed
                self.warn(f"comparing trial row {tid} with baseline row {bid} failed: {type(e).__name__}: {e}")

    def pair_missing(self, rows: list[TrialRow]) -> None:
        """Comparisons that never happened (e.g. a resumed sweep whose controller died between the two)."""
        for r in rows:
            if r.baseline_trial_id is not None and r.state == TrialState.COMPLETE and self.store.comparison(r.id) is None:
                self.pair(r.baseline_trial_id)
