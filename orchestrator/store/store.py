"""The results store: SQLite by default, PostgreSQL for clusters. `Store` is one repository per concern
(sweeps and environments, trials, view reads, capacity and recommendations, nightly runs, leases) over one
`Database` (store/db.py), the single place where driver errors become StoreError. Rows come back as records
(store/rows.py); inserts take records."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from ..errors import StoreError
from .db import Database
from .decisions import DecisionRepository
from .leases import LeaseRepository
from .nightly import NightlyRepository
from .results import ResultRepository
from .sweeps import SweepRepository, now
from .trials import TrialRepository

__all__ = ["Store", "now"]


class Store(SweepRepository, TrialRepository, ResultRepository, DecisionRepository, NightlyRepository,
            LeaseRepository):
    def __init__(self, url: str):
        self.db = Database(url)
        self.url = self.db.url
        self.create_schema()

    @property
    def engine(self) -> Engine:
        return self.db.engine

    @property
    def display_url(self) -> str:
        return self.db.display_url

    def create_schema(self) -> None:
        """Create or upgrade the schema to the newest migration (store/migrate.py), and create Optuna's tables,
        under one lock: processes opening one new database at once never race on DDL (store/migrate.py)."""
        from .migrate import initialise

        try:
            self.schema_revisions = initialise(self.engine)
            self.db.outage.reached = True
        except OperationalError as e:
            raise StoreError(f"cannot reach store {self.display_url}: {e.orig}") from None
        except SQLAlchemyError as e:
            raise StoreError(f"cannot create or upgrade the schema in {self.display_url}: {e}") from None

    def dispose(self) -> None:
        self.db.dispose()


def _through_outages(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: Store, *args: Any, **kwargs: Any) -> Any:
        return self.db.retry(lambda: method(self, *args, **kwargs))

    return call


# Every public repository method is one operation retried through a store outage (store/outage.py).
for _repository in (SweepRepository, TrialRepository, ResultRepository, DecisionRepository, NightlyRepository,
                    LeaseRepository):
    for _name, _method in vars(_repository).items():
        if not _name.startswith("_") and inspect.isfunction(_method):
            setattr(Store, _name, _through_outages(_method))
