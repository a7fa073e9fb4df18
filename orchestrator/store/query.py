"""Plain SQL over the results store, read-only: `specsweep query` and the notebook helper `dataframe`.

The connection itself is read-only (SQLite opened with mode=ro; PostgreSQL with
default_transaction_read_only), so a write is refused by the database whatever its shape; statements that
do not start with SELECT / WITH / EXPLAIN / VALUES are refused first with a plainer message. Saved queries
are the .sql files in db/queries/, run by name; `:sweep`-style parameters are bound, absent ones are NULL."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from ..errors import StoreError
from .store import display_url, normalize_url

SAVED = Path(__file__).resolve().parents[2] / "db" / "queries"
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


def _strip_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--")).strip()


def read_only_engine(url: str):
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


def run_query(url: str, sql: str, params: dict[str, Any] | None = None) -> tuple[list[str], list[dict]]:
    """(column names, rows) of one read-only statement."""
    body = _strip_comments(sql).rstrip(";").strip()
    if not body:
        raise QueryError("empty query")
    if ";" in body:
        raise QueryError("one statement per query (found ';' inside)")
    if WRITE_WORDS.match(body) or not body.lower().startswith(READ_ONLY_START):
        raise QueryError(f"refused: specsweep query is read-only (SELECT, WITH, EXPLAIN or VALUES); got "
                         f"{body.split()[0].upper()!r}. Write with psql/sqlite3 if you really mean to")
    names = set(re.findall(r"(?<!:):([A-Za-z_][A-Za-z0-9_]*)", body))
    bound = {n: None for n in names}
    bound.update({k: v for k, v in (params or {}).items() if k in names})
    unknown = set(params or {}) - names
    if unknown:
        raise QueryError(f"parameters not used by the query: {', '.join(sorted(unknown))} (it takes: "
                         f"{', '.join(sorted(names)) or 'none'})")
    engine = read_only_engine(url)
    try:
        with engine.connect() as conn:
            res = conn.execute(text(body), bound)
            cols = list(res.keys())
            return cols, [dict(zip(cols, row)) for row in res.fetchall()]
    except DBAPIError as e:
        msg = str(e.orig).strip().splitlines()[0] if e.orig else str(e)
        if "read-only" in msg.lower() or "readonly" in msg.lower():
            raise QueryError(f"refused by the database (read-only connection): {msg}") from None
        raise QueryError(f"query failed on {display_url(url)}: {msg}") from None
    except SQLAlchemyError as e:
        raise StoreError(f"cannot query {display_url(url)}: {e}") from None
    finally:
        engine.dispose()


def dataframe(sql: str, store_url: str | None = None, **params: Any):
    """A pandas DataFrame of a read-only query (or a saved query's name), for notebooks:

        from orchestrator.store.query import dataframe
        df = dataframe("best-by-method", sweep="smoke-cpu")
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("dataframe() needs pandas: pip install pandas (or the `report` extra)") from None
    from ..paths import default_store_url
    import os

    url = store_url or os.environ.get("SPECSWEEP_DB") or default_store_url()
    if re.fullmatch(r"[A-Za-z0-9_\-]+", sql.strip()):
        sql = saved_query(sql.strip())
    cols, rows = run_query(url, sql, params)
    return pd.DataFrame(rows, columns=cols)
