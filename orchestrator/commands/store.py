"""The store commands: query, db upgrade, db current, db roles."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import EXIT_OK
from ..store.urls import display_url, normalize_url, resolve_store_url
from .common import UsageError, check_format, console, open_store, warn_if_privileged


@dataclass(frozen=True)
class QueryArgs:
    sql: str | None = None
    saved: str | None = None
    params: list[str] = field(default_factory=list)  # NAME=VALUE
    list_saved: bool = False
    store: str | None = None
    fmt: str = "table"
    timeout_s: float = 60.0


def query(a: QueryArgs) -> int:
    """One read-only statement (or a saved query) over the store, printed as a table, CSV or JSON."""
    from ..render import print_records, print_table, query_table
    from ..store.query import QueryError, run_query, saved_queries, saved_query

    if a.list_saved:
        for name, path in saved_queries().items():
            first = next((ln[2:].strip() for ln in path.read_text().splitlines() if ln.startswith("--")), "")
            console.print(f"{name:24} {first}", highlight=False)
        return EXIT_OK
    check_format(a.fmt)
    if (a.sql is None) == (a.saved is None):
        raise UsageError("give one SQL statement or --saved NAME (see --list)")
    params: dict[str, int | str] = {}
    for p in a.params:
        if "=" not in p:
            raise UsageError(f"--param {p!r}: expected NAME=VALUE")
        k, v = p.split("=", 1)
        params[k] = int(v) if v.lstrip("-").isdigit() else v
    url = resolve_store_url(a.store)
    try:
        text_sql = saved_query(a.saved) if a.saved else a.sql
        assert text_sql is not None
        cols, rows = run_query(url, text_sql, params, timeout_s=a.timeout_s)
    except QueryError as e:
        raise UsageError(str(e)) from None
    warn_if_privileged(normalize_url(url))
    if a.fmt != "table":
        print_records(rows, a.fmt, console)
        return EXIT_OK
    print_table(console, query_table(cols, rows, a.saved or None))
    console.print(f"{len(rows)} rows", highlight=False)
    return EXIT_OK


@dataclass(frozen=True)
class DbArgs:
    store: str | None = None


def db_upgrade(a: DbArgs) -> int:
    """Bring the store's schema to the newest revision (every command does this on open; this says so)."""
    from ..render import db_revision_line

    st = open_store(a.store)
    before, after = st.schema_revisions
    console.print(db_revision_line(st.display_url, before, after))
    return EXIT_OK


def db_current(a: DbArgs) -> int:
    """The store's schema revision, read without changing anything."""
    from sqlalchemy import create_engine

    from ..store.migrate import current_revision, head_revision

    url = resolve_store_url(a.store)
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            rev = current_revision(conn)
    except Exception as e:
        raise UsageError(f"cannot read {display_url(url)}: {type(e).__name__}: {e}") from None
    finally:
        engine.dispose()
    console.print(f"{display_url(url)}: revision {rev or '(empty database)'}; newest {head_revision()}")
    return EXIT_OK


@dataclass(frozen=True)
class RolesArgs:
    store: str | None = None
    prefix: str = "specsweep"


def db_roles(a: RolesArgs) -> int:
    """Create the owner, writer and read-only roles of a PostgreSQL store (store/roles.py), printing each grant."""
    from ..errors import StoreError
    from ..store.roles import create_roles

    url = normalize_url(resolve_store_url(a.store))
    try:
        roles = create_roles(url, a.prefix)
    except StoreError as e:
        raise UsageError(str(e)) from None
    for sql in roles.statements:
        console.print(f"  {sql}", highlight=False, soft_wrap=True)
    console.print(f"{display_url(url)}: roles {roles.owner} (migrations: `specsweep db upgrade`), {roles.writer} "
                  f"(controllers: `specsweep run`), {roles.reader} (read-only: `query`, `report`, SQL clients); "
                  f"set passwords with ALTER ROLE ... PASSWORD where the server asks for one", highlight=False)
    return EXIT_OK
