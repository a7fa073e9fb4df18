"""Read a YAML file specsweep is given (sweep spec, nightly suite): its data, a line for every key path, and
refusals that name the file and line. A key given twice in one mapping is refused with both lines (PyYAML
would silently keep the last value)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import SpecError, SpecIssue

# A key path in a YAML document: mapping keys and list indexes, outermost first.
KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class YamlSource:
    """A parsed YAML file: its data and the 1-based line of every key path."""

    path: str
    data: Any
    lines: dict[KeyPath, int]

    def line_for(self, loc: KeyPath) -> int | None:
        return line_for(self.lines, loc)


def line_for(lines: dict[KeyPath, int], loc: KeyPath) -> int | None:
    """The line of `loc`, or of its nearest enclosing key when `loc` itself is not in the file."""
    loc = tuple(str(p) if not isinstance(p, int) else p for p in loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


def _line_map(node: yaml.Node, path: KeyPath = (), out: dict[KeyPath, int] | None = None) -> dict[KeyPath, int]:
    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            _line_map(value_node, path + (key,), out)
            out[path + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, path + (i,), out)
    return out


def _duplicates(node: yaml.Node, fname: str, path: KeyPath = ()) -> list[SpecIssue]:
    """Every key that appears twice in one mapping, with the line of each appearance."""
    found: list[SpecIssue] = []
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            key, line = str(key_node.value), key_node.start_mark.line + 1
            if key in first:
                where = ".".join(map(str, path + (key,)))
                found.append(SpecIssue(fname, line, where, f"key {key!r} is given twice (lines {first[key]} and "
                                       f"{line}); keep one"))
            else:
                first[key] = line
            found += _duplicates(value_node, fname, path + (key,))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found += _duplicates(item, fname, path + (i,))
    return found


def read_yaml(path: str | Path, kind: str = "file") -> YamlSource:
    """Parse `path`; SpecError (file, line, what is wrong) for an unreadable file, bad syntax or a duplicate key."""
    fname = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError([SpecIssue(fname, None, "", f"cannot read {kind}: {e}")]) from None
    loader = yaml.SafeLoader(text)  # parsed once: the node tree for lines and duplicates, the data from it
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError([SpecIssue(fname, line, "", f"YAML syntax error: {problem}")]) from None
    finally:
        loader.dispose()
    if node is None:
        return YamlSource(fname, data, {})
    duplicates = _duplicates(node, fname)
    if duplicates:
        raise SpecError(duplicates)
    return YamlSource(fname, data, _line_map(node))
