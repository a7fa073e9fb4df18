"""Recording a finished trial: windows -> summary -> sanity flags -> store (one transaction) -> Optuna ->
paired comparisons. Also failures. The measurement is in the store before Optuna hears of it, so a failure
of the Optuna bookkeeping never loses a measurement."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import StoreLeaseLost, StoreUnavailable
from ..metrics import median_over_repeats
from ..records import CompletedTrial, TrialSummary
from ..spec.models import SweepSpec
from ..states import TrialRole
from ..store import Store
from ..validity import coefficient_of_variation, trial_flags
from .pairing import Baselines
from .plan import rate_value
from .pool import TrialRun
from .study import StudyBook, feasible


@dataclass
class Tally:
    """What this run did, counted as it happens."""

    completed: int = 0
    failed: int = 0
    baselines: int = 0  # paired baselines measured (trials the controller added, not the sampler)
    reused: int = 0  # adaptive samplers: a point measured before, told again without running


class TrialRecorder:
    def __init__(self, store: Store, spec: SweepSpec, max_tokens: int, ignore_eos: bool, book: StudyBook,
                 baselines: Baselines, warn: Callable[[str], None]):
        self.store, self.spec, self.book, self.baselines, self.warn = store, spec, book, baselines, warn
        self.max_tokens, self.ignore_eos = max_tokens, ignore_eos
        self.tally = Tally()

    def summarize(self, run: TrialRun) -> tuple[TrialSummary, list[str]]:
        m = self.spec.measurement
        metrics = [w.metrics for w in run.windows]
        cv = coefficient_of_variation([w.output_tok_s for w in metrics])
        flags = trial_flags(k=run.planned.point.num_speculative_tokens, windows=metrics,
                            outputs=[w.outputs for w in run.windows], max_tokens=self.max_tokens,
                            ignore_eos=self.ignore_eos, prefix_caching=bool(self.spec.engine.enable_prefix_caching),
                            cv=cv, noisy_cv=m.noisy_cv, max_send_lag_ms=m.max_send_lag_ms,
                            nominal_rate=None if run.planned.request_rate is None
                            else rate_value(run.planned.request_rate),
                            engine_niceness=run.engine.fingerprint.get("process_niceness") if run.engine else None)
        return median_over_repeats(metrics, output_tok_s_cv=cv, trial_flags=",".join(flags) or None), flags

    def completed(self, run: TrialRun) -> tuple[TrialSummary, list[str]]:
        summary, flags = self.summarize(run)
        mem = [w.metrics.memory_mb for w in run.windows if w.metrics.memory_mb is not None]
        self.store.complete_trial(run.trial_id, CompletedTrial(
            windows=run.windows, summary=summary, warmup_s=run.warmup_s, measure_s=run.measure_s,
            feasible=feasible(self.spec.search, summary) if self.spec.search.constraints else None,
            flags=summary.trial_flags, memory_kind=run.windows[-1].metrics.memory_kind,
            engine_memory_mb=max(mem) if mem else None,
            kv_cache_tokens=run.engine.kv_cache_tokens if run.engine else None))
        self.tell(run, summary)
        self.baselines.pair(run.trial_id)
        if run.role == TrialRole.PAIRED_BASELINE:
            self.tally.baselines += 1
        else:
            self.tally.completed += 1
        return summary, flags

    def failed(self, run: TrialRun, error: str) -> None:
        self.store.fail_trials([run.trial_id], error)
        self.tell(run, None)
        self.baselines.pair(run.trial_id)
        self.tally.failed += 1

    def tell(self, run: TrialRun, summary: TrialSummary | None) -> None:
        """Report a finished trial to Optuna (never raises: the measurement is already stored)."""
        if run.role == TrialRole.PAIRED_BASELINE or self.spec.search.sampler == "capacity":
            return  # not a point an Optuna sampler chose
        try:
            number = self.book.tell(run.handle, run.params, run.trial_id, summary)
            if run.handle is None:
                self.store.update_trial(run.trial_id, optuna_trial_number=number)
        except (StoreUnavailable, StoreLeaseLost):
            raise  # the store is gone or no longer ours: the controller stops
        except Exception as e:
            self.warn(f"optuna bookkeeping failed for trial row {run.trial_id}: {e}")
