"""Before a sweep writes anything: every input checked (the spec against a stored sweep of the same name,
datasets, target, drafters) and what every engine will be asked derived once (prompts, sampling, their hash)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..datasets import Prompt, load_prompts
from ..errors import SpecError, SpecIssue
from ..methods.checks import check_methods
from ..models import resolve_model
from ..records import SamplingSettings
from ..spec import LoadedSpec
from ..store import Store
from . import events as ev
from .plan import SearchSpace, sampling_settings


def spec_diff(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
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


@dataclass(frozen=True)
class Prepared:
    """Everything checked and derived before the first write."""

    space: SearchSpace
    prompts: dict[str, list[Prompt]]
    sampling: SamplingSettings
    workload_hash: str
    commit: str | None


def prepare(loaded: LoadedSpec, store: Store, name: str, emit: ev.Listener) -> Prepared:
    """Check every input (spec vs. a stored sweep of the same name, datasets, target, drafters); writes nothing."""
    spec = loaded.spec
    existing = store.get_sweep(name)
    if existing and existing.spec_hash != loaded.spec_hash:
        diff = spec_diff(existing.spec, spec.model_dump(mode="json"))
        raise SpecError([SpecIssue(loaded.path, None, "name",
                                   f"a sweep named {name!r} already exists in {store.display_url} with a different "
                                   f"spec; use --new-name NAME to start a new sweep. Changed:\n  " + "\n  ".join(diff))])
    w = spec.workload
    prompts = {}
    for ds in w.datasets:
        try:
            prompts[ds] = load_prompts(ds, num_prompts=w.num_prompts, path=w.path_for(ds),
                                       shuffle_seed=w.shuffle_seed, input_len=w.random_input_len)
        except ValueError as e:
            raise SpecError([loaded.issue(("workload", "dataset"), str(e))]) from None
    vllm = spec.engine.backend == "vllm"
    model_path = resolve_model(spec.target.model) if vllm else spec.target.model
    for note in check_methods(loaded, model_path if vllm else None):
        emit(ev.Note(note))
    sampling = sampling_settings(loaded)
    return Prepared(space=SearchSpace(loaded, model_path), prompts=prompts, sampling=sampling,
                    workload_hash=workload_hash(prompts, sampling), commit=git_commit())


def workload_hash(prompts: dict[str, list[Prompt]], sampling: SamplingSettings) -> str:
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
