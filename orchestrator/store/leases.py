"""Leases: one live owner per named resource (`sweep:<name>`, `nightly:<suite>`), kept alive by a heartbeat.

Every time is the database's clock (epoch seconds), so controllers on machines whose clocks differ agree
on when a lease went stale. Each step is one atomic statement: INSERT (free), a conditional UPDATE (take
over a stale or broken lease), UPDATE ... WHERE owner (renew), DELETE ... WHERE owner (release)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sqlalchemy import and_, delete, insert, literal_column, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from ..errors import StoreConflict
from .db import Database
from .schema import leases


@dataclass(frozen=True)
class LeaseHolder:
    name: str
    owner: str
    host: str
    pid: int
    acquired_at: float  # epoch seconds, database clock
    heartbeat_age_s: float  # how long ago the holder last renewed


@dataclass(frozen=True)
class LeaseResult:
    acquired: bool
    holder: LeaseHolder | None = None  # who holds it (refused), or who held it before (taken over)
    taken_over: bool = False


def db_now(conn: Connection) -> ColumnElement[float]:
    """The database's current time in epoch seconds, as an SQL expression."""
    if conn.dialect.name == "postgresql":
        return literal_column("CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)")
    return literal_column("((julianday('now') - 2440587.5) * 86400.0)")


def holder(conn: Connection, name: str) -> LeaseHolder | None:
    row = conn.execute(select(leases, (db_now(conn) - leases.c.heartbeat_at).label("age"))
                       .where(leases.c.name == name)).mappings().first()
    if row is None:
        return None
    return LeaseHolder(name=row["name"], owner=row["owner"], host=row["host"], pid=row["pid"],
                       acquired_at=row["acquired_at"], heartbeat_age_s=float(row["age"]))


def acquire(db: Database, name: str, owner: str, host: str, pid: int, stale_after_s: float,
            force: bool = False, dead: Callable[[LeaseHolder], bool] = lambda h: False) -> LeaseResult:
    """Take the lease if it is free, stale (no heartbeat for `stale_after_s`), held by an owner `dead` says is
    gone, or `force`d. Taking it from a holder is a compare-and-set on that holder's owner id."""
    for _ in range(3):  # the holder may release between our two statements: then the insert is tried again
        try:
            with db.write(f"taking lease {name}") as conn:
                now = db_now(conn)
                conn.execute(insert(leases).values(name=name, owner=owner, host=host, pid=pid, acquired_at=now,
                                                   heartbeat_at=now))
            return LeaseResult(acquired=True)
        except StoreConflict:
            pass
        with db.write(f"taking lease {name}") as conn:
            before = holder(conn, name)
            if before is None:
                continue
            now = db_now(conn)
            cond = and_(leases.c.name == name, leases.c.owner == before.owner)
            if not (force or before.owner == owner or dead(before)):
                cond = and_(cond, leases.c.heartbeat_at < now - stale_after_s)
            res = conn.execute(update(leases).where(cond).values(owner=owner, host=host, pid=pid, acquired_at=now,
                                                                 heartbeat_at=now))
            if res.rowcount == 1:
                return LeaseResult(acquired=True, holder=before, taken_over=before.owner != owner)
            return LeaseResult(acquired=False, holder=holder(conn, name) or before)
    return LeaseResult(acquired=False, holder=None)


def renew(db: Database, name: str, owner: str) -> bool:
    """Heartbeat; False when the lease is no longer ours (taken over or broken)."""
    with db.write(f"renewing lease {name}") as conn:
        return renew_on(conn, name, owner)


def renew_on(conn: Connection, name: str, owner: str) -> bool:
    """The heartbeat's statement on an open transaction (also the outage guard: store/outage.py)."""
    res = conn.execute(update(leases).where(leases.c.name == name, leases.c.owner == owner)
                       .values(heartbeat_at=db_now(conn)))
    return res.rowcount == 1


def release(db: Database, name: str, owner: str) -> None:
    with db.write(f"releasing lease {name}") as conn:
        conn.execute(delete(leases).where(leases.c.name == name, leases.c.owner == owner))


class LeaseRepository:
    """The store's leases (Store mixes this in)."""

    db: Database

    def acquire_lease(self, name: str, owner: str, host: str, pid: int, stale_after_s: float,
                      force: bool = False, dead: Callable[[LeaseHolder], bool] = lambda holder: False) -> LeaseResult:
        return acquire(self.db, name, owner, host, pid, stale_after_s, force, dead)

    def renew_lease(self, name: str, owner: str) -> bool:
        return renew(self.db, name, owner)

    def release_lease(self, name: str, owner: str) -> None:
        release(self.db, name, owner)

    def lease_holder(self, name: str) -> LeaseHolder | None:
        with self.db.read(f"reading lease {name}") as conn:
            return holder(conn, name)
