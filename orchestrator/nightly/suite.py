"""The nightly suite file (YAML): which sweeps, how many previous nights, per-metric thresholds."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import SpecError, SpecIssue
from ..spec.yaml_source import read_yaml


class Threshold(BaseModel):
    model_config = ConfigDict(extra="forbid")
    direction: Literal["higher_is_better", "lower_is_better"]
    threshold: float = Field(gt=0, description="relative change that counts as a regression (0.2 = 20 %)")


def _default_thresholds() -> dict[str, Threshold]:
    return {
        "tpot_ms_p50": Threshold(direction="lower_is_better", threshold=0.20),
        "ttft_ms_p50": Threshold(direction="lower_is_better", threshold=0.20),
        "output_tok_s": Threshold(direction="higher_is_better", threshold=0.10),
        "acceptance_length": Threshold(direction="higher_is_better", threshold=0.10),
    }


class SuiteSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    suite: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=120)
    sweeps: list[str] = Field(min_length=1, description="sweep spec files, relative to the suite file")
    history: int = Field(7, ge=1, description="previous nights each point is compared with (their median)")
    min_history: int = Field(3, ge=1, description="fewer comparable previous nights: `insufficient data`")
    thresholds: dict[str, Threshold] = Field(default_factory=_default_thresholds)
    allow_mismatch: list[str] = Field(default_factory=list, description="fingerprint fields that may differ "
                                      "between tonight and the history (e.g. hostname is never compared anyway)")


def load_suite(path: str | Path) -> tuple[SuiteSpec, list[Path]]:
    """The suite and its sweep files (resolved against the suite's folder); SpecError names file and field."""
    path = Path(path)
    source = read_yaml(path, "suite file")
    try:
        suite = SuiteSpec.model_validate(source.data or {})
    except ValidationError as e:
        raise SpecError([SpecIssue(str(path), source.line_for(tuple(err["loc"])), ".".join(map(str, err["loc"])),
                                   err["msg"]) for err in e.errors()]) from None
    from ..metrics import METRIC_COLUMNS

    issues = [SpecIssue(str(path), source.line_for(("thresholds", m)), f"thresholds.{m}", f"unknown metric; allowed: {', '.join(METRIC_COLUMNS)}")
              for m in suite.thresholds if m not in METRIC_COLUMNS]
    files = [(path.parent / s).resolve() for s in suite.sweeps]
    issues += [SpecIssue(str(path), source.line_for(("sweeps", i)), f"sweeps.{i}", f"no such file: {f}") for i, f in enumerate(files)
               if not f.is_file()]
    if issues:
        raise SpecError(issues)
    return suite, files
