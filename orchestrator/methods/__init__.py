"""Drafter methods. Importing this package registers every method module in it."""

# Each import registers one method (one file per method).
from . import baseline, dflash, draft_model, eagle3, ngram, xpress  # noqa: E402,F401
from .base import Method, MethodError, MethodPoint, Param
from .registry import get_method, known_methods, register

__all__ = ["Method", "MethodError", "MethodPoint", "Param", "get_method", "known_methods", "register"]
