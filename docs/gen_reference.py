"""Write the reference pages that come from the code, so they cannot drift: every sweep-spec field (type, default,
bounds, description) from the pydantic models, every CLI command and option from the CLI, every method and its
parameters from the method registry, every store table and column from the schema. `make docs` runs it before
`mkdocs build`; the pages land in docs/src/reference/generated/ (not committed)."""

from __future__ import annotations

import sys
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "docs" / "src" / "reference" / "generated"


def _type(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
    return text.replace("orchestrator.spec.models.", "").replace("NoneType", "None").replace(" | ", " or ")


def _bounds(field: Any) -> str:
    out = []
    for m in field.metadata:
        for key, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(m, key, None)
            if value is not None:
                out.append(f"{sign} {value:,}" if isinstance(value, int) else f"{sign} {value:g}")
    return ", ".join(out)


def _default(field: Any) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return "(computed)"
        return f"`{value.model_dump() if hasattr(value, 'model_dump') else value}`"
    return f"`{field.default!r}`" if isinstance(field.default, str) else f"`{field.default}`"


def spec_page() -> str:
    from pydantic import BaseModel

    from orchestrator.spec.models import SweepSpec

    rows: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            path = f"{prefix}{name}"
            nested = [a for a in (field.annotation, *typing.get_args(field.annotation))
                      if isinstance(a, type) and issubclass(a, BaseModel)]
            desc = (field.description or "").replace("|", "\\|").replace("\n", " ")
            rows.append(f"| `{path}` | `{_type(field.annotation)}` | {_default(field) if not nested else ''} | "
                        f"{_bounds(field)} | {desc} |")
            for sub in nested:
                walk(sub, f"{path}.")

    walk(SweepSpec, "")
    return ("# Sweep spec fields\n\nGenerated from `orchestrator/spec/models.py` by `docs/gen_reference.py`: every field "
            "of a sweep spec, its type, default, bounds and description. The annotated example and what each "
            "section means: [Writing a sweep](../../guides/writing-a-sweep.md).\n\n"
            "| field | type | default | bounds | description |\n|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def cli_page() -> str:
    import typer

    from orchestrator.cli import app

    group = typer.main.get_command(app)
    parts = ["# Command line\n\nGenerated from `orchestrator/cli.py` by `docs/gen_reference.py`: every command and "
             "option of `specsweep`.\n"]

    def walk(cmd: Any, name: str) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for sub_name in sorted(subs):
                walk(subs[sub_name], f"{name} {sub_name}")
            return
        parts.append(f"## `{name}`\n\n{(cmd.help or '').strip()}\n")
        rows = []
        for p in cmd.params:
            kind = "argument" if p.param_type_name == "argument" else ", ".join(p.opts)
            helptext = (getattr(p, "help", None) or "").replace("|", "\\|").replace("\n", " ")
            default = "" if p.required or p.default in (None, False, ()) or p.param_type_name == "argument" \
                else f"`{p.default}`"
            rows.append(f"| `{p.name}` | {kind} | {default} | {helptext} |")
        if rows:
            parts.append("| name | how | default | what |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")

    walk(group, "specsweep")
    return "\n".join(parts)


def methods_page() -> str:
    from orchestrator.methods import get_method
    from orchestrator.methods.registry import known_methods

    parts = ["# Methods\n\nGenerated from the method registry (`orchestrator/methods/`) by `docs/gen_reference.py`: "
             "every method a spec's `methods` entry can name, and its parameters.\n"]
    for name in known_methods():
        method = get_method(name)
        parts.append(f"## `{name}`\n\n{method.description}\n")
        params = method.parameters
        if params:
            rows = []
            for p, spec in params.items():
                bounds = ", ".join(x for x in (f">= {spec.ge:g}" if spec.ge is not None else "",
                                               f"<= {spec.le:g}" if spec.le is not None else "") if x)
                how = "required" if spec.required else f"default `{spec.default}`"
                doc = spec.doc.replace("|", "\\|")
                rows.append(f"| `{p}` | `{spec.type.__name__}` | {how} | {bounds} | "
                            f"{'yes' if spec.sweepable else ''} | {doc} |")
            parts.append("| parameter | type | default | bounds | list sweeps it | what |\n|---|---|---|---|---|---|\n"
                         + "\n".join(rows) + "\n")
    return "\n".join(parts)


def _cell(text: str) -> str:
    """A table cell's text: a '|' inside it would end the cell."""
    return text.replace("|", "\\|")


def schema_page() -> str:
    from orchestrator.store.schema import metadata
    from orchestrator.store.view_docs import VIEW_COLUMN_DOCS, VIEW_DOCS

    parts = ["# Store tables and views\n\nGenerated by `docs/gen_reference.py` from `orchestrator/store/schema/` "
             "(tables) and `orchestrator/store/view_docs.py` (views): every table, view and column specsweep writes "
             "(Optuna's own tables are apart). On PostgreSQL the same descriptions are the schema's comments "
             "(`\\d+ trial_results`). How to use them: [The store](../store.md).\n", "## Views\n"]
    for view, doc in VIEW_DOCS.items():
        rows = [f"| `{c}` | {_cell(d)} |" for c, d in VIEW_COLUMN_DOCS[view].items()]
        parts.append(f"### `{view}`\n\n{doc}.\n\n| column | what |\n|---|---|\n" + "\n".join(rows) + "\n")
    parts.append("## Tables\n")
    for table in metadata.sorted_tables:
        rows = [f"| `{c.name}` | `{c.type}` | {'' if c.nullable else 'not null'} | {_cell(c.comment or '')} |"
                for c in table.columns]
        parts.append(f"### `{table.name}`\n\n{table.comment}.\n\n| column | type | null | what |\n|---|---|---|---|\n"
                     + "\n".join(rows) + "\n")
    return "\n".join(parts)


def environment_page() -> str:
    from orchestrator.errors import EXIT_CODES
    from orchestrator.settings import ENVIRONMENT

    env = "\n".join(f"| `{v.name}` | {_cell(v.default)} | {_cell(v.what)} |" for v in ENVIRONMENT)
    codes = "\n".join(f"| {code} | {_cell(what)} |" for code, what in sorted(EXIT_CODES.items()))
    return ("# Environment variables and exit codes\n\nGenerated by `docs/gen_reference.py` from "
            "`orchestrator/settings.py` (`ENVIRONMENT`) and `orchestrator/errors.py` (`EXIT_CODES`).\n\n"
            "## Environment variables\n\n| variable | default | what |\n|---|---|---|\n" + env + "\n\n"
            "## Exit codes of `specsweep`\n\n| code | meaning |\n|---|---|\n" + codes + "\n")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, page in (("spec.md", spec_page), ("cli.md", cli_page), ("methods.md", methods_page),
                       ("tables.md", schema_page), ("environment.md", environment_page)):
        (OUT / name).write_text(page(), encoding="utf-8")
        print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
