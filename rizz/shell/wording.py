"""Wording of user-facing messages: counts (``1 branch``, ``2 branches``) and a "did you mean"
for a misspelt key."""

from __future__ import annotations

import difflib
from typing import Iterable

__all__ = ["did_you_mean", "plural"]


def plural(n: int, word: str, words: str | None = None) -> str:
    """``"{n} {word}"`` when ``n == 1``, else ``"{n} {words}"`` (default ``word + "s"``).

    Example:
        >>> plural(1, "branch", "branches"), plural(3, "step"), plural(0, "policy", "policies")
        ('1 branch', '3 steps', '0 policies')
    """
    return f"{n} {word}" if n == 1 else f"{n} {words if words is not None else word + 's'}"


def did_you_mean(key: str, allowed: Iterable[str]) -> str:
    """``"; did you mean `x`?"`` for the closest of ``allowed`` to a misspelt ``key``
    (:func:`difflib.get_close_matches`, its default cutoff 0.6), else ``""``.

    Example:
        >>> did_you_mean("snap_treshold", ["snap_threshold", "top_k"]), did_you_mean("zzz", ["top_k"])
        ('; did you mean `snap_threshold`?', '')
    """
    close = difflib.get_close_matches(key, list(allowed), n=1)
    return f"; did you mean `{close[0]}`?" if close else ""
