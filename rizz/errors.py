"""The root of every exception rizz defines, so a caller can catch them all in one clause.

``except rizz.RizzError`` catches anything rizz raised on purpose. Each class keeps its
standard base as well (a bad policy is still a ``ValueError``, a full disk an ``OSError``, a
missing extra an ``ImportError``), so existing ``except`` clauses keep working.

This module imports nothing, so the pure core (:mod:`rizz.core`) and the shell share it.
"""

from __future__ import annotations

__all__ = ["MissingExtraError", "RizzError"]


class RizzError(Exception):
    """Base class of every exception defined in the rizz package."""


class MissingExtraError(RizzError, ImportError):
    """A module of an optional extra is not installed; the one-line message names the extra
    to install (``pip install 'rizz[EXTRA]'``, see :mod:`rizz.extras`)."""
