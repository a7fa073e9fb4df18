"""Schema versions of the results store, through Alembic (db/migrations). Every Store open brings the
database to the newest revision: a new database is created at head; a database from the first release
(tables but no version table) is recognised as revision 0001 and upgraded. Views are derived objects:
dropped before and recreated after every upgrade from orchestrator/store/schema.py."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from ..errors import StoreError
from .schema import VIEWS

MIGRATIONS = Path(__file__).resolve().parents[2] / "db" / "migrations"
VERSION_TABLE = "specsweep_alembic_version"
FIRST_RELEASE = "0001"


def _script_config():
    from alembic.config import Config

    if not (MIGRATIONS / "env.py").is_file():
        raise StoreError(f"the store's migrations are missing ({MIGRATIONS}); run specsweep from its checkout "
                         f"(pip install -e .)")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _config(conn: Connection):
    cfg = _script_config()
    cfg.attributes["connection"] = conn
    return cfg


def current_revision(conn: Connection) -> str | None:
    tables = set(inspect(conn).get_table_names())
    if VERSION_TABLE in tables:
        return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    return FIRST_RELEASE if "sweeps" in tables else None


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_script_config()).get_current_head()


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Bring the database to the newest revision; returns (revision before, revision after)."""
    from alembic import command

    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        if sqlite:
            # SQLite alters a table by copying it and dropping the original: with foreign keys on, the drop
            # would cascade-delete every dependent row. Off for the migration (outside a transaction).
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()
        try:
            result = _upgrade(conn, command)
            conn.commit()
        finally:
            if sqlite:
                conn.rollback()
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                conn.commit()
        return result


def _upgrade(conn: Connection, command) -> tuple[str | None, str]:
    if conn.dialect.name == "postgresql":  # two controllers opening one database at once: one migrates
        conn.execute(text("SELECT pg_advisory_xact_lock(727265)"))
    before = current_revision(conn)
    head = head_revision()
    versioned = VERSION_TABLE in set(inspect(conn).get_table_names())
    if before == head and versioned:
        _ensure_views(conn)
        return before, head
    cfg = _config(conn)
    if before == FIRST_RELEASE and not versioned:
        command.stamp(cfg, FIRST_RELEASE)  # created before migrations existed
    _drop_views(conn)
    command.upgrade(cfg, "head")
    _create_views(conn)
    return before, head


def _drop_views(conn: Connection) -> None:
    existing = set(inspect(conn).get_view_names())
    for name in reversed(list(VIEWS)):  # dependants first
        if name in existing:
            conn.execute(text(f"DROP VIEW {name}"))


def _create_views(conn: Connection) -> None:
    for ddl in VIEWS.values():
        conn.execute(text(ddl))


def _ensure_views(conn: Connection) -> None:
    """Recreate the views (cheap; keeps them in step with this code's definitions)."""
    _drop_views(conn)
    _create_views(conn)
