"""Run a sweep: engine groups in sequence, each on a fresh Ray actor, trials of a group on the warm engine.

(The Optuna-driven controller with a parallel engine pool builds on this; see issue 3.)
Failure policy: an engine that fails to start fails every trial of its configuration with the cause, once;
an actor that dies mid-trial fails that trial and a fresh actor serves the rest of the group; Ctrl-C or
SIGTERM fails the running trial with "interrupted" and leaves completed trials untouched.
"""

from __future__ import annotations

import json
import signal
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from ..datasets import load_prompts
from ..engines.vllm_backend import vllm_env
from ..errors import SpecError, SpecIssue
from ..metrics import median_over_repeats
from ..models import resolve_model
from ..paths import cache_dir
from ..spec import LoadedSpec
from ..store import Store
from .plan import PlannedTrial, build_plan, sampling_settings
from .ray_session import ensure_ray


class Interrupted(Exception):
    """SIGTERM or Ctrl-C during a sweep."""


@dataclass
class RunOutcome:
    sweep_id: int
    completed: int = 0
    failed: int = 0
    skipped: int = 0
    engine_starts: int = 0
    interrupted: bool = False
    wall_s: float = 0.0
    errors: list[str] = field(default_factory=list)


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

    e = loaded.spec.engine
    env = vllm_env(e.cpu_kvcache_space_gb, str(cache_dir())) if e.backend == "vllm" else {}
    # One CPU per engine actor for scheduling (vLLM keeps its own threads); GPUs as the spec says.
    return ray.remote(EngineActor).options(
        num_cpus=1 if e.backend == "vllm" else 0.01, num_gpus=e.num_gpus, max_restarts=0,
        runtime_env={"env_vars": env} if env else None,
    )


class _SignalGuard:
    """Turn SIGTERM into an Interrupted exception for the duration of a sweep."""

    def __enter__(self):
        def handler(signum, frame):
            raise Interrupted(f"signal {signum}")

        try:
            self.previous = signal.signal(signal.SIGTERM, handler)
        except ValueError:  # not the main thread
            self.previous = None
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
        return False


def run_sweep(loaded: LoadedSpec, store: Store, *, ray_address: str | None = None,
              report: Reporter = _noop) -> RunOutcome:
    spec = loaded.spec
    t_start = time.perf_counter()
    existing = store.get_sweep(spec.name)
    spec_json = spec.model_dump(mode="json")
    if existing and existing["spec_hash"] != loaded.spec_hash:
        diff = spec_diff(existing["spec"], spec_json)
        raise SpecError([SpecIssue(loaded.path, None, "name",
                                   f"a sweep named {spec.name!r} already exists in {store.display_url} with a "
                                   f"different spec; rename the sweep to start a new one. Changed:\n  "
                                   + "\n  ".join(diff))])
    # Refuse bad prompts / models before anything is written.
    w = spec.workload
    try:
        prompts = load_prompts(w.dataset, num_prompts=w.num_prompts, path=w.path, shuffle_seed=w.shuffle_seed)
    except ValueError as e:
        raise SpecError([SpecIssue(loaded.path, None, "workload.dataset", str(e))]) from None
    model_path = resolve_model(spec.target.model) if spec.engine.backend == "vllm" else spec.target.model
    plan = build_plan(loaded, model_path)

    if existing:
        sweep_id = existing["id"]
        rows = store.trials(sweep_id)
        unfinished = [r["id"] for r in rows if r["state"] in ("RUNNING", "PENDING")]
        store.reset_trials(unfinished)
        store.set_sweep_status(sweep_id, "running")
        rows = store.trials(sweep_id)
    else:
        sweep_id = store.create_sweep(spec.name, loaded.spec_hash, spec_json, loaded.path)
        store.add_trials(sweep_id, [t.row() for t in plan])
        rows = store.trials(sweep_id)
    outcome = RunOutcome(sweep_id=sweep_id)
    # A stored trial is the planned trial with the same engine configuration and load point.
    by_identity = {(r["engine_config_hash"], r["concurrency"]): r for r in rows}
    todo: list[tuple[int, PlannedTrial]] = []
    for t in plan:
        row = by_identity.get((t.engine.config_hash, t.concurrency))
        if row is None or row["state"] != "PENDING":
            outcome.skipped += 1
            continue
        todo.append((row["id"], t))

    groups: "OrderedDict[str, list[tuple[int, PlannedTrial]]]" = OrderedDict()
    for tid, t in todo:
        groups.setdefault(t.engine.config_hash, []).append((tid, t))
    report("plan", {"sweep": spec.name, "sweep_id": sweep_id, "trials": len(plan), "todo": len(todo),
                    "skipped": outcome.skipped, "engines": len(groups), "store": store.display_url})
    if not todo:
        store.set_sweep_status(sweep_id, "complete")
        return outcome

    import ray

    report("ray", {"connected": ensure_ray(ray_address)})
    actor_cls = _engine_actor_class(loaded)
    sampling = sampling_settings(loaded)
    m = spec.measurement
    current: int | None = None
    try:
        with _SignalGuard():
            for cfg_hash, group in groups.items():
                queue = list(group)
                while queue:
                    engine = queue[0][1].engine
                    report("engine_start", {"label": engine.method_label, "config_hash": cfg_hash})
                    actor = actor_cls.remote(engine.to_dict())
                    outcome.engine_starts += 1
                    try:
                        info = ray.get(actor.start.remote(), timeout=spec.engine.start_timeout_s)
                    except Exception as e:  # start failure: fail the whole group, never retry forever
                        cause = _cause(e, f"engine start timed out after {spec.engine.start_timeout_s:g} s")
                        store.fail_trials([tid for tid, _ in queue], f"engine failed to start: {cause}")
                        outcome.failed += len(queue)
                        outcome.errors.append(cause)
                        report("engine_failed", {"label": engine.method_label, "error": cause, "trials": len(queue)})
                        ray.kill(actor)
                        break
                    env_id = store.environment_id(info["fingerprint"])
                    report("engine_ready", {"label": engine.method_label, "start_s": info["start_s"]})
                    try:
                        while queue:
                            tid, trial = queue[0]
                            current = tid
                            store.mark_running(tid, env_id, info["start_s"])
                            report("trial_start", {"trial_id": tid, "label": trial.point.label,
                                                   "k": trial.point.num_speculative_tokens, "concurrency": trial.concurrency})
                            windows, outputs, warm_s, meas_s = [], [], 0.0, 0.0
                            for rep in range(m.repeats):
                                res = ray.get(actor.measure.remote(prompts, sampling, trial.concurrency,
                                                                   m.warmup_requests, m.request_timeout_s))
                                windows.append(res["metrics"])
                                outputs.append(res["outputs"])
                                warm_s += res["warmup_s"]
                                meas_s += res["measure_s"]
                            summary = median_over_repeats(windows)
                            store.complete_trial(tid, windows, summary, {"warmup_s": warm_s, "measure_s": meas_s}, outputs)
                            current = None
                            queue.pop(0)
                            outcome.completed += 1
                            report("trial_done", {"trial_id": tid, "label": trial.point.label,
                                                  "k": trial.point.num_speculative_tokens,
                                                  "concurrency": trial.concurrency, "summary": summary})
                    except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as e:
                        cause = _cause(e, "engine actor died")
                        store.fail_trials([current], cause)
                        outcome.failed += 1
                        outcome.errors.append(cause)
                        report("trial_failed", {"trial_id": current, "error": cause})
                        queue.pop(0)
                        current = None
                    finally:
                        _kill(actor)
    except (KeyboardInterrupt, Interrupted) as e:
        if current is not None:
            store.fail_trials([current], "interrupted")
            outcome.failed += 1
        store.set_sweep_status(sweep_id, "interrupted")
        outcome.interrupted = True
        outcome.wall_s = time.perf_counter() - t_start
        report("interrupted", {"why": str(e) or "Ctrl-C"})
        return outcome
    store.set_sweep_status(sweep_id, "complete" if outcome.failed == 0 else "failed")
    outcome.wall_s = time.perf_counter() - t_start
    return outcome


def _cause(e: BaseException, timeout_text: str) -> str:
    import ray

    if isinstance(e, ray.exceptions.GetTimeoutError):
        return timeout_text
    if isinstance(e, ray.exceptions.RayTaskError):
        inner = e.cause if getattr(e, "cause", None) is not None else e
        return f"{type(inner).__name__}: {inner}".strip()[:4000]
    return f"{type(e).__name__}: {e}"[:4000]


def _kill(actor) -> None:
    import ray

    try:
        ray.get(actor.stop.remote(), timeout=30)
    except Exception:
        pass
    ray.kill(actor)
