"""The store's one SQLAlchemy MetaData: every table module registers its tables here."""

from __future__ import annotations

from sqlalchemy import MetaData

metadata = MetaData()
