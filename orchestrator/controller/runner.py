"""Run a sweep: an Optuna study (ask/tell) chooses trials, the engine pool measures them, the store keeps
every row. Grid sweeps enqueue every point up front (so engines are reused across all load points of a
configuration); adaptive samplers ask as engines free up.

Resume: running a sweep name that exists continues it. Completed trials are never re-run; trials a killed
controller left RUNNING are failed ("interrupted"); failed trials are re-queued (once per invocation) with
`retry_failed`. A different spec under the same name is refused with the list of changed fields.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..datasets import load_prompts
from ..engines.vllm_backend import vllm_env
from ..errors import SpecError, SpecIssue
from ..methods.checks import check_methods
from ..metrics import median_over_repeats
from ..validity import coefficient_of_variation, trial_flags
from ..models import resolve_model
from ..paths import cache_dir
from ..spec import LoadedSpec
from ..store import Store
from .pairing import compare_with_baseline
from .plan import point_key, sampling_settings
from .pool import EnginePool, PoolEvent, TrialRun
from .ray_session import ensure_ray
from .space import SearchSpace
from .study import constraint_values, fail_stale_trials, feasible, objective_values, open_study


class Interrupted(Exception):
    """SIGTERM or Ctrl-C during a sweep."""


@dataclass
class RunOutcome:
    sweep_id: int
    sweep: str = ""
    completed: int = 0
    failed: int = 0
    skipped: int = 0
    baselines: int = 0  # paired baselines measured (trials the controller added, not the sampler)
    reused: int = 0  # adaptive samplers: a point measured before, told again without running
    engine_starts: int = 0
    ray_init_s: float = 0.0  # part of wall_s spent connecting to / starting Ray
    interrupted: bool = False
    wall_s: float = 0.0


Reporter = Callable[[str, dict[str, Any]], None]


def _noop(event: str, data: dict[str, Any]) -> None:
    pass


def spec_diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    """Human-readable differences between two spec dicts (for refusing a changed spec under one name)."""
    out = []
    for k in sorted(set(old) | set(new)):
        p = f"{prefix}{k}"
        a, b = old.get(k, "<absent>"), new.get(k, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(spec_diff(a, b, p + "."))
        elif a != b:
            out.append(f"{p}: {json.dumps(a, default=str)} -> {json.dumps(b, default=str)}")
    return out


def _engine_actor_class(loaded: LoadedSpec):
    import ray

    from ..engines.actor import EngineActor

    e, r = loaded.spec.engine, loaded.spec.resources
    env = vllm_env(e.cpu_kvcache_space_gb, str(cache_dir())) if e.backend == "vllm" else {}
    opts: dict[str, Any] = {
        # vLLM keeps its own threads; the reservation is for Ray's scheduling of engines at once.
        "num_cpus": r.cpus_per_engine if e.backend == "vllm" else 0.01,
        "num_gpus": r.gpus_per_engine,
        "max_restarts": 0,
    }
    if r.accelerator_type:
        opts["accelerator_type"] = r.accelerator_type
    if env:
        opts["runtime_env"] = {"env_vars": env}
    return ray.remote(EngineActor).options(**opts)


def _max_engines(loaded: LoadedSpec) -> int:
    """How many engines at once: the spec's setting, else what the cluster's resources allow."""
    import ray

    r = loaded.spec.resources
    if r.max_parallel_engines:
        return r.max_parallel_engines
    if loaded.spec.engine.backend == "fake":
        return 1
    total = ray.cluster_resources()
    by_gpu = int(total.get("GPU", 0) // r.gpus_per_engine) if r.gpus_per_engine > 0 else None
    by_cpu = int(total.get("CPU", 1) // r.cpus_per_engine) if r.cpus_per_engine > 0 else None
    if r.gpus_per_engine == 0:
        return 1  # CPU engines compete for the same cores: one at a time unless the spec says otherwise
    return max(1, min(x for x in (by_gpu, by_cpu) if x is not None))


class _SignalGuard:
    """SIGTERM / Ctrl-C during a sweep set a flag that the scheduling loop checks between waits (raising
    inside Ray's blocking calls corrupts them). A second Ctrl-C raises KeyboardInterrupt at once."""

    def __init__(self):
        self.why: str | None = None

    def __enter__(self):
        def handler(signum, frame):
            if self.why is not None and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.why = signal.Signals(signum).name

        self.previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.previous[sig] = signal.signal(sig, handler)
            except ValueError:  # not the main thread: leave signals alone
                pass
        return self

    def check(self) -> None:
        if self.why is not None:
            raise Interrupted(self.why)

    def __exit__(self, *exc):
        for sig, prev in self.previous.items():
            signal.signal(sig, prev)
        return False


class SweepController:
    """One sweep's run: owns the study, the pool, and the bookkeeping between them and the store."""

    def __init__(self, loaded: LoadedSpec, store: Store, name: str, report: Reporter, retry_failed: bool):
        self.loaded, self.store, self.name, self.report = loaded, store, name, report
        self.spec = loaded.spec
        self.search = self.spec.search
        self.retry_failed = retry_failed
        self.t_start = time.perf_counter()
        self.row_of_number: dict[int, int] = {}  # Optuna trial number -> sweep_trials row id
        self.baseline_rows: dict[str, tuple[int, str]] = {}  # adaptive: baseline point key -> (row id, state)
        self._next_round: list[TrialRun] = []

    # ---- preparation (nothing written until every input is checked) ---------------------------------
    def prepare(self) -> None:
        spec = self.spec
        existing = self.store.get_sweep(self.name)
        spec_json = spec.model_dump(mode="json")
        if existing and existing["spec_hash"] != self.loaded.spec_hash:
            diff = spec_diff(existing["spec"], spec_json)
            raise SpecError([SpecIssue(self.loaded.path, None, "name",
                                       f"a sweep named {self.name!r} already exists in {self.store.display_url} with "
                                       f"a different spec; use --new-name NAME to start a new sweep. Changed:\n  "
                                       + "\n  ".join(diff))])
        w = spec.workload
        self.prompts = {}
        for ds in w.datasets:
            try:
                self.prompts[ds] = load_prompts(ds, num_prompts=w.num_prompts, path=w.path_for(ds),
                                                shuffle_seed=w.shuffle_seed, input_len=w.random_input_len)
            except ValueError as e:
                raise SpecError([self.loaded.issue(("workload", "dataset"), str(e))]) from None
        model_path = resolve_model(spec.target.model) if spec.engine.backend == "vllm" else spec.target.model
        self.notes = check_methods(self.loaded, model_path if spec.engine.backend == "vllm" else None)
        for note in self.notes:
            self.report("note", {"message": note})
        self.space = SearchSpace(self.loaded, model_path)
        self.sampling = sampling_settings(self.loaded)
        self.workload_hash = workload_hash(self.prompts, self.sampling)
        self.commit = git_commit()
        if existing:
            self.sweep_id = existing["id"]
            self.store.set_sweep_status(self.sweep_id, "running")
        else:
            self.sweep_id = self.store.create_sweep(self.name, self.loaded.spec_hash, spec_json, self.loaded.path)
        self.outcome = RunOutcome(sweep_id=self.sweep_id, sweep=self.name)
        self.study = open_study(self.loaded, self.store.url, f"specsweep:{self.name}")
        fail_stale_trials(self.study)
        # Rows a killed controller left RUNNING: that attempt was interrupted.
        for r in self.store.trials(self.sweep_id):
            if r["state"] == "RUNNING":
                self.store.fail_trials([r["id"]], "interrupted (controller stopped)")

    # ---- Optuna bookkeeping -----------------------------------------------------------------------
    def _tell(self, run: TrialRun, summary: dict | None) -> None:
        """Report a finished trial to Optuna: tell() for asked trials; grid points are added as finished
        trials (no ask needed, which keeps a large grid's setup to nothing). Failed or objective-less
        trials are FAIL. Never raises: the measurement is already stored."""
        import optuna

        if run.role == "paired_baseline":
            return  # not a point the sampler chose
        state = optuna.trial.TrialState
        values = objective_values(self.search, summary) if summary is not None else None
        constraints = constraint_values(self.search, summary) if summary is not None else {}
        try:
            if run.handle is not None:
                trial = run.handle
                for key, value in constraints.items():
                    trial.set_constraint(key, value)
                if values is None:
                    self.study.tell(trial, state=state.FAIL)
                else:
                    self.study.tell(trial, values if len(values) > 1 else values[0])
                return
            frozen = optuna.trial.create_trial(
                state=state.COMPLETE if values is not None else state.FAIL, values=values, params=run.params,
                distributions=self.space.distributions(run.params), constraints=constraints or None)
            storage = self.study._storage
            trial_id = storage.create_new_trial(self.study._study_id, template_trial=frozen)
            number = storage.get_trial_number_from_id(trial_id)
            self.store.update_trial(run.trial_id, optuna_trial_number=number)
            self.row_of_number[number] = run.trial_id
        except Exception as e:
            self.report("warning", {"message": f"optuna bookkeeping failed for trial row {run.trial_id}: {e}"})

    def _new_run(self, trial, params: dict[str, Any], row_id: int | None = None) -> TrialRun:
        planned = self.space.planned_trial(params)
        if row_id is None:
            (row_id,) = self.store.add_trials(self.sweep_id, [planned.row(params)])
        self.store.update_trial(row_id, optuna_trial_number=trial.number)
        self.row_of_number[trial.number] = row_id
        return TrialRun(trial_id=row_id, planned=planned, params=params, handle=trial)

    # ---- the loop ---------------------------------------------------------------------------------
    def run(self, ray_address: str | None) -> RunOutcome:
        rows = self.store.trials(self.sweep_id)
        by_key = {r["point_key"]: r for r in rows}
        completed = {r["point_key"]: r for r in rows if r["state"] == "COMPLETE"}
        grid = self.search.sampler == "grid"
        queue: list[tuple[dict, int | None]] = []  # (params, existing row id) to run
        grid_runs: list[TrialRun] = []  # grid: every point to run, each planned once
        if grid:
            points = self.space.grid()
            if self.search.n_trials:
                points = points[: self.search.n_trials]
            pairs, baselines = self.space.grid_baselines(points, self.spec.measurement.paired_baseline)
            roles = {point_key(p): "paired_baseline" for p in baselines}
            for params in points + baselines:
                row = by_key.get(point_key(params))
                if row is None:
                    queue.append((params, None))
                elif row["state"] == "PENDING" or (row["state"] == "FAIL" and self.retry_failed):
                    if row["state"] == "FAIL":
                        self.store.requeue_trial(row["id"])
                    queue.append((params, row["id"]))
                else:
                    self.outcome.skipped += 1
            planned = [self.space.planned_trial(p) for p, _ in queue]
            new_ids = iter(self.store.add_trials(
                self.sweep_id, [pl.row(p, roles.get(point_key(p), "search"))
                                for (p, rid), pl in zip(queue, planned) if rid is None]))
            grid_runs = [TrialRun(trial_id=rid if rid is not None else next(new_ids), planned=pl, params=p,
                                  role=roles.get(point_key(p), "search"))
                         for (p, rid), pl in zip(queue, planned)]
            ids = {r["point_key"]: r["id"] for r in self.store.trials(self.sweep_id)}
            for key, base_key in pairs.items():
                if key in ids and base_key in ids and (by_key.get(key) or {}).get("baseline_trial_id") != ids[base_key]:
                    self.store.link_baseline(ids[key], ids[base_key])
            target = len(grid_runs)
        else:
            done = sum(1 for r in rows if r["state"] in ("COMPLETE", "FAIL"))
            retry = [r for r in rows if r["state"] == "FAIL" and r["role"] == "search"] if self.retry_failed else []
            for r in retry:
                self.store.requeue_trial(r["id"])
                queue.append((r["params"], r["id"]))
            target = max(0, (self.search.n_trials or 20) - done) + len(retry)
            self.outcome.skipped = done - len(retry)
            for r in rows:  # paired baselines left over: measured again when a trial asks for them
                if r["role"] == "paired_baseline" and (r["state"] == "PENDING" or (
                        r["state"] == "FAIL" and self.retry_failed)):
                    if r["state"] == "FAIL":
                        self.store.requeue_trial(r["id"])
                    self.baseline_rows[r["point_key"]] = (r["id"], "PENDING")
                elif r["role"] == "paired_baseline":
                    self.baseline_rows[r["point_key"]] = (r["id"], r["state"])
            for params, _ in queue:  # retried points go first, through ask()
                self.study.enqueue_trial(params, skip_if_exists=False)

        n_engines_hint = len({r.config_hash for r in grid_runs}) if grid else None
        self.report("plan", {"sweep": self.name, "sweep_id": self.sweep_id, "sampler": self.search.sampler,
                             "todo": target, "skipped": self.outcome.skipped, "engines": n_engines_hint,
                             "store": self.store.display_url})
        if target == 0:
            self._finish()
            return self.outcome

        import ray

        t_ray = time.perf_counter()
        self.report("ray", {"connected": ensure_ray(ray_address)})
        self.outcome.ray_init_s = time.perf_counter() - t_ray
        m = self.spec.measurement
        prompts, sampling = self.prompts, self.sampling
        pool = EnginePool(
            _engine_actor_class(self.loaded), max_engines=_max_engines(self.loaded), repeats=m.repeats,
            start_timeout_s=self.spec.engine.start_timeout_s, trial_timeout_s=m.trial_timeout_s,
            measure_args=lambda run: (run.planned.dataset, run.planned.concurrency, m.warmup_requests,
                                      m.request_timeout_s, m.discard_first_window),
            actor_args=(ray.put(prompts), sampling),
        )
        self.report("pool", {"max_engines": pool.max_engines})
        queued_rows = [rid for _, rid in queue] if not grid else []
        rotated = grid and m.order == "rotated" and m.repeats > 1
        next_round = self._next_round  # rotated: trials waiting for the next round of windows
        asked = 0
        deadline = self.t_start + self.search.timeout_s if self.search.timeout_s else None
        try:
            with _SignalGuard() as guard:
                while True:
                    guard.check()
                    # grid: every point goes to the pool at once (engine reuse across load points)
                    for run in grid_runs:
                        asked += 1
                        run.windows_wanted = 1 if rotated else m.repeats
                        for ev in pool.submit(run):
                            self._on_event(ev, pool)
                    grid_runs.clear()
                    if rotated and not pool.pending and not any(s.state == "busy" for s in pool.slots) and next_round:
                        # a round is over: every trial's next window, the warm engine's configuration first
                        for run in next_round:
                            run.windows_wanted = len(run.windows) + 1
                            for ev in pool.submit(run):
                                self._on_event(ev, pool)
                        next_round.clear()
                    # adaptive: ask one trial per free engine slot
                    while not grid and asked < target and (deadline is None or time.perf_counter() < deadline) and (
                            pool.in_flight < pool.max_engines):
                        trial = self.study.ask()
                        params = self.space.suggest(trial)
                        asked += 1
                        row_id = queued_rows.pop(0) if queued_rows else None
                        key = point_key(params)
                        if row_id is None and key in completed:
                            # measured before: tell the stored result instead of spending engine time
                            self.row_of_number[trial.number] = completed[key]["id"]
                            self._tell(TrialRun(trial_id=completed[key]["id"], planned=self.space.planned_trial(params),
                                                params=params, handle=trial), self._stored_summary(completed[key]))
                            self.outcome.reused += 1
                            continue
                        run = self._new_run(trial, params, row_id)
                        run.windows_wanted = m.repeats
                        for ev in pool.submit(run):
                            self._on_event(ev, pool)
                        self._ensure_baseline(run, pool)
                    if deadline is not None and time.perf_counter() >= deadline and not pool.closing:
                        # wall-clock budget spent: running trials finish, nothing new starts
                        if pool.pending:
                            self.report("warning", {"message": f"search.timeout_s reached: {len(pool.pending)} trials "
                                                               f"left PENDING (run again to continue)"})
                        pool.pending.clear()
                        pool.closing = True
                    if asked >= target and not (rotated and (next_round or any(
                            (r.windows_wanted or 0) < m.repeats for r in self._in_pool(pool)))):
                        pool.closing = True
                    if not pool.busy:
                        break
                    for ev in pool.step(wait_s=0.5):
                        self._on_event(ev, pool)
                    guard.check()
        except (KeyboardInterrupt, Interrupted) as e:
            why = str(e) or "Ctrl-C"
            for ev in pool.interrupt("interrupted"):
                self._on_event(ev, pool)
            for run in pool.pending + next_round:
                if run.windows:  # started in an earlier round: its windows are lost with it
                    self.store.fail_trials([run.trial_id], why)
                elif run.handle is not None:  # never started: its row stays PENDING and runs on resume
                    self._tell(run, None)
            self.outcome.interrupted = True
            self.outcome.engine_starts = pool.engine_starts
            self.store.set_sweep_status(self.sweep_id, "interrupted")
            self.outcome.wall_s = time.perf_counter() - self.t_start
            self.report("interrupted", {"why": why})
            return self.outcome
        finally:
            pool.shutdown()
        self.outcome.engine_starts = pool.engine_starts
        self._finish()
        return self.outcome

    def _stored_summary(self, row: dict) -> dict:
        return self.store.trial_result(row["id"])

    def _on_event(self, ev: PoolEvent, pool: EnginePool) -> None:
        run = ev.run
        if ev.kind == "engine_start":
            self.report("engine_start", {"label": ev.slot.engine.method_label, "config_hash": ev.slot.config_hash})
        elif ev.kind == "engine_ready":
            ev.slot.info["fingerprint"].update(workload_hash=self.workload_hash, spec_hash=self.loaded.spec_hash,
                                               specsweep_commit=self.commit)
            ev.slot.info["environment_id"] = self.store.environment_id(ev.slot.info["fingerprint"])
            self.report("engine_ready", {"label": ev.slot.engine.method_label, "start_s": ev.slot.info["start_wall_s"]})
        elif ev.kind == "engine_failed":
            self.report("engine_failed", {"label": ev.slot.engine.method_label, "error": ev.error})
        elif ev.kind == "engine_retired":
            self.report("engine_retired", {"label": ev.slot.engine.method_label, "served": ev.slot.served})
        elif ev.kind == "trial_start":
            info = ev.slot.info or {}
            if not run.windows:
                self.store.mark_running(run.trial_id, info.get("environment_id"), run.engine_start_s, info.get("pid"),
                                        run.dispatched_at - run.queued_at)
            self.report("trial_start", dict(self._describe(run), window=len(run.windows) + 1))
        elif ev.kind == "trial_done":
            m = self.spec.measurement
            if len(run.windows) < m.repeats:  # rotated: more rounds to come
                self._next_round.append(run)
                self.report("window_done", dict(self._describe(run), windows=len(run.windows)))
                return
            summary = median_over_repeats(run.windows)
            cv = coefficient_of_variation([w.get("output_tok_s") for w in run.windows])
            flags = trial_flags(k=run.planned.point.num_speculative_tokens, windows=run.windows, outputs=run.outputs,
                                max_tokens=self.sampling.max_tokens, ignore_eos=self.sampling.ignore_eos,
                                prefix_caching=bool(self.spec.engine.enable_prefix_caching), cv=cv, noisy_cv=m.noisy_cv)
            summary.update(output_tok_s_cv=cv, trial_flags=",".join(flags) or None)
            mem = [w["memory_mb"] for w in run.windows if w.get("memory_mb") is not None]
            ok = feasible(self.search, summary) if self.search.constraints else None
            self.store.complete_trial(
                run.trial_id, run.windows, summary, {"warmup_s": run.warmup_s, "measure_s": run.measure_s},
                run.outputs, feasible=ok,
                trial_values={"flags": summary["trial_flags"], "memory_kind": run.windows[-1].get("memory_kind"),
                              "engine_memory_mb": max(mem) if mem else None,
                              "kv_cache_tokens": (run.engine_info or {}).get("kv_cache_tokens")})
            self._tell(run, summary)
            self._pair(run.trial_id)
            if run.role == "paired_baseline":
                self.outcome.baselines += 1
            else:
                self.outcome.completed += 1
            self.report("trial_done", dict(self._describe(run), summary=summary, flags=flags,
                                           comparison=self.store.comparison(run.trial_id)))
        elif ev.kind == "trial_failed":
            self.store.fail_trials([run.trial_id], ev.error)
            self._tell(run, None)
            self._pair(run.trial_id)
            self.outcome.failed += 1
            self.report("trial_failed", dict(self._describe(run), error=ev.error))

    @staticmethod
    def _describe(run: TrialRun) -> dict:
        return {"trial_id": run.trial_id, "label": run.planned.point.label, "k": run.planned.point.num_speculative_tokens,
                "concurrency": run.planned.concurrency, "dataset": run.planned.dataset}

    # ---- paired baselines -------------------------------------------------------------------------
    def _ensure_baseline(self, run: TrialRun, pool: EnginePool) -> None:
        """Adaptive samplers: the asked trial's baseline is measured too (once per load point)."""
        bp = self.space.baseline_params(run.params)
        if bp is None or not self.spec.measurement.paired_baseline:
            return
        key = point_key(bp)
        rows = {r["point_key"]: r for r in self.store.trials(self.sweep_id)} if key not in self.baseline_rows else {}
        if key not in self.baseline_rows and key in rows:
            self.baseline_rows[key] = (rows[key]["id"], rows[key]["state"])
        rid, state = self.baseline_rows.get(key, (None, None))
        planned = self.space.planned_trial(bp)
        if rid is None:
            (rid,) = self.store.add_trials(self.sweep_id, [planned.row(bp, "paired_baseline")])
            state = "PENDING"
        if state == "PENDING":
            b = TrialRun(trial_id=rid, planned=planned, params=bp, role="paired_baseline",
                         windows_wanted=self.spec.measurement.repeats)
            for ev in pool.submit(b):
                self._on_event(ev, pool)
            state = "QUEUED"
        self.baseline_rows[key] = (rid, state)
        self.store.link_baseline(run.trial_id, rid)

    def _pair(self, trial_id: int) -> None:
        """Compare whatever became comparable when `trial_id` finished: the trial with its baseline, or a
        baseline with the trials that wait for it."""
        row = self.store.trial(trial_id)
        todo = []
        if row and row["baseline_trial_id"] is not None and row["state"] == "COMPLETE":
            base = self.store.trial(row["baseline_trial_id"])
            if base and base["state"] in ("COMPLETE", "FAIL"):
                todo.append((trial_id, row["baseline_trial_id"]))
        if row and row["state"] in ("COMPLETE", "FAIL"):
            todo += [(t["id"], trial_id) for t in self.store.paired_trials(trial_id) if t["state"] == "COMPLETE"]
        m = self.spec.measurement
        for tid, bid in todo:
            try:
                compare_with_baseline(self.store, tid, bid, temperature=self.sampling.temperature,
                                      confidence=m.confidence, resamples=m.bootstrap_resamples,
                                      threshold=m.lossless_threshold, allow_mismatch=m.allow_mismatch,
                                      seed=self.search.seed)
            except Exception as e:  # the measurements are stored; a comparison can be recomputed
                self.report("warning", {"message": f"comparing trial row {tid} with baseline row {bid} failed: "
                                                   f"{type(e).__name__}: {e}"})

    @staticmethod
    def _in_pool(pool: EnginePool) -> list[TrialRun]:
        return list(pool.pending) + [s.run for s in pool.slots if s.run is not None]

    def _finish(self) -> None:
        for r in self.store.trials(self.sweep_id):  # comparisons that never happened (e.g. resumed sweeps)
            if r["baseline_trial_id"] is not None and r["state"] == "COMPLETE" and self.store.comparison(r["id"]) is None:
                self._pair(r["baseline_trial_id"])
        try:
            front = self.study.best_trials
        except Exception:  # e.g. no completed trial yet
            front = []
        rows = {r["optuna_trial_number"]: r["id"] for r in self.store.trials(self.sweep_id)}
        rows.update(self.row_of_number)  # this run's numbers, including re-told duplicates
        self.store.set_pareto_front(self.sweep_id, [rows[t.number] for t in front if t.number in rows])
        failed_rows = sum(1 for r in self.store.trials(self.sweep_id) if r["state"] == "FAIL")
        self.store.set_sweep_status(self.sweep_id, "complete" if failed_rows == 0 else "failed")
        self.outcome.wall_s = time.perf_counter() - self.t_start


def run_sweep(loaded: LoadedSpec, store: Store, *, ray_address: str | None = None, report: Reporter = _noop,
              retry_failed: bool = False, new_name: str | None = None) -> RunOutcome:
    """Run (or resume) a sweep. Raises SpecError / ModelError before anything is written."""
    ctl = SweepController(loaded, store, new_name or loaded.spec.name, report, retry_failed)
    ctl.prepare()
    return ctl.run(ray_address)


def workload_hash(prompts: dict[str, list], sampling) -> str:
    """Identity of what every engine is asked: prompts (ids, messages, lengths) and sampling settings."""
    import dataclasses
    import hashlib

    doc = {"prompts": {ds: [[p.id, list(p.messages), p.input_len] for p in ps] for ds, ps in sorted(prompts.items())},
           "sampling": dataclasses.asdict(sampling)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def git_commit() -> str | None:
    """The specsweep checkout's commit (None outside a git checkout, e.g. an installed wheel)."""
    import subprocess
    from pathlib import Path

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
