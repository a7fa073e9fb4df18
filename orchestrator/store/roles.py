"""Least privilege on a PostgreSQL store (`specsweep db roles`): three roles and exactly these grants.

- `<prefix>_owner` owns the schema: it runs the migrations (`specsweep db upgrade`) and owns every table, view
  and sequence of the store (existing objects are handed to it). No superuser, no CREATEDB, no CREATEROLE.
- `<prefix>_writer` is what a controller needs once the schema is current: SELECT, INSERT, UPDATE, DELETE on
  the tables, USAGE/SELECT/UPDATE on the sequences; no DDL (it cannot create, alter or drop anything, so it
  cannot migrate: a store behind the newest revision is refused with a message naming `db upgrade`).
- `<prefix>_reader` is for analysts (`query`, `report`, SQL clients): SELECT on every table and view, including
  those later migrations add (default privileges of the owner), nothing else. Not a superuser and not in
  pg_read_server_files, so pg_read_file / pg_ls_dir are refused to it by the server.

All three are LOGIN roles without a password: set one with `ALTER ROLE ... PASSWORD` where the server's
pg_hba.conf asks for it. The statements are idempotent; run them as a superuser (or a role with CREATEROLE that
owns the database and its objects).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import create_engine, text

from ..errors import StoreError
from .outage import driver_reason
from .urls import display_url

ROLE_KINDS = ("owner", "writer", "reader")


@dataclass(frozen=True)
class Roles:
    owner: str
    writer: str
    reader: str
    statements: tuple[str, ...]  # what was executed, in order (printed by the command)


def role_names(prefix: str) -> tuple[str, str, str]:
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,40}", prefix):
        raise StoreError(f"role prefix {prefix!r}: lower-case letters, digits and _, starting with a letter or _")
    owner, writer, reader = (f"{prefix}_{kind}" for kind in ROLE_KINDS)
    return owner, writer, reader


def grant_statements(database: str, owner: str, writer: str, reader: str, objects: list[tuple[str, str]]) -> list[str]:
    """The grants, in order; `objects`: (kind, name) of the store's existing tables, views and sequences."""
    db = '"' + database.replace('"', '""') + '"'
    out = [f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN "
           f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE; END IF; END $$"
           for role in (owner, writer, reader)]
    out += [
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
        f"GRANT CONNECT, TEMPORARY ON DATABASE {db} TO {owner}, {writer}, {reader}",
        f"GRANT USAGE, CREATE ON SCHEMA public TO {owner}",
        f"GRANT USAGE ON SCHEMA public TO {writer}, {reader}",
    ]
    out += [f"ALTER {kind} public.\"{name}\" OWNER TO {owner}" for kind, name in objects]
    out += [
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {writer}",
        f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {writer}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader}",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public "
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {writer}",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {writer}",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public GRANT SELECT ON TABLES TO {reader}",
    ]
    return out


_OBJECTS = """
SELECT 'TABLE', tablename FROM pg_tables WHERE schemaname = 'public'
UNION ALL SELECT 'VIEW', viewname FROM pg_views WHERE schemaname = 'public'
UNION ALL SELECT 'SEQUENCE', c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind = 'S' AND n.nspname = 'public'
    AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i'))
"""


def create_roles(url: str, prefix: str = "specsweep") -> Roles:
    """Create (or bring up to date) the owner, writer and reader roles of the PostgreSQL store at `url`, connected
    as `url`'s user (a superuser). StoreError names the store and what the server refused."""
    owner, writer, reader = role_names(prefix)
    engine = create_engine(url, future=True)
    if engine.dialect.name != "postgresql":
        raise StoreError(f"{display_url(url)}: roles are a PostgreSQL feature (a SQLite store is a file: its "
                         f"permissions are the file's)")
    try:
        with engine.begin() as conn:
            database = conn.execute(text("SELECT current_database()")).scalar_one()
            objects = [(kind, name) for kind, name in conn.execute(text(_OBJECTS))]
            statements = grant_statements(database, owner, writer, reader, objects)
            for sql in statements:
                conn.execute(text(sql))
    except Exception as e:  # the server's refusal (not a superuser, unreachable): one line, no traceback
        raise StoreError(f"{display_url(url)}: creating the roles failed: {driver_reason(e)}") from None
    finally:
        engine.dispose()
    return Roles(owner, writer, reader, tuple(statements))


@dataclass(frozen=True)
class Privileges:
    user: str
    superuser: bool
    can_write: bool  # INSERT on the store's trials table, or a superuser

    def warning(self) -> str | None:
        """A note for `query` and `report` when the connection could do more than read."""
        if not (self.superuser or self.can_write):
            return None
        what = "is a superuser" if self.superuser else "can write to the store"
        return (f"note: this connection's user {self.user!r} {what}; the statement filter and the read-only "
                f"transaction stop accidental writes, not a determined user (e.g. server-side functions). For "
                f"analysts, connect as the read-only role (`specsweep db roles`).")


def connection_privileges(conn) -> Privileges | None:  # type: ignore[no-untyped-def]
    """What the connection's PostgreSQL user may do (None on SQLite, whose permissions are the file's)."""
    if conn.dialect.name != "postgresql":
        return None
    user, superuser = conn.execute(text("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user")).one()
    can_write = bool(conn.execute(text(
        "SELECT to_regclass('public.sweep_trials') IS NOT NULL AND "
        "has_table_privilege(current_user, 'public.sweep_trials', 'INSERT')")).scalar_one())
    return Privileges(user=user, superuser=bool(superuser), can_write=can_write)


def store_privileges(url: str) -> Privileges | None:
    """connection_privileges of a fresh connection to `url` (None on SQLite, or when it cannot be read: the
    command's own connection reports that)."""
    engine = create_engine(url, future=True)
    try:
        with engine.connect() as conn:
            return connection_privileges(conn)
    except Exception:  # the command's own connection says why, once
        return None
    finally:
        engine.dispose()
