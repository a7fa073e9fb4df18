"""Drafter methods. Importing this package registers every method module in it."""

from .base import Method, MethodError, MethodPoint, Param
from .registry import get_method, known_methods, register

# Each import registers one method (one file per method).
from . import baseline, draft_model, ngram  # noqa: E402,F401

__all__ = ["Method", "MethodError", "MethodPoint", "Param", "get_method", "known_methods", "register"]
