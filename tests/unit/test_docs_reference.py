"""The documentation's reference pages come from the code (docs/gen_reference.py), so every description has one
source: the spec models' Field descriptions, the CLI's help texts, the method registry's parameter docs. None may
be missing, empty or only repeat its name; the generated pages cover every spec field and every command option.
Pure."""

from __future__ import annotations

import importlib.util
import typing
from pathlib import Path

import pytest
import typer
from pydantic import BaseModel

from orchestrator.cli import app
from orchestrator.methods import get_method
from orchestrator.methods.registry import known_methods
from orchestrator.spec.models import SweepSpec

pytestmark = pytest.mark.pure
ROOT = Path(__file__).resolve().parents[2]


def spec_fields() -> dict[str, str | None]:
    out: dict[str, str | None] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            out[prefix + name] = field.description
            for sub in (a for a in (field.annotation, *typing.get_args(field.annotation))
                        if isinstance(a, type) and issubclass(a, BaseModel)):
                walk(sub, f"{prefix}{name}.")

    walk(SweepSpec, "")
    return out


def cli_params() -> dict[str, str | None]:
    out: dict[str, str | None] = {}

    def walk(cmd, name: str) -> None:
        if getattr(cmd, "commands", None):
            for sub, c in cmd.commands.items():
                walk(c, f"{name} {sub}")
            return
        out[f"{name}: (the command)"] = cmd.help
        for p in cmd.params:
            out[f"{name}: {p.name}"] = getattr(p, "help", None)

    walk(typer.main.get_command(app), "specsweep")
    return out


def poor(described: dict[str, str | None]) -> list[str]:
    """Entries whose description is missing, empty or only their own name."""
    return [k for k, v in described.items()
            if not v or not v.strip() or v.strip().lower().replace(" ", "_") == k.rsplit(".", 1)[-1].split(": ")[-1]]


def test_every_spec_field_cli_option_and_method_parameter_is_described():
    assert poor(spec_fields()) == []
    assert poor(cli_params()) == []
    params = {f"{m}.{p}": spec.doc for m in known_methods() for p, spec in get_method(m).parameters.items()}
    assert params and poor(params) == []


def test_the_generated_pages_cover_every_field_and_option(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    monkeypatch.setattr(gen, "OUT", tmp_path)
    gen.main()
    page = (tmp_path / "spec.md").read_text()
    assert all(f"| `{path}` |" in page for path in spec_fields())
    cli = (tmp_path / "cli.md").read_text()
    for key in cli_params():
        command, name = key.split(": ")
        assert f"## `{command}`" in cli and (name == "(the command)" or f"| `{name}` |" in cli), key
    tables = (tmp_path / "tables.md").read_text()
    assert "## `sweep_trials`" in tables and "| `offered_rate` |" in tables
