"""Load a sweep spec from YAML. Every error names the file, the line, the field path and what is allowed."""

from __future__ import annotations

import hashlib
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ..errors import SpecError, SpecIssue
from ..methods import MethodError, MethodPoint, get_method
from .models import SweepSpec

# A key path in the spec: mapping keys and list indexes, outermost first.
KeyPath = tuple[str | int, ...]


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
        return SpecIssue(self.path, _line_for(self.lines, loc), ".".join(map(str, loc)), message)


def _line_map(node: yaml.Node, path: KeyPath = (), out: dict[KeyPath, int] | None = None) -> dict[KeyPath, int]:
    """Map every key path in a composed YAML tree to its 1-based line number."""
    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            out[path + (key,)] = key_node.start_mark.line + 1
            _line_map(value_node, path + (key,), out)
            out[path + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, path + (i,), out)
    return out


def _line_for(lines: dict[KeyPath, int], loc: KeyPath) -> int | None:
    loc = tuple(str(p) if not isinstance(p, int) else p for p in loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


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
        allowed = ", ".join(parent.model_fields) if parent else "see README"
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
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError([SpecIssue(fname, None, "", f"cannot read spec file: {e}")]) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError([SpecIssue(fname, line, "", f"YAML syntax error: {problem}")]) from None
    if not isinstance(data, dict):
        raise SpecError([SpecIssue(fname, 1, "", "a sweep spec must be a YAML mapping with keys name, target, methods, ...")])
    lines = _line_map(node) if node is not None else {}

    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as e:
        refused = [
            SpecIssue(fname, _line_for(lines, err["loc"]), ".".join(str(p) for p in err["loc"]), _describe(err))
            for err in e.errors()
        ]
        raise SpecError(refused) from None

    issues: list[SpecIssue] = []
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
            issues.append(SpecIssue(fname, _line_for(lines, ploc), ".".join(map(str, ploc)), str(e)))
    if issues:
        raise SpecError(issues)

    canonical = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return LoadedSpec(spec=spec, path=fname, spec_hash=hashlib.sha256(canonical.encode()).hexdigest(),
                      method_points=points, lines=lines)
