"""Load a sweep spec from YAML. Every error names the file, the line, the field path and what is allowed."""

from __future__ import annotations

import hashlib
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ..errors import SpecError, SpecIssue
from ..methods import MethodError, MethodPoint, get_method
from .models import SweepSpec
from .yaml_source import KeyPath, line_for, read_yaml


@dataclass
class LoadedSpec:
    """A validated spec with its method entries expanded into fully specified points."""

    spec: SweepSpec
    path: str
    spec_hash: str  # sha256 of the canonical JSON of the validated spec
    method_points: list[MethodPoint]
    lines: dict[KeyPath, int] = field(default_factory=dict)  # key path -> line, for later checks' messages

    def issue(self, loc: KeyPath, message: str) -> SpecIssue:
        """A SpecIssue at `loc` (a key path) in this spec's file."""
        return SpecIssue(self.path, line_for(self.lines, loc), ".".join(map(str, loc)), message)


def _model_at(loc: KeyPath) -> type[BaseModel] | None:
    """The pydantic model class that holds the field at `loc` (for listing allowed keys)."""
    model: Any = SweepSpec
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        ann = field.annotation
        candidates = [ann, *typing.get_args(ann)]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _describe(err: ErrorDetails) -> str:
    loc = err["loc"]
    if err["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        allowed = ", ".join(parent.model_fields) if parent else "see docs/src/reference/generated/spec.md"
        return f"unknown key {str(loc[-1])!r}; allowed keys here: {allowed}"
    if err["type"] == "missing":
        return "required key is missing"
    msg: str = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    inp = err.get("input")
    if err["type"] not in ("missing",) and not isinstance(inp, (dict, list)):
        msg += f" (got {inp!r})"
    return msg


def load_spec(path: str | Path) -> LoadedSpec:
    """Read, validate and expand a sweep spec. Raises SpecError listing every problem found."""
    fname = str(path)
    source = read_yaml(path, "spec file")
    data, lines = source.data, source.lines
    if not isinstance(data, dict):
        raise SpecError([SpecIssue(fname, 1, "", "a sweep spec must be a YAML mapping with keys name, target, methods, ...")])

    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as e:
        refused = [
            SpecIssue(fname, line_for(lines, err["loc"]), ".".join(str(p) for p in err["loc"]), _describe(err))
            for err in e.errors()
        ]
        raise SpecError(refused) from None

    issues = [SpecIssue(fname, line_for(lines, loc), ".".join(loc), message) for loc, message in spec.length_issues()]
    points: list[MethodPoint] = []
    for label, raw in spec.methods.items():
        raw = dict(raw)
        method_name = raw.pop("method", label)
        loc = ("methods", label)
        try:
            if not isinstance(method_name, str):
                raise MethodError("method", f"must be a method name, got {method_name!r}")
            points.extend(get_method(method_name).expand(label, raw))
        except MethodError as e:
            ploc = loc + ((e.param,) if e.param else ())
            issues.append(SpecIssue(fname, line_for(lines, ploc), ".".join(map(str, ploc)), str(e)))
    if issues:
        raise SpecError(issues)

    canonical = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return LoadedSpec(spec=spec, path=fname, spec_hash=hashlib.sha256(canonical.encode()).hexdigest(),
                      method_points=points, lines=lines)
