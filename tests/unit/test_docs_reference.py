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


def store_columns() -> dict[str, dict[str, str | None]]:
    """Every table's and view's columns with their descriptions (store/schema/ comments, view_docs.py), keyed by the
    columns a store at head really has (SQLite)."""
    import tempfile

    from sqlalchemy import inspect

    from orchestrator.store import Store
    from orchestrator.store.schema import metadata
    from orchestrator.store.view_docs import VIEW_COLUMN_DOCS

    st = Store(f"sqlite:///{tempfile.mkdtemp()}/s.db")
    insp = inspect(st.engine)
    out: dict[str, dict[str, str | None]] = {}
    for name in metadata.tables:
        out[name] = {c["name"]: metadata.tables[name].c[c["name"]].comment for c in insp.get_columns(name)}
    for name in insp.get_view_names():
        out[name] = {c["name"]: VIEW_COLUMN_DOCS.get(name, {}).get(c["name"]) for c in insp.get_columns(name)}
    st.dispose()
    return out


def poor(described: dict[str, str | None]) -> list[str]:
    """Entries whose description is missing, empty or only their own name."""
    return [k for k, v in described.items()
            if not v or not v.strip() or v.strip().lower().replace(" ", "_") == k.rsplit(".", 1)[-1].split(": ")[-1]]


def test_every_table_view_and_column_of_the_store_is_described():
    from orchestrator.store.schema import metadata
    from orchestrator.store.view_docs import VIEW_COLUMN_DOCS, VIEW_DOCS

    columns = store_columns()
    assert set(VIEW_DOCS) == set(VIEW_COLUMN_DOCS) and set(VIEW_DOCS) <= set(columns)
    assert poor({f"{t}.{c}": d for t, cols in columns.items() for c, d in cols.items()}) == []
    assert poor({t.name: t.comment for t in metadata.tables.values()}) == [] and poor(VIEW_DOCS) == []
    # no description of a column the view does not have
    assert {v: sorted(set(d) - set(columns[v])) for v, d in VIEW_COLUMN_DOCS.items()} == {v: [] for v in VIEW_DOCS}


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
    for name, columns in store_columns().items():
        section = tables.split(f"### `{name}`\n", 1)[1].split("\n### ", 1)[0]
        assert all(f"| `{c}` |" in section for c in columns), name
        # a '|' inside a description must not split its cell (the row keeps its table's cell count)
        widths = {line.replace("\\|", "").count("|") for line in section.splitlines() if line.startswith("| `")}
        assert len(widths) == 1, (name, widths)


def test_every_environment_variable_and_exit_code_is_described_once():
    """Every SPECSWEEP_* variable the package names is in the registry (settings.ENVIRONMENT), described; every
    EXIT_ constant of errors.py has its meaning in EXIT_CODES; the generated page lists both."""
    import re

    from orchestrator import errors
    from orchestrator.settings import ENVIRONMENT

    named = {m for f in (ROOT / "orchestrator").rglob("*.py")
             for m in re.findall(r"SPECSWEEP_[A-Z0-9_]+", f.read_text(encoding="utf-8"))}
    registry = {v.name: v.what for v in ENVIRONMENT}
    assert len(registry) == len(ENVIRONMENT)  # no variable twice
    assert sorted(named - set(registry)) == []
    assert poor(registry) == [] and all(v.default for v in ENVIRONMENT)
    constants = {getattr(errors, n) for n in dir(errors) if n.startswith("EXIT_") and n != "EXIT_CODES"}
    assert constants == set(errors.EXIT_CODES) and poor({str(k): v for k, v in errors.EXIT_CODES.items()}) == []
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    page = gen.environment_page()
    assert all(f"| `{name}` |" in page for name in registry)
    assert all(f"| {code} |" in page for code in errors.EXIT_CODES)
