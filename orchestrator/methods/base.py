"""The method contract: declared parameters, validation, expansion into points, vLLM translation.

A method is one file in this package that defines a subclass of `Method` decorated with
`@register`. The registry maps the method name used in sweep YAML to that class.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, ClassVar


class MethodError(ValueError):
    """A method's parameters were refused. `param` names the parameter ('' for the whole entry)."""

    def __init__(self, param: str, message: str):
        self.param = param
        super().__init__(message)


@dataclass(frozen=True)
class Param:
    """One parameter a method accepts. `sweepable` parameters may be given as a list of values."""

    type: type
    doc: str
    default: Any = None
    required: bool = False
    ge: float | None = None
    le: float | None = None
    sweepable: bool = False

    def allowed(self) -> str:
        t = self.type.__name__
        rng = ""
        if self.ge is not None and self.le is not None:
            rng = f" in [{self.ge:g}, {self.le:g}]"
        elif self.ge is not None:
            rng = f" >= {self.ge:g}"
        elif self.le is not None:
            rng = f" <= {self.le:g}"
        return f"{t}{rng}" + (" or a list of them" if self.sweepable else "")

    def check_value(self, name: str, value: Any) -> Any:
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, self.type) or (self.type is not bool and isinstance(value, bool)):
            raise MethodError(name, f"expected {self.allowed()}, got {value!r}")
        if self.ge is not None and value < self.ge:  # type: ignore[operator]  # numeric: isinstance above
            raise MethodError(name, f"{value!r} is out of range: allowed {self.allowed()}")
        if self.le is not None and value > self.le:  # type: ignore[operator]  # numeric: isinstance above
            raise MethodError(name, f"{value!r} is out of range: allowed {self.allowed()}")
        return value


@dataclass(frozen=True)
class MethodPoint:
    """One fully specified method configuration (no lists left).

    `params` are what the user wrote (the swept values); `derived` are values that follow from them
    (DFlash K from block_size); `facts` are read from the drafter by the method's check (block size,
    sample_from_anchor) and recorded with the trial: `check_methods` returns them and replaces the point with
    a checked copy (nothing writes into a point after it is made); `checked` says the checks ran."""

    label: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)
    derived: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    facts: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    checked: bool = field(default=False, compare=False, hash=False)

    @property
    def num_speculative_tokens(self) -> int | None:
        k = self.params.get("num_speculative_tokens", self.derived.get("num_speculative_tokens"))
        return k if k is not None else self.facts.get("num_speculative_tokens")


class Method:
    """Base class of every drafter method."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    parameters: ClassVar[dict[str, Param]] = {}
    # what a K = 0 band of a num_speculative_tokens_per_batch_size schedule still costs over no speculation
    # ("" where nothing); `specsweep recommend` prints it beside such a schedule
    k0_cost: ClassVar[str] = ""

    def expand(self, label: str, raw: dict[str, Any]) -> list[MethodPoint]:
        """Validate raw YAML parameters and return the cartesian product of the swept ones."""
        unknown = sorted(set(raw) - set(self.parameters))
        if unknown:
            known = ", ".join(sorted(self.parameters)) or "(none)"
            raise MethodError(unknown[0], f"unknown parameter for method {self.name!r}; allowed: {known}")
        choices: dict[str, list[Any]] = {}
        for pname, param in self.parameters.items():
            if pname not in raw:
                if param.required:
                    raise MethodError(pname, f"required parameter of method {self.name!r} ({param.doc})")
                if param.default is not None:
                    choices[pname] = [param.default]
                continue
            value = raw[pname]
            if isinstance(value, list):
                if not param.sweepable:
                    raise MethodError(pname, f"is not sweepable; give one value ({param.allowed()})")
                if not value:
                    raise MethodError(pname, "empty list: give at least one value")
                choices[pname] = [param.check_value(pname, v) for v in value]
            else:
                choices[pname] = [param.check_value(pname, value)]
        names = list(choices)
        points = []
        for combo in itertools.product(*(choices[n] for n in names)):
            params = dict(zip(names, combo))
            derived = self.validate_point(params) or {}
            points.append(MethodPoint(label=label, method=self.name, params=params, derived=derived))
        return points

    def validate_point(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """Cross-parameter checks for one point; returns derived values. Override where needed."""
        return None

    needs_check: ClassVar[bool] = False  # its engine config depends on facts read from the drafter

    def check(self, point: MethodPoint, ctx) -> dict[str, Any]:
        """Checks against the drafter's files and the installed vLLM (methods.drafter.CheckContext), run
        before any engine starts. Raise MethodError; return what was read (the point's facts)."""
        return {}

    def speculative_config(self, point: MethodPoint) -> dict[str, Any] | None:
        """vLLM `speculative_config` for this point (None = no speculation)."""
        raise NotImplementedError
