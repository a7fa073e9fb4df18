"""Sweep specs: pydantic models (models.py) and YAML loading with file:line errors (loader.py)."""

from .loader import LoadedSpec, load_spec
from .models import EngineSpec, FakeEngineSpec, MeasurementSpec, SpaceSpec, SweepSpec, TargetSpec, WorkloadSpec

__all__ = [
    "LoadedSpec", "load_spec", "EngineSpec", "FakeEngineSpec", "MeasurementSpec", "SpaceSpec",
    "SweepSpec", "TargetSpec", "WorkloadSpec",
]
