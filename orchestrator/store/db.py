"""One engine per store and one transaction helper: the only place where a driver error becomes a StoreError
(naming the store, password masked). Every repository of the store (store/*.py) reads and writes through it;
`retry` runs a whole operation through a store outage (store/outage.py)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, CursorResult, Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, SQLAlchemyError

from ..errors import StoreConflict, StoreError
from .outage import OutagePolicy, driver_reason
from .urls import display_url, normalize_url

T = TypeVar("T")


def new_id(res: CursorResult[Any]) -> int:
    """The primary key of the row an INSERT just wrote."""
    key = res.inserted_primary_key
    assert key is not None, "not an INSERT"
    return int(key[0])


class Database:
    """A store's engine, with `read()` and `write()` connections that translate driver errors."""

    def __init__(self, url: str):
        self.url = normalize_url(url)
        try:
            u = make_url(self.url)
        except (ArgumentError, ValueError):  # the parser's message quotes the URL: never shown
            raise StoreError(f"invalid store URL {display_url(url)!r}: expected sqlite:///PATH, "
                             f"postgresql://USER@HOST:PORT/DATABASE or a file path") from None
        if u.get_backend_name() == "sqlite" and u.database not in (None, "", ":memory:"):
            Path(u.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine: Engine = create_engine(self.url, future=True, pool_pre_ping=True)
        except Exception as e:
            raise StoreError(f"cannot open store {display_url(url)}: {type(e).__name__}") from None
        self.outage = OutagePolicy(self.display_url)
        if self.engine.dialect.name == "sqlite":
            @event.listens_for(self.engine, "connect")
            def _sqlite_pragmas(dbapi_conn: Any, _: Any) -> None:
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA foreign_keys=ON")
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA busy_timeout=30000")
                cur.close()

    @property
    def display_url(self) -> str:
        return display_url(self.url)

    def _translate(self, e: SQLAlchemyError, doing: str) -> StoreError:
        if isinstance(e, IntegrityError):
            return StoreConflict(f"{doing} in {self.display_url}: {driver_reason(e)}")
        if isinstance(e, OperationalError):
            return StoreError(f"cannot reach store {self.display_url} ({doing}): {driver_reason(e)}")
        return StoreError(f"{doing} in {self.display_url} failed: {driver_reason(e)}")

    @contextmanager
    def write(self, doing: str) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back (nothing written) when it raises.
        `doing` names the operation in the error ("completing trial row 12")."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as e:
            raise self._translate(e, doing) from e

    @contextmanager
    def read(self, doing: str) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as e:
            raise self._translate(e, doing) from e

    def retry(self, operation: Callable[[], T]) -> T:
        """`operation()` (whole: its reads and its transaction), retried through connection errors once this
        store has been reached; before each retry the lease guard, if set, runs on a fresh connection."""
        if not self.outage.reached:  # unreachable from the start (a wrong host, a typo): say so at once
            result = operation()
            self.outage.reached = True
            return result
        return self.outage.run(operation, self._guard_allows if self.outage.guard is not None else None)

    def _guard_allows(self) -> bool:
        guard = self.outage.guard
        if guard is None:
            return True
        with self.engine.begin() as conn:
            return guard(conn)

    def dispose(self) -> None:
        self.engine.dispose()
