"""What a report says, computed from the stored rows only (no HTML here): the verdict per dataset, the
context the numbers were measured in, and the rows of the results table.

The verdict is derived from each row's speedup and its confidence interval, so it cannot contradict the
table beside it:
  faster       some configuration at that load point has its interval above 1.0 (named: the fastest of those)
  slower       every configuration measured at that load point has its interval below 1.0
  unclear      neither (the best one's interval contains 1.0, or some other one's does)
  no_interval  one repeat: the point estimate is shown and no interval exists, which the sentence says
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..states import TrialState
from ..store import (
    CapacityResult,
    CrossoverRow,
    EnvironmentRow,
    RequestAcceptanceRow,
    Store,
    TrialResult,
)
from ..validity.fingerprint import ENVIRONMENT_FIELDS, fingerprint_diff

# Flags under which a row's speedup is not to be believed (docs/src/concepts/measurement.md, Flags); a verdict naming such a row says so.
SUSPECT_FLAGS = ("lossy?", "distribution_shift?", "impossible_al", "fingerprint_mismatch", "failed_requests",
                 "baseline_failed", "client_saturated", "warmup_failed")


def config_label(row: TrialResult | CrossoverRow | CapacityResult, batch_varies: bool = False) -> str:
    """method label, K, and the engine batch settings when the sweep varies them."""
    k = row.num_speculative_tokens
    out = row.label + ("" if k is None else f" K={k}")
    if batch_varies:
        if row.max_num_seqs is not None:
            out += f" max_num_seqs={row.max_num_seqs}"
        if row.max_num_batched_tokens is not None:
            out += f" max_num_batched_tokens={row.max_num_batched_tokens}"
    return out


@dataclass(frozen=True)
class VerdictClause:
    """What holds at one load point (one concurrency) of one dataset."""

    concurrency: int
    kind: str  # faster | slower | unclear | no_interval
    label: str  # the configuration with the highest speedup there
    speedup: float
    low: float | None
    high: float | None
    trial: int
    suspect_flags: tuple[str, ...] = ()

    def interval(self) -> str:
        return f"[{self.low:.2f}–{self.high:.2f}]" if self.low is not None and self.high is not None else ""


@dataclass(frozen=True)
class Verdict:
    dataset: str
    clauses: tuple[VerdictClause, ...]
    open_loop_only: bool = False  # the dataset was measured at request rates only: no concurrency verdict

    def phrases(self) -> list[tuple[str, tuple[VerdictClause, ...]]]:
        """The sentence's parts, each with the clauses (load points) it speaks for: faster/unclear points one
        by one, a run of slower points as a range."""
        parts: list[tuple[str, tuple[VerdictClause, ...]]] = []
        cl = list(self.clauses)
        i = 0
        while i < len(cl):
            c = cl[i]
            if c.kind == "slower":
                j = i
                while j + 1 < len(cl) and cl[j + 1].kind == "slower":
                    j += 1
                if j == len(cl) - 1 and j > i:
                    text = f"from concurrency {c.concurrency} every method is slower than no speculation"
                elif j > i:
                    text = f"at concurrency {c.concurrency}–{cl[j].concurrency} every method is slower than no speculation"
                else:
                    text = (f"at concurrency {c.concurrency} every method is slower than no speculation "
                            f"(best: {c.label} {c.speedup:.2f}× {c.interval()})")
                parts.append((text, tuple(cl[i:j + 1])))
                i = j + 1
                continue
            if c.kind == "faster":
                text = f"at concurrency {c.concurrency} {c.label} is {c.speedup:.2f}× {c.interval()} faster than no speculation"
            elif c.kind == "no_interval":
                word = "faster" if c.speedup >= 1.0 else "slower"
                text = f"at concurrency {c.concurrency} {c.label} is {c.speedup:.2f}× ({word}; 1 repeat: no interval)"
            else:
                text = (f"at concurrency {c.concurrency} no method is clearly faster or slower than no "
                        f"speculation (best: {c.label} {c.speedup:.2f}× {c.interval()})")
            if c.suspect_flags:
                text += f" — flagged {', '.join(c.suspect_flags)}: see the table"
            parts.append((text, (c,)))
            i += 1
        if parts:
            first, covered = parts[0]
            parts[0] = (first[0].upper() + first[1:], covered)
        return parts

    def sentence(self) -> str:
        parts = self.phrases()
        if not parts and self.open_loop_only:
            return (f"{self.dataset}: measured at request rates only (open loop): see the load and capacity "
                    f"figures and the table.")
        if not parts:
            return f"{self.dataset}: no speculative row has a speedup (no paired baseline completed)."
        return f"{self.dataset}: " + "; ".join(p for p, _ in parts) + "."


def verdicts(rows: list[TrialResult]) -> list[Verdict]:
    """A verdict per dataset from the rows that carry a speedup (COMPLETE, paired with a baseline)."""
    rated = [r for r in rows if r.state == TrialState.COMPLETE and r.speedup is not None
             and r.request_rate is None]  # the verdict speaks of concurrency: closed-loop rows
    batch_varies = _batch_varies(rows)
    out = []
    for ds in sorted({r.dataset for r in rows}):
        by_conc: dict[int, list[TrialResult]] = {}
        for r in rated:
            if r.dataset == ds:
                by_conc.setdefault(r.concurrency, []).append(r)
        clauses = []
        for conc in sorted(by_conc):
            rs = by_conc[conc]
            surely_faster = [r for r in rs if r.speedup_ci_low is not None and r.speedup_ci_low > 1.0]
            best = max(surely_faster or rs, key=lambda r: r.speedup or 0.0)  # rated: every speedup is set
            lo, hi = best.speedup_ci_low, best.speedup_ci_high
            if surely_faster:
                kind = "faster"
            elif lo is None or hi is None:
                kind = "no_interval"
            elif all(r.speedup_ci_high is not None and r.speedup_ci_high < 1.0 for r in rs):
                kind = "slower"
            else:
                kind = "unclear"
            suspect = tuple(f for f in (best.flags or "").split(",") if f in SUSPECT_FLAGS)
            clauses.append(VerdictClause(conc, kind, config_label(best, batch_varies), best.speedup or 0.0, lo, hi,
                                         best.trial, suspect))
        open_only = not any(r.request_rate is None for r in rows if r.dataset == ds)
        out.append(Verdict(ds, tuple(clauses), open_loop_only=open_only))
    return out


def _batch_varies(rows: list[TrialResult]) -> bool:
    return len({r.max_num_seqs for r in rows}) > 1 or len({r.max_num_batched_tokens for r in rows}) > 1


@dataclass(frozen=True)
class EnvironmentSummary:
    environment_ids: tuple[int, ...]  # environments that agree on every compared field (method fields aside)
    fields: tuple[tuple[str, str], ...]  # (name, value) shown in the context block


@dataclass(frozen=True)
class ReportContext:
    sweep: str
    store: str
    spec_path: str | None
    spec_hash: str | None
    commits: tuple[str, ...]
    backends: tuple[str, ...]
    environments: tuple[EnvironmentSummary, ...]
    environment_differences: tuple[str, ...]  # compared fields that differ between the rows' environments
    workload: tuple[tuple[str, str], ...]
    measurement: tuple[tuple[str, str], ...]

    @property
    def simulated(self) -> bool:
        return "fake" in self.backends


@dataclass
class ReportData:
    sweep: str
    rows: list[TrialResult]  # every row of trial_results for the sweep (any state)
    completed: list[TrialResult]
    verdicts: list[Verdict]
    context: ReportContext
    crossover: list[CrossoverRow] = field(default_factory=list)
    batch_varies: bool = False
    capacity: list[CapacityResult] = field(default_factory=list)  # capacity_results rows (search.sampler capacity)
    requests: list[RequestAcceptanceRow] = field(default_factory=list)  # per-request AL


_ENV_SHOWN = ("cpu_model", "cpu_count", "cpu_isa", "gpu_model", "gpu_count", "gpu_driver", "cuda_version", "vllm_version",
              "vllm_distribution", "torch_version", "transformers_version", "ray_version", "python_version",
              "platform", "hostname", "model_identity", "dtype", "dtype_reason", "model_dtype_effective",
              "max_model_len", "process_niceness", "cpu_affinity", "env_LD_PRELOAD",
              "attention_backend", "enable_prefix_caching", "async_scheduling", "engine_args")


def _show(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_show(x)}" for k, x in v.items())
    return "-" if v is None else str(v)


def _environment_summaries(envs: dict[int, EnvironmentRow | None]) -> tuple[list[EnvironmentSummary], list[str]]:
    groups: list[list[int]] = []
    for i in envs:
        for g in groups:
            if not fingerprint_diff(envs[g[0]], envs[i], same_method=False):
                g.append(i)
                break
        else:
            groups.append([i])
    differences: list[str] = []
    for g in groups[1:]:
        for d in fingerprint_diff(envs[groups[0][0]], envs[g[0]], same_method=False):
            if d not in differences:
                differences.append(d)
    out = []
    for g in groups:
        env = envs[g[0]]
        facts = env.facts() if env is not None else {}
        engine: dict[str, Any] = facts["engine"] if isinstance(facts.get("engine"), dict) else {}
        shown = []
        for name in _ENV_SHOWN:
            v = facts.get(name, engine.get(name))
            if v is not None or name in ENVIRONMENT_FIELDS:
                shown.append((name, _show(v)))
        out.append(EnvironmentSummary(tuple(g), tuple(shown)))
    return out, differences


def report_data(store: Store, sweep: str) -> ReportData:
    rows = store.trial_results(sweep)
    completed = [r for r in rows if r.state == TrialState.COMPLETE]
    if not completed:
        raise ValueError(f"sweep {sweep!r} has no completed trial to report")
    record = store.get_sweep(sweep)
    spec = (record.spec if record else None) or {}
    fingerprints = {i: store.environment(i) for i in sorted({r.environment_id for r in completed
                                                              if r.environment_id is not None})}
    envs, differences = _environment_summaries(fingerprints)
    commits = tuple(sorted({str(f.fact("specsweep_commit")) for f in fingerprints.values()
                            if f is not None and f.fact("specsweep_commit")}))
    wl = spec.get("workload", {})
    datasets = sorted({r.dataset for r in completed})
    workload = [("datasets", ", ".join(datasets)), ("prompts per window", _show(wl.get("num_prompts"))),
                ("max output tokens", _show(wl.get("max_tokens"))), ("ignore_eos", _show(wl.get("ignore_eos"))),
                ("temperature", _show(wl.get("temperature"))), ("top_p", _show(wl.get("top_p"))),
                ("sampling seed", _show(wl.get("seed")))]
    if "random" in datasets:
        workload.append(("random prompt tokens", _show(wl.get("random_input_len"))))
    target = spec.get("target", {})
    workload.insert(0, ("target", _show(target.get("model"))))
    ms = spec.get("measurement", {})
    ci_methods = sorted({r.speedup_ci_method for r in completed if r.speedup_ci_method})
    repeats = sorted({r.repeats for r in completed if r.repeats is not None})
    measurement = [("repeats (windows kept per trial)", ", ".join(map(str, repeats)) or "-"),
                   ("first window discarded", _show(ms.get("discard_first_window"))),
                   ("warm-up requests discarded", _show(ms.get("warmup_requests"))),
                   ("order", _show(ms.get("order"))),
                   ("confidence", _show(ms.get("confidence"))),
                   ("speedup interval", "; ".join(ci_methods) or "none (1 repeat: no interval)"),
                   ("paired baseline", _show(ms.get("paired_baseline"))),
                   ("search", _show((spec.get("search") or {}).get("sampler")))]
    context = ReportContext(
        sweep=sweep, store=store.display_url, spec_path=record.spec_path if record else None,
        spec_hash=record.spec_hash if record else None,
        commits=commits, backends=tuple(sorted({r.backend for r in completed if r.backend})),
        environments=tuple(envs), environment_differences=tuple(differences), workload=tuple(workload),
        measurement=tuple(measurement))
    return ReportData(sweep=sweep, rows=rows, completed=completed, verdicts=verdicts(rows), context=context,
                      crossover=store.crossover(sweep), batch_varies=_batch_varies(completed),
                      capacity=store.capacity_results(sweep), requests=store.request_acceptance(sweep))
