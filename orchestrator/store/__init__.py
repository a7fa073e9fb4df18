"""The results store (SQLAlchemy 2): tables, views and every SQL statement specsweep issues."""

from .store import Store, display_url, normalize_url

__all__ = ["Store", "display_url", "normalize_url"]
