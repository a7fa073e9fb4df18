"""Capacity searches, recommendations, nightly runs, leases and the store's own metadata."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from .base import metadata

# search.sampler capacity: one row per configuration (method point x engine settings x dataset) and sweep (0007)
sweep_capacity = Table(
    "sweep_capacity", metadata,
    Column("id", Integer, primary_key=True,
           comment="Capacity result id (capacity_results.capacity_id)"),
    Column("sweep_id", Integer, ForeignKey("sweeps.id", ondelete="CASCADE"), nullable=False, index=True,
           comment="The sweep that ran the search (sweeps.id)"),
    Column("config_key", String(512), nullable=False,
           comment="Canonical JSON of the configuration's parameters (without a load point): its identity in "
                   "the sweep"),
    Column("method_label", String(120), nullable=False,
           comment="The method's label as the spec names it"),
    Column("method", String(64),
           comment="Speculative decoding method (baseline, ngram, eagle3, ...); NULL: the configuration has no "
                   "probe"),
    Column("num_speculative_tokens", Integer,
           comment="K, draft tokens per verify step; NULL: baseline, or no probe"),
    Column("drafter", Text,
           comment="The drafter model (hub id or path); NULL: none, or no probe"),
    Column("dataset", String(120), nullable=False,
           comment="Workload dataset the probes ran"),
    Column("max_num_seqs", Integer,
           comment="vLLM's batch limit (requests per step) the engine ran with; NULL: vLLM's default"),
    Column("max_num_batched_tokens", Integer,
           comment="vLLM's limit on tokens per engine step the engine ran with; NULL: vLLM's default"),
    Column("engine_config_hash", String(32),
           comment="Hash of the engine configuration (as sweep_trials.engine_config_hash); NULL: no probe"),
    Column("target_attainment", Float, nullable=False,
           comment="Share of requests (0 to 1) that had to meet the SLO for a rate to pass"),
    Column("slo", JSON, nullable=False,
           comment="The per-request SLO thresholds as JSON (measurement.slo: ttft_ms, tpot_ms, e2e_ms)"),
    Column("status", String(16), nullable=False,
           comment="bracketed (capacity between the two rates) | above_max (passed at max_rate) | below_min "
                   "(failed at min_rate) | probe_limit (max_probes spent) | failed (a probe's trial failed) | "
                   "non_monotone (a rate passed above one that failed) | stalled (the next probe would repeat one)"),
    Column("max_rate_within_slo", Float,
           comment="Highest probed rate that met the target attainment, requests/s (the offered rate where "
                   "measured); NULL: none did"),
    Column("first_failing_rate", Float,
           comment="Lowest probed rate that missed the target attainment, requests/s (offered where measured); "
                   "NULL: none did"),
    Column("probes", JSON, nullable=False,
           comment="JSON list in probe order: {rate (nominal), offered_rate, attainment (median over windows; "
                   "null: trial failed), trial_id}"),
    Column("created_at", DateTime(timezone=True), nullable=False,
           comment="When the search's result was written (UTC)"),
    UniqueConstraint("sweep_id", "config_key", name="uq_sweep_capacity_config"),
    comment="One row per capacity-search configuration (method point x engine settings x dataset) of a sweep: "
            "the highest request rate that met the SLO target, bracketed",
)

# specsweep recommend: a draft-length schedule per (sweep, method label, dataset), with its evidence (0008)
sweep_recommendations = Table(
    "sweep_recommendations", metadata,
    Column("id", Integer, primary_key=True,
           comment="Recommendation id"),
    Column("sweep_id", Integer, ForeignKey("sweeps.id", ondelete="CASCADE"), nullable=False, index=True,
           comment="The sweep whose rows it was derived from (sweeps.id)"),
    Column("method_label", String(120), nullable=False,
           comment="The method's label as the spec names it"),
    Column("method", String(64), nullable=False,
           comment="Speculative decoding method of the label (eagle3, ngram, ...)"),
    Column("dataset", String(120), nullable=False,
           comment="Workload dataset the schedule was derived for"),
    Column("schedule", Text, nullable=False,
           comment="Draft length by batch size, e.g. '1-3:3, 4-7:1, 8-16:0' (inclusive batch ranges : K; 0: do "
                   "not draft), vLLM's num_speculative_tokens_per_batch_size"),
    Column("speculative_config", JSON,
           comment="JSON ready for vLLM's --speculative-config carrying the schedule; NULL: no K beats the "
                   "baseline anywhere (do not speculate)"),
    Column("best_fixed_k", Integer,
           comment="The single K with the highest geometric-mean speedup over the measured concurrencies"),
    Column("evidence", JSON, nullable=False,
           comment="JSON list per concurrency: the chosen k, the reason, whether proven by intervals, and the "
                   "K options with speedup and interval"),
    Column("created_at", DateTime(timezone=True), nullable=False,
           comment="When the recommendation was written (UTC)"),
    UniqueConstraint("sweep_id", "method_label", "dataset", name="uq_sweep_recommendations"),
    comment="One row per (sweep, method label, dataset) of specsweep recommend: a draft-length schedule by batch "
            "size with its evidence",
)

# ---- nightly regression runs (specsweep nightly) --------------------------------------------------------
nightly_runs = Table(
    "nightly_runs", metadata,
    Column("id", Integer, primary_key=True,
           comment="Nightly run id"),
    Column("suite", String(120), nullable=False, index=True,
           comment="The nightly suite's name (its suite file's suite:)"),
    Column("status", String(16), nullable=False,
           comment="running | ok (no regression) | regression (at least one) | failed (the run itself failed)"),
    Column("started_at", DateTime(timezone=True), nullable=False,
           comment="When the run started (UTC): the night"),
    Column("finished_at", DateTime(timezone=True),
           comment="When the run finished (UTC); NULL while it runs"),
    Column("history_nights", Integer, nullable=False,
           comment="Previous nights each point is compared with (the suite's history)"),
    Column("regressions", Integer,
           comment="Verdicts of this run that are regression; NULL while it runs"),
    Column("host", String(255),
           comment="Host name of the machine that ran the nightly controller"),
    sqlite_autoincrement=True,
    comment="One row per nightly regression run (specsweep nightly) of a suite",
)

nightly_sweeps = Table(
    "nightly_sweeps", metadata,
    Column("run_id", Integer, ForeignKey("nightly_runs.id", ondelete="CASCADE"), primary_key=True,
           comment="The nightly run (nightly_runs.id)"),
    Column("sweep_id", Integer, ForeignKey("sweeps.id", ondelete="CASCADE"), primary_key=True,
           comment="A sweep that run ran (sweeps.id)"),
    Column("spec_name", String(120), nullable=False,
           comment="The sweep spec's name: the key that matches the same sweep across nights"),
    comment="One row per sweep a nightly run ran",
)

nightly_verdicts = Table(
    "nightly_verdicts", metadata,
    Column("id", Integer, primary_key=True,
           comment="Verdict id"),
    Column("run_id", Integer, ForeignKey("nightly_runs.id", ondelete="CASCADE"), nullable=False, index=True,
           comment="The nightly run (nightly_runs.id)"),
    Column("trial_id", Integer, ForeignKey("sweep_trials.id", ondelete="CASCADE"), nullable=False,
           comment="Tonight's trial of the point (sweep_trials.id)"),
    Column("spec_name", String(120), nullable=False,
           comment="The sweep spec's name, the key across nights"),
    Column("point_key", String(512), nullable=False,
           comment="The trial's point key (canonical JSON of its parameters): the point across nights"),
    Column("metric", String(64), nullable=False,
           comment="The metric judged, a metric column name (output_tok_s, tpot_ms_p50, ...)"),
    Column("value", Float,
           comment="Tonight's value of the metric (median over the trial's windows); NULL: not measured"),
    Column("history_median", Float,
           comment="Median of the metric over the comparable previous nights; NULL: none"),
    Column("history_n", Integer, nullable=False,
           comment="Comparable previous nights (same point, same environment fingerprint) the median is over"),
    Column("change", Float,
           comment="Relative change, value / history_median - 1; NULL: insufficient data"),
    Column("threshold", Float, nullable=False,
           comment="Relative worsening that counts as a regression for this metric (0.2 = 20 %)"),
    Column("verdict", String(24), nullable=False,
           comment="regression (worse beyond threshold) | suspicious (beyond half of it, or a noisy row) | ok | "
                   "insufficient data (too few previous nights)"),
    Column("note", Text,
           comment="Remark on the verdict, e.g. previous nights excluded for a different fingerprint; NULL: none"),
    comment="One row per point and metric of a nightly run: tonight's value against the previous nights' "
            "median",
)

# One row per (suite, held lock): two nightly runs of one suite never overlap.
# One live owner per resource: `sweep:<name>` (a controller running that sweep) or `nightly:<suite>`. Times are
# the database's clock in epoch seconds, so owners on machines with skewed clocks still agree on staleness.
leases = Table(
    "leases", metadata,
    Column("name", String(300), primary_key=True,
           comment="The resource held: sweep:<name> (a controller running that sweep) or nightly:<suite>"),
    Column("owner", String(300), nullable=False,
           comment="host:pid:random, unique per process and lease"),
    Column("host", String(255), nullable=False,
           comment="Host name of the owning process"),
    Column("pid", Integer, nullable=False,
           comment="Process id of the owner on its host"),
    Column("acquired_at", Float, nullable=False,
           comment="When the owner took the lease, epoch seconds on the database's clock"),
    Column("heartbeat_at", Float, nullable=False,
           comment="Last renewal by the owner, epoch seconds on the database's clock; a stale heartbeat lets "
                   "another process take over"),
    comment="One row per resource while a live owner holds it: a controller running a sweep or a nightly suite",
)

# Small facts about the store itself (the hash of the views' definitions, so they are recreated only on change).
store_meta = Table(
    "specsweep_meta", metadata,
    Column("key", String(64), primary_key=True,
           comment="Name of the fact, e.g. the views' definition hash"),
    Column("value", Text, nullable=False,
           comment="Its value, as text"),
    comment="Facts about the store itself, such as the hash of the views' definitions (recreated on change)",
)
