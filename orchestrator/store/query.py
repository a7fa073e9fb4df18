"""Plain SQL over the results store, read-only: `specsweep query` and the notebook helper `dataframe`.

The connection itself is read-only (SQLite opened with mode=ro; PostgreSQL with
default_transaction_read_only), so a write is refused by the database whatever its shape; statements that
do not start with SELECT / WITH / EXPLAIN / VALUES are refused first with a plainer message. Saved queries
are the .sql files in db/queries/, run by name; `:sweep`-style parameters are bound, absent ones are NULL.

The text goes to the database driver as written (no SQLAlchemy text() parsing): string literals, quoted
names, comments and dollar quotes are scanned so that a `;` or `:name` inside them is just text, and the
driver itself refuses a second statement. A statement timeout (default 60 s) ends a runaway query."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from ..errors import StoreError
from ..paths import db_dir
from .urls import display_url, normalize_url

SAVED = db_dir() / "queries"
READ_ONLY_START = ("select", "with", "explain", "values", "show", "pragma table_info")
WRITE_WORDS = re.compile(r"^\s*(insert|update|delete|drop|create|alter|truncate|grant|revoke|replace|attach|vacuum)\b",
                         re.IGNORECASE)


class QueryError(ValueError):
    pass


def saved_queries() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SAVED.glob("*.sql"))}


def saved_query(name: str) -> str:
    queries = saved_queries()
    if name not in queries:
        raise QueryError(f"no saved query {name!r} in {SAVED}; saved queries: {', '.join(queries) or '(none)'}")
    return queries[name].read_text(encoding="utf-8")


DEFAULT_TIMEOUT_S = 60.0
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_PARAM = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")


def scan(sql: str) -> list[tuple[str, str]]:
    """Split SQL into (kind, text) pieces: code, string ('...', E'...'), ident ("..."), comment (-- and
    /* */), dollar ($tag$...$tag$). Joined back, the pieces are the input."""
    out: list[tuple[str, str]] = []
    i, n, start = 0, len(sql), 0

    def close(kind: str, end: int) -> int:
        nonlocal start
        if start < i:
            out.append(("code", sql[start:i]))
        out.append((kind, sql[i:end]))
        start = end
        return end

    while i < n:
        c = sql[i]
        if c in "'\"":
            j = i + 1
            while j < n:
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:  # doubled quote: still inside
                        j += 2
                        continue
                    break
                j += 1
            i = close("string" if c == "'" else "ident", min(j + 1, n))
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = close("comment", n if j < 0 else j)
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = close("comment", n if j < 0 else j + 2)
        elif c == "$" and (m := _DOLLAR.match(sql, i)) and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
            j = sql.find(m.group(0), m.end())
            i = close("dollar", n if j < 0 else j + len(m.group(0)))
        else:
            i += 1
    if start < n:
        out.append(("code", sql[start:]))
    return out


def _code_params(code: str) -> list[str]:
    """`:name` placeholders in a code piece (not PostgreSQL's `::type` casts)."""
    return [m.group(1) for m in _PARAM.finditer(code)
            if not (m.start() > 0 and code[m.start() - 1] == ":")]


def _statement(sql: str) -> tuple[str, list[tuple[str, str]]]:
    """The one statement in `sql` (comments and a trailing `;` dropped), and its pieces."""
    pieces = [(k, t) for k, t in scan(sql) if k != "comment"]
    code = "".join(t if k == "code" else " " for k, t in pieces)
    if ";" in code.rstrip().rstrip(";"):
        raise QueryError("one statement per query (found a second statement after ';')")
    body = "".join(t for _, t in pieces).strip()
    if body.endswith(";"):
        body = body[:-1].rstrip()
    return body, scan(body)


def read_only_engine(url: str) -> Engine:
    url = normalize_url(url)
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if not u.database or u.database == ":memory:":
            raise QueryError("a read-only query needs a SQLite file, not an in-memory database")
        path = Path(u.database).expanduser().resolve()
        if not path.is_file():
            raise QueryError(f"no SQLite store at {path}")
        return create_engine(f"sqlite:///file:{path}?mode=ro&uri=true", future=True)
    return create_engine(url, future=True, connect_args={"options": "-c default_transaction_read_only=on"})


def _pyformat(pieces: list[tuple[str, str]]) -> str:
    """psycopg's paramstyle: `:name` -> `%(name)s` in code, every literal `%` doubled."""
    out = []
    for kind, t in pieces:
        t = t.replace("%", "%%")
        if kind == "code":
            t = re.sub(r"(?<!:):([A-Za-z_][A-Za-z0-9_]*)", r"%(\1)s", t)
        out.append(t)
    return "".join(out)


def _set_timeout(conn: Connection, timeout_s: float) -> None:
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SET statement_timeout = {max(1, int(timeout_s * 1000))}")
        return
    import time

    deadline = time.monotonic() + timeout_s
    raw = conn.connection.driver_connection  # sqlite3: a progress handler that aborts past the deadline
    assert raw is not None
    raw.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)


def refuse_writes(pieces: list[tuple[str, str]]) -> None:
    """The first line of defence (a clear message before any connection): only statements that read. The
    connection itself is read-only too (`read_only_engine`), for whatever slips past this word check."""
    first = "".join(t for k, t in pieces if k == "code").lstrip()
    if WRITE_WORDS.match(first) or not first.lower().startswith(READ_ONLY_START):
        raise QueryError(f"refused: specsweep query is read-only (SELECT, WITH, EXPLAIN or VALUES); got "
                         f"{first.split()[0].upper()!r}. Write with psql/sqlite3 if you really mean to")


def run_query(url: str, sql: str, params: dict[str, Any] | None = None,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[list[str], list[dict[str, Any]]]:
    """(column names, rows) of one read-only statement, ended after `timeout_s` seconds."""
    body, pieces = _statement(sql)
    if not body:
        raise QueryError("empty query")
    refuse_writes(pieces)
    names = {n for k, t in pieces if k == "code" for n in _code_params(t)}
    bound = {n: None for n in names}
    bound.update({k: v for k, v in (params or {}).items() if k in names})
    unknown = set(params or {}) - names
    if unknown:
        raise QueryError(f"parameters not used by the query: {', '.join(sorted(unknown))} (it takes: "
                         f"{', '.join(sorted(names)) or 'none'})")
    engine = read_only_engine(url)
    try:
        with engine.connect() as conn:
            _set_timeout(conn, timeout_s)
            if conn.dialect.name == "postgresql" and bound:
                res = conn.exec_driver_sql(_pyformat(pieces), bound)
            else:  # no parameters; or sqlite3, which binds :name itself (and leaves literals alone)
                res = conn.exec_driver_sql(body, bound)
            cols = list(res.keys())
            return cols, [dict(zip(cols, row)) for row in res.fetchall()]
    except DBAPIError as e:
        msg = str(e.orig).strip().splitlines()[0] if e.orig else str(e)
        low = msg.lower()
        if "statement timeout" in low or low == "interrupted" or "canceling statement" in low:
            raise QueryError(f"the query ran past its {timeout_s:g} s timeout and was stopped; narrow it, or "
                             f"give more time with --timeout SECONDS") from None
        if "read-only" in low or "readonly" in low:
            raise QueryError(f"refused by the database (read-only connection): {msg}") from None
        if "one statement" in low or "multiple commands" in low:
            raise QueryError(f"one statement per query: {msg}") from None
        raise QueryError(f"query failed on {display_url(url)}: {msg}") from None
    except SQLAlchemyError as e:
        raise StoreError(f"cannot query {display_url(url)}: {e}") from None
    except Exception as e:  # sqlite3.Warning ("only one statement at a time") is no DBAPI error
        if "one statement" in str(e).lower():
            raise QueryError(f"one statement per query: {e}") from None
        raise
    finally:
        engine.dispose()


def dataframe(sql: str, store_url: str | None = None, **params: Any) -> Any:
    """A pandas DataFrame of a read-only query (or a saved query's name), for notebooks:

        from orchestrator.store.query import dataframe
        df = dataframe("best-by-method", sweep="smoke-cpu")
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("dataframe() needs pandas: pip install pandas (or the `report` extra)") from None
    from .urls import resolve_store_url

    url = resolve_store_url(store_url)
    if re.fullmatch(r"[A-Za-z0-9_\-]+", sql.strip()):
        sql = saved_query(sql.strip())
    cols, rows = run_query(url, sql, params)
    return pd.DataFrame(rows, columns=cols)
