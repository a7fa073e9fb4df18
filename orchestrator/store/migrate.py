"""Schema versions of the results store, through Alembic (db/migrations). Every Store open brings the
database to the newest revision: a new database is created at head; a database from the first release
(tables but no version table) is recognised as revision 0001 and upgraded. Views are derived objects:
dropped before and recreated after every upgrade from orchestrator/store/schema/, and otherwise only when
their definitions changed (a hash in specsweep_meta), so readers are never left without them.

Initialisation runs under one lock per database (PostgreSQL: a session advisory lock; SQLite: an exclusive
lock on a file beside the database): migrations, Optuna's own tables and the views, so processes opening
one new database at once never race on DDL (Optuna's `CREATE TYPE studydirection` did)."""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Iterator

from sqlalchemy import delete, insert, inspect, select, text
from sqlalchemy.engine import Connection, Engine

from ..errors import StoreError
from ..paths import db_dir
from .schema import store_meta
from .views import VIEWS

MIGRATIONS = db_dir() / "migrations"
VERSION_TABLE = "specsweep_alembic_version"
FIRST_RELEASE = "0001"
INIT_LOCK_KEY = 727265  # PostgreSQL advisory lock key of store initialisation
if TYPE_CHECKING:
    from alembic.config import Config

def _comments_text() -> str:
    """Every description the store carries (tables, columns, views, view columns), as one text for the hash."""
    from .schema import metadata
    from .view_docs import VIEW_COLUMN_DOCS, VIEW_DOCS

    parts = [f"{t.name}:{t.comment}" + "".join(f"|{c.name}:{c.comment}" for c in t.columns)
             for t in metadata.sorted_tables]
    parts += [f"{v}:{VIEW_DOCS[v]}" + "".join(f"|{c}:{d}" for c, d in VIEW_COLUMN_DOCS[v].items()) for v in VIEWS]
    return "\n".join(parts)


# The views and the descriptions: both are derived objects, recreated when either changed.
VIEWS_HASH = hashlib.sha256(("\n".join(VIEWS.values()) + _comments_text()).encode()).hexdigest()[:16]
OPTUNA_TABLES = ("studies", "version_info", "trials")


def _script_config() -> Config:
    from alembic.config import Config

    if not (MIGRATIONS / "env.py").is_file():
        raise StoreError(f"the store's migrations are missing ({MIGRATIONS}): this specsweep install is "
                         f"incomplete; reinstall it (pip install specsweep wheel, or pip install -e . in a checkout)")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _config(conn: Connection) -> Config:
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

    head = ScriptDirectory.from_config(_script_config()).get_current_head()
    assert head is not None, "the migrations have no head"
    return head


@contextlib.contextmanager
def init_lock(engine: Engine) -> Iterator[None]:
    """Serialise store initialisation across processes (and machines, on PostgreSQL)."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text(f"SELECT pg_advisory_lock({INIT_LOCK_KEY})"))
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text(f"SELECT pg_advisory_unlock({INIT_LOCK_KEY})"))
                conn.commit()
        return
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    import fcntl

    lock_file = Path(database).expanduser().resolve().with_name(Path(database).name + ".init-lock")
    with open(lock_file, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def initialise(engine: Engine) -> tuple[str | None, str]:
    """Migrations, Optuna's tables and the views, under the init lock; returns (revision before, after)."""
    with init_lock(engine):
        revisions = upgrade(engine)
        _ensure_optuna_tables(engine)
    return revisions


def _ensure_optuna_tables(engine: Engine) -> None:
    """Optuna creates its tables on first use; done here, under the lock, instead of by racing controllers."""
    with engine.connect() as conn:
        if set(OPTUNA_TABLES) <= set(inspect(conn).get_table_names()):
            return
    import optuna

    storage = optuna.storages.RDBStorage(engine.url.render_as_string(hide_password=False))
    storage.engine.dispose()


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


def _upgrade(conn: Connection, command: ModuleType) -> tuple[str | None, str]:
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
    if conn.dialect.name == "postgresql":
        _comment_on_everything(conn)
    conn.execute(delete(store_meta).where(store_meta.c.key == "views_hash"))
    conn.execute(insert(store_meta).values(key="views_hash", value=VIEWS_HASH))


def _comment_on_everything(conn: Connection) -> None:
    """PostgreSQL: the descriptions of store/schema/ (tables, columns) and store/view_docs.py (views, their
    columns) as COMMENT ON, so `\\d+` shows them (SQLite keeps no comments; the docs' reference has them)."""
    from sqlalchemy.schema import DDL, SetColumnComment, SetTableComment

    from .schema import metadata
    from .view_docs import VIEW_COLUMN_DOCS, VIEW_DOCS

    def literal(value: str) -> str:
        return "'" + value.replace("'", "''").replace("%", "%%") + "'"

    quote = conn.dialect.identifier_preparer.quote
    for table in metadata.sorted_tables:
        conn.execute(SetTableComment(table))
        for column in table.columns:
            conn.execute(SetColumnComment(column))
    for view in VIEWS:  # DDL(): executed as SetColumnComment is (a '%' is doubled for the driver's paramstyle)
        conn.execute(DDL(f"COMMENT ON VIEW {quote(view)} IS {literal(VIEW_DOCS[view])}"))  # type: ignore[no-untyped-call]
        for name, doc in VIEW_COLUMN_DOCS[view].items():
            conn.execute(DDL(f"COMMENT ON COLUMN {quote(view)}.{quote(name)} IS {literal(doc)}"))  # type: ignore[no-untyped-call]


def _ensure_views(conn: Connection) -> None:
    """Recreate the views only when this code's definitions differ from the stored ones (or one is missing):
    a reader's query never finds them dropped."""
    stored = conn.execute(select(store_meta.c.value).where(store_meta.c.key == "views_hash")).scalar()
    if stored == VIEWS_HASH and set(VIEWS) <= set(inspect(conn).get_view_names()):
        return
    _drop_views(conn)
    _create_views(conn)


def downgrade(engine: Engine, revision: str) -> None:
    """Take the database down to `revision` ("base": nothing of specsweep's left), views dropped first (they are
    recreated from the code on the next upgrade). For tests of the migrations and for an operator rolling a
    release back; specsweep itself only ever upgrades."""
    from alembic import command

    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()
        _drop_views(conn)
        command.downgrade(_config(conn), revision)
        conn.commit()


def upgrade_to(engine: Engine, revision: str) -> None:
    """Bring the database up to `revision` exactly (views are created only at head, by `upgrade`)."""
    from alembic import command

    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()
        command.upgrade(_config(conn), revision)
        conn.commit()


def revisions() -> list[str]:
    """Every revision, oldest first."""
    from alembic.script import ScriptDirectory

    return [s.revision for s in reversed(list(ScriptDirectory.from_config(_script_config()).walk_revisions()))]
