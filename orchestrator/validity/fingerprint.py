"""Environment fingerprints: which fields must agree before two measurements may be compared.

A fingerprint (collected in the engine process, see `orchestrator.environment`) holds hardware, driver,
framework versions, model and drafter identity, dtype, engine arguments and vLLM's effective settings.
Comparisons (a trial against its paired baseline, `specsweep compare`, nightly regressions) are refused
when a compared field differs, unless the caller allows that field by name.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol


class StoredFingerprint(Protocol):
    """A stored environment (store/rows.py EnvironmentRow): its facts by name."""

    def fact(self, name: str) -> Any: ...


# A fingerprint as collected (a document of facts), a stored one, or None (not recorded: every fact unknown).
Fingerprint = Mapping[str, Any] | StoredFingerprint | None


def _fact(fp: Fingerprint, name: str) -> Any:
    if fp is None:
        return None
    if isinstance(fp, Mapping):
        return fp.get(name)
    return fp.fact(name)

# Compared between any two rows: hardware, software, the target and how the engine ran it.
ENVIRONMENT_FIELDS = (
    "cpu_model", "cpu_count", "cpu_isa", "gpu_model", "gpu_count", "gpu_driver", "cuda_version",
    "vllm_version", "vllm_distribution", "torch_version", "transformers_version", "ray_version", "optuna_version",
    "model_identity", "dtype", "max_model_len", "engine_args", "attention_backend", "async_scheduling",
    "enable_prefix_caching", "workload_hash", "backend",
)
# Compared only between rows of the same method (a drafter run and its no-speculation baseline differ here
# by design): drafter identity, speculative config, CUDA-graph sizes (vLLM adjusts them for drafts).
METHOD_FIELDS = ("drafter_identity", "speculative_config", "cudagraph_capture_sizes")
# Fields added to the fingerprint after rows already existed: compared only when both sides recorded them, so
# an upgrade does not make every earlier row (a nightly's history) incomparable at once.
ADDED_LATER = ("cpu_isa",)
# Every other field (hostname, platform, python_version, specsweep_version, specsweep_commit, spec_hash) is
# recorded, never compared: where and by which spec/commit the row was produced.


class FingerprintMismatch(ValueError):
    def __init__(self, differences: list[str], what: str = "these rows"):
        self.differences = differences
        super().__init__(f"refusing to compare {what}: their environment fingerprints differ in\n  "
                         + "\n  ".join(differences)
                         + "\n(pass --allow-mismatch FIELD for each field that may differ)")


def compared_fields(same_method: bool) -> tuple[str, ...]:
    return ENVIRONMENT_FIELDS + (METHOD_FIELDS if same_method else ())


def fingerprint_diff(a: Fingerprint, b: Fingerprint, *, same_method: bool,
                     allow: Iterable[str] = ()) -> list[str]:
    """`field: a != b` for each compared field that differs and is not allowed."""
    allowed = set(allow)
    out = []
    for f in compared_fields(same_method):
        if f in allowed:
            continue
        va, vb = _fact(a, f), _fact(b, f)
        if f in ADDED_LATER and (va is None or vb is None):
            continue
        if isinstance(va, dict) and isinstance(vb, dict):
            for k in sorted(set(va) | set(vb)):
                if f"{f}.{k}" not in allowed and va.get(k) != vb.get(k):
                    out.append(f"{f}.{k}: {va.get(k)!r} != {vb.get(k)!r}")
        elif va != vb:
            out.append(f"{f}: {va!r} != {vb!r}")
    return out
