"""One-line sentences: crossover, capacity, recommendations, the end of a sweep, and each command's summary."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..states import TrialState
from ..store import CapacityResult, CrossoverRow

if TYPE_CHECKING:
    pass

def crossover_lines(crossover: list[CrossoverRow]) -> list[str]:
    """One line per method configuration and dataset: where speculation stops paying."""
    out = []
    for c in crossover:
        k = "" if c.num_speculative_tokens is None else f" K={c.num_speculative_tokens}"
        seqs = "" if c.max_num_seqs is None else f" max_num_seqs={c.max_num_seqs}"
        x = c.crossover_concurrency
        if x is None:
            where = "no crossover in range (speedup >= 1.0 throughout)"
        else:  # the view knows the first concurrency below 1.0, not that it stays below from there
            where = f"speedup first below 1.0 at concurrency {x}"
            if x == c.min_concurrency and c.best_speedup is not None and c.best_speedup >= 1.0:
                where += " (and >= 1.0 again at a higher one)"
        out.append(f"{c.label}{k}{seqs} on {c.dataset}: {where} (measured {c.min_concurrency}-"
                   f"{c.max_concurrency}, best speedup {c.best_speedup:.2f})")
    return out


def capacity_lines(capacity: list[CapacityResult]) -> list[str]:
    """`results` of a capacity search: one line per configuration, with its ratio to the baseline."""
    out = []
    for c in capacity:
        k = "" if c.num_speculative_tokens is None else f" K={c.num_speculative_tokens}"
        ratio = "" if c.capacity_ratio is None or c.method == "baseline" else \
            f"; {c.capacity_ratio:.2f}x the baseline's {c.baseline_max_rate_within_slo:g} req/s"
        slo = ", ".join(f"{key} <= {v:g}" for key, v in (c.slo or {}).items())
        out.append(f"{c.label}{k} on {c.dataset}: {capacity_text(c.status, c.max_rate_within_slo, c.first_failing_rate)}"
                   f"{ratio} (>= {c.target_attainment:.0%} of requests with {slo}; {len(c.probes)} probes)")
    return out


def sweep_state_line(outcome) -> str:
    """The last word on a sweep: how many of its trials are COMPLETE, and what every other one is."""
    states = outcome.states
    done = states.get(TrialState.COMPLETE, 0)
    if outcome.total and done == outcome.total:
        return f"sweep {outcome.sweep}: all {done} trials COMPLETE"
    rest = ", ".join(f"{n} {state}" for state, n in sorted(states.items()) if state != TrialState.COMPLETE and n)
    hint = "run the same command again to resume" + ("" if not states.get(TrialState.FAIL) else
                                                        "; --retry-failed runs FAIL trials again")
    return f"sweep {outcome.sweep}: {done} of {outcome.total} trials COMPLETE, not complete: {rest or 'none'} ({hint})"


def capacity_text(status: str, passing: float | None, failing: float | None) -> str:
    """One configuration's capacity in words (run output, `results`); rates are offered rates, three digits."""
    if status == "failed":
        return "search failed (a probe's trial failed; see its error)"
    if status == "above_max":
        return f"meets the SLO up to the highest rate probed, {passing:.3g} req/s (search.capacity.max_rate)"
    if status == "below_min" or passing is None:
        return f"misses the SLO even at {failing:.3g} req/s (search.capacity.min_rate)"
    if status == "non_monotone":
        return (f"not monotone: {passing:.3g} req/s met the SLO but {failing:.3g} req/s did not (noise: more repeats "
                "or prompts per probe)")
    bracket = f" (fails at {failing:.3g})" if failing is not None else ""
    limit = {"probe_limit": " [probe limit reached]",
             "stalled": " [the offered rates would repeat a probe: bracket wider than the resolution]"}.get(status, "")
    return f"{passing:.3g} req/s within the SLO{bracket}{limit}"


def recommendation_lines(rec) -> list[str]:
    """`specsweep recommend`: the schedule, the evidence per concurrency, the ready --speculative-config."""
    out = [f"{rec.label} ({rec.method}) on {rec.dataset}: schedule {rec.schedule_text} "
           f"(batch sizes : K; best single K over the measured loads: {rec.best_fixed_k})"]
    for c in rec.choices:
        opts = "; ".join(("* " if o.k == c.k else "") + o.text() for o in c.options)
        proof = "" if c.proven else " [no interval: one repeat — measure with repeats before deploying]"
        out.append(f"  concurrency {c.concurrency}: K={c.k} — {c.reason}{proof}  ({opts})")
    if rec.speculative_config is None:
        out.append("  no K beats the baseline at any measured load: deploy without speculation")
    else:
        out.append(f"  --speculative-config '{json.dumps(rec.speculative_config, separators=(',', ':'))}'")
        from ..methods.registry import get_method

        cost = get_method(rec.method).k0_cost
        if cost and any(k == 0 for _, _, k in rec.schedule):
            out.append(f"  caution: K = 0 is not free for {rec.method}: {cost}; verify with --verify")
    return out


# ---- one-line summaries the commands print (orchestrator/commands/) -------------------------------------------
def validate_line(spec_path: str, sweep: str, sampler: str, plan: Any, n_trials: int | None,
                  max_probes: int) -> str:
    """`specsweep validate`: what the spec would run (`plan`: controller/plan.py PlanSummary)."""
    extra = f" + {plan.paired_baselines} paired baseline trials" if plan.paired_baselines else ""
    if sampler == "grid":
        what = f"grid of {plan.points} trials{extra} on {plan.engine_configs} engine configurations"
    elif sampler == "capacity":
        what = (f"capacity search of {plan.capacity_configs} configurations (the baseline's included), at most "
                f"{max_probes} request-rate probes each")
    else:
        what = (f"{sampler} sampler, {n_trials or 20} trials from a space of {plan.points} points "
                f"({plan.engine_configs} engine configurations)")
    return f"{spec_path}: OK — sweep {sweep!r}: {what}"


def run_summary_line(outcome: Any, store: str) -> str:
    """`specsweep run`: counts and where the time went (`outcome`: controller/runner.py SweepOutcome)."""
    reused = f", {outcome.reused} repeated points answered from stored rows" if outcome.reused else ""
    baselines = f" (+{outcome.baselines} paired baselines)" if outcome.baselines else ""
    return (f"{outcome.completed} trials completed{baselines}, {outcome.failed} failed, {outcome.skipped} done before"
            f"{reused}; {outcome.engine_starts} engine starts ({outcome.engine_start_s:.0f} s); {outcome.wall_s:.0f} s "
            f"in all (Ray {outcome.ray_init_s:.0f} s). Rows: {store} (view trial_results, sweep = '{outcome.sweep}')")


def nightly_line(suite: str, out: Any) -> str:
    """`specsweep nightly`: the night's verdict counts (`out`: nightly/runner.py NightlyOutcome)."""
    return (f"nightly {suite} run {out.run_id}: {out.regressions} regressions, {out.suspicious} suspicious, "
            f"{out.insufficient} with insufficient history; {out.failed_trials} failed trials; report {out.report}")


def db_revision_line(store: str, before: str | None, after: str) -> str:
    what = "created" if before is None else ("already at" if before == after else f"upgraded from {before} to")
    return f"{store}: schema {what} revision {after}"


def train_summary_line(manifest: dict[str, Any]) -> str:
    """`specsweep drafters train`: what the finished run trained (from its manifest)."""
    losses = ", ".join("-" if x is None else f"{x:.2f}" for x in manifest["final_losses"])
    accs = ", ".join("-" if x is None else f"{x:.2f}" for x in manifest["final_accuracy"])
    return (f"{manifest['method']} drafter for {manifest['target']}: {manifest['steps_done']} steps, "
            f"final loss per draft step [{losses}], accuracy [{accs}], "
            f"{manifest['total_seconds']:.0f} s (this run; cached stages excluded)")


TRAIN_INTERRUPTED = ("interrupted: finished stages and the last checkpoint are kept; run the same command again "
                     "to resume")
